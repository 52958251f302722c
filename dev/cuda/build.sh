#!/usr/bin/env bash
# Builds dev/cuda's measurement programs for the GPU machine into OUT (default .devbundle, which
# a device call carries): dev/cuda/build.sh [--out DIR] [--build BUILD_DIR] PROGRAM...
# (PROGRAM: a dev/cuda/*.cu file's name without .cu; all of them by default).
# rmsnorm_variants compiles the production kernels of cuda/rmsnorm.cu into itself and links
# BUILD_DIR's libparatrain.so (default build-hopper), which a bundle's env.sh puts on the path.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.devbundle build=build-hopper
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "dev/cuda/build.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
programs=("$@")
if [[ ${#programs[@]} -eq 0 ]]; then
  for src in dev/cuda/*.cu; do programs+=("$(basename "$src" .cu)"); done
fi
mkdir -p "$out"
for p in "${programs[@]}"; do
  src=dev/cuda/$p.cu
  [[ -f $src ]] || { echo "dev/cuda/build.sh: no $src" >&2; exit 2; }
  flags=(-O3 -std=c++17 -arch=sm_90a)
  if [[ $p == rmsnorm_variants ]]; then
    [[ -f $build/libparatrain.so ]] || { echo "dev/cuda/build.sh: $p links $build/libparatrain.so: build it first" >&2; exit 2; }
    flags+=(-I"$build/layers/cuda" -isystem=/usr/include/hdf5/serial --expt-relaxed-constexpr -Xcompiler -fPIC
      -L"$build" -lparatrain)
  fi
  echo "nvcc ${flags[*]} -o $out/$p $src"
  nvcc "${flags[@]}" -o "$out/$p" "$src"
done
