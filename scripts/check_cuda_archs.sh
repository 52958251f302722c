#!/usr/bin/env bash
# Configure and compile the CUDA objects (the cuda layer and the ops dispatch above it) for each
# CMAKE_CUDA_ARCHITECTURES list given, in build-archs/<list>/; prints one line per list and exits
# non-zero if any fails. No GPU needed.
#   scripts/check_cuda_archs.sh 80 86 89 90 90a 100 120 "80-real;90a-real;100"
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
status=0
mkdir -p build-archs  # each list's log sits beside its build directory
for list in "$@"; do
  dir="build-archs/${list//;/_}"
  start=$(date +%s)
  if cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARATRAIN_BUILD_TESTS=OFF \
       "-DCMAKE_CUDA_ARCHITECTURES=$list" >"$dir.log" 2>&1 &&
     cmake --build "$dir" --target pt_cuda pt_ops -j "${JOBS:-2}" >>"$dir.log" 2>&1; then
    echo "cuda archs '$list': ok ($(( $(date +%s) - start )) s)"
  else
    echo "cuda archs '$list': FAILED (see $dir.log)"
    grep -m 5 -E "error|Error" "$dir.log"
    status=1
  fi
done
exit $status
