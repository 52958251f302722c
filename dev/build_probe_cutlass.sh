#!/usr/bin/env bash
# Builds dev/probe_cutlass_swiglu.cu for sm_90a with CUTLASS 4's headers from the pinned
# `nvidia-cutlass` wheel (installed into .venv, as scripts/setup_python.sh makes it, if missing).
#   dev/build_probe_cutlass.sh [OUTPUT]   (default .devbundle/probe_cutlass_swiglu, which the
#                                          device runs carry; dev/experiments/probes.sh probe-cutlass-swiglu)
# About 5 minutes on two cores: every tile configuration is a kernel of its own.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/.devbundle/probe_cutlass_swiglu}
py=$repo/.venv/bin/python
[[ -x $py ]] || bash "$repo/scripts/setup_python.sh"
cutlass_src() { "$py" -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))' 2>/dev/null; }
src=$(cutlass_src) || { "$py" -m pip install --quiet nvidia-cutlass==4.2.0.0 && src=$(cutlass_src); }
[[ -f $src/include/cutlass/cutlass.h ]] || { echo "build_probe_cutlass: no CUTLASS headers under $src" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
# -DNDEBUG: CUTLASS's device asserts are calls, across which ptxas serialises every wgmma.
nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -I"$src/include" -I"$src/tools/util/include" \
  "$repo/dev/probe_cutlass_swiglu.cu" -lcublas -o "$out"
echo "built $out"
