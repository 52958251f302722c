#!/usr/bin/env bash
# Probes: measurements taken before building something (a fused epilogue, an overlapped update),
# dev/cuda's launch variants against the production kernels, and what NCCL picks. Each runs a
# program of dev/ built beforehand (its build script says how and where). Run from the repository
# root on a GPU machine after `source .devbundle/main/env.sh`; the runner is scripts/gpu_steps.sh
# (dev/README.md).
#
#   dev/experiments/probes.sh STEP[:SECONDS] ...   (default SECONDS per step: 300) | --list | --help
#
# Steps (GPUs they need; variables they read in brackets):
#   probe-opt-overlap    dev/probe_optimizer_overlap.py: an AdamW update under the next forward, with
#                        PyTorch's GEMMs and a Triton AdamW at XL's shapes                        (1)
#   probe-swiglu-epilogue dev/probe_swiglu_epilogue.py: SwiGLU forward and backward as Triton GEMM
#                        epilogues against cuBLAS + one pass, at XL's shapes                      (1)
#   probe-cutlass-swiglu dev/probe_cutlass_swiglu.cu (dev/build_probe_cutlass.sh builds it into
#                        .devbundle): CUTLASS against cuBLAS on the FFN GEMMs, SwiGLU's backward as a
#                        CUTLASS epilogue [PROBE_CUTLASS: another binary]                         (1)
#   dev-variants         dev/cuda's programs (dev/cuda/build.sh puts them in .devbundle): launch
#                        variants against the production kernels, bit for bit, and the byte-mix
#                        floors of the memory-bound passes [DEV_VARIANTS, default
#                        "stream_variants rmsnorm_variants"]                                      (1)
#   nccl-channels        NCCL_DEBUG=INFO all-reduce of 1 GB: the channel count NCCL picks         (NP)
set -uo pipefail
# shellcheck source=scripts/gpu_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/gpu_steps.sh"

step_probe-opt-overlap() { python3 dev/probe_optimizer_overlap.py; }
step_probe-swiglu-epilogue() { python3 dev/probe_swiglu_epilogue.py; }
step_probe-cutlass-swiglu() {
  local bin=${PROBE_CUTLASS:-.devbundle/probe_cutlass_swiglu}
  [ -x "$bin" ] || { echo "probe-cutlass-swiglu: no $bin (build it here: dev/build_probe_cutlass.sh)"; return 1; }
  "$bin"
}
# dev/cuda's measurement programs (dev/cuda/build.sh puts them in .devbundle), after a bundle's env.sh
# (rmsnorm_variants links its libparatrain.so).
step_dev-variants() {
  local p
  for p in ${DEV_VARIANTS:-stream_variants rmsnorm_variants}; do
    [ -x ".devbundle/$p" ] || { echo "dev-variants: no .devbundle/$p (dev/cuda/build.sh $p)"; return 1; }
    echo "--- $p"
    ".devbundle/$p" || return
  done
}
step_nccl-channels() {
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING "${MPIRUN[@]}" -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
    paratrain bench allreduce --bytes 1G --out "$RESULTS/allreduce_2.h5" --overwrite 2>&1 |
    grep -E "channels|nChannels|Channel 0|Connected all|NCCL version" | head -40
}

run_steps "$@"
