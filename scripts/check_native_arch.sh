#!/usr/bin/env bash
# On a machine with a GPU: configure a tiny CUDA project through cmake/cuda_architectures.cmake with
# CMAKE_CUDA_ARCHITECTURES=native, print what "native" resolved to, and compile the wgmma and the
# mma.sync flash kernels for it (the project's own dependencies — MPI, HDF5, Boost — are not needed).
#   scripts/check_native_arch.sh [BUILD_DIR]     (default /tmp/pt-native)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/tmp/pt-native}
rm -rf "$dir" && mkdir -p "$dir/src"
cat >"$dir/src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
include($repo/cmake/cuda_architectures.cmake)
project(native_check LANGUAGES CXX CUDA)
message(STATUS "native_check: CMAKE_CUDA_ARCHITECTURES=\${CMAKE_CUDA_ARCHITECTURES}")
add_library(flash OBJECT $repo/cuda/flash/flash_fwd_wgmma.cu $repo/cuda/flash/flash_fwd_bf16.cu)
target_include_directories(flash PRIVATE $repo $repo/src)
target_compile_options(flash PRIVATE --expt-relaxed-constexpr)
set_target_properties(flash PROPERTIES CUDA_STANDARD 17 CXX_STANDARD 17)
CMAKE
cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=native | grep -E "native|architectures"
cmake --build "$dir/build" -j "$(nproc)" >/dev/null
echo "native_check: compiled $(find "$dir/build/CMakeFiles/flash.dir" -name "*.o" | wc -l) CUDA objects"
