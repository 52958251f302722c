#!/usr/bin/env bash
# Builds the host code with AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/, Hopper
# image only, so the CUDA part compiles quickly) and runs every test that needs no GPU under them:
# the CPU and MPI suites and the script suites, which drive the sanitised binary through hostile
# inputs, faults, resume and the report. Any sanitizer finding fails its test (UBSan does not
# recover). No GPU needed; about 15 minutes on two cores. Not part of CI (it doubles its time).
#   scripts/check_host_sanitizers.sh [ctest options, e.g. -R dist_]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags" >/dev/null
cmake --build build-asan -j "$(nproc)"
# Leaks: MPI and HDF5 keep process-lifetime allocations. protect_shadow_gap=0: the CUDA runtime
# maps memory where ASan's shadow gap would be.
export ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0 UBSAN_OPTIONS=print_stacktrace=1
# format: not a property of the binary; scripts_slurm: its daemons, not the code, set its pace.
ctest --test-dir build-asan -LE gpu -E '^(format|scripts_slurm)$' -j "$(nproc)" --output-on-failure "$@"
