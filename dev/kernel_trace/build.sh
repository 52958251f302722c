#!/usr/bin/env bash
# Builds the CUPTI kernel tracer (kernel_trace.cpp) into build-trace/libpt_kernel_trace.so, with
# the CUPTI library beside it so the GPU machine needs none of its own.
set -euo pipefail
cuda=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
inc=$(dirname "$(find "$cuda/" -name cupti.h -print -quit)")
lib=$(dirname "$(find "$cuda/" -name 'libcupti.so*' -print -quit)")
out=${1:-build-trace}
mkdir -p "$out"
g++ -O2 -std=c++17 -shared -fPIC -I"$inc" -I"$cuda/include" -o "$out/libpt_kernel_trace.so" \
  "$(dirname "$0")/kernel_trace.cpp" -L"$lib" -lcupti -Wl,-rpath,'$ORIGIN'
cp -L "$lib"/libcupti.so.* "$out/" 2>/dev/null || true
ls -la "$out"
