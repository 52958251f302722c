#!/usr/bin/env bash
# FlashAttention-3 (Dao-AILab/flash-attention, hopper/), built from its source as issue 18's peer
# for the `fa3-peer` step of scripts/gpu_checks.sh: dev/fa3_peer/fa3_bench.cu calls FA3's own
# launchers (no PyTorch), bf16, d 64 and 128, forward and backward, for sm_90a.
#
#   dev/build_fa3.sh FA_GIT_DIR [COMMIT]      (COMMIT default 0251105a, the one measured so far)
#
# FA_GIT_DIR is a clone or a bare mirror (what the `fetch` tool gives for
# github:Dao-AILab/flash-attention). hopper/ of COMMIT is extracted into .peers/flash-attention
# (ignored by git). CUTLASS's headers come from the pinned `nvidia-cutlass` wheel in .venv (as
# dev/build_probe_cutlass.sh takes them), not FA's csrc/cutlass submodule.
#
# The compile flags are hopper/setup.py's, with --expt-relaxed-constexpr (which PyTorch's extension
# builder adds to every nvcc call). The features the peer case does not use are compiled
# out with FA3's own switches (FLASHATTENTION_DISABLE_*: local windows, varlen, paged and appended
# KV, splits, softcap, packed GQA, fp16, fp8), which leaves the dense causal and non-causal
# kernels as they are. One difference: clusters are off too, which FA3 uses only for non-causal
# d 128 forwards (2-CTA clusters); causal timings are unaffected.
# About 15-25 minutes on two cores (four kernel instantiations).
set -euo pipefail
src=${1:?usage: dev/build_fa3.sh FA_GIT_DIR [COMMIT]}
commit=${2:-0251105a}
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/.peers/flash-attention
bin=${FA3_BENCH_OUT:-$repo/.devbundle/fa3_bench}

py=$repo/.venv/bin/python
[[ -x $py ]] || bash "$repo/scripts/setup_python.sh"
cutlass_src() { "$py" -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))' 2>/dev/null; }
cutlass=$(cutlass_src) || { "$py" -m pip install --quiet nvidia-cutlass==4.2.0.0 && cutlass=$(cutlass_src); }
[[ -f $cutlass/include/cutlass/cutlass.h ]] || { echo "build_fa3: no CUTLASS headers under $cutlass" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out" "$out/obj" "$(dirname "$bin")"
git --git-dir="$(git -C "$src" rev-parse --absolute-git-dir)" archive "$commit" hopper | tar -x -C "$out"
h=$out/hopper

flags=(-O3 -std=c++17 --use_fast_math -lineinfo --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a
  -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90 -DCUTLASS_DEBUG_TRACE_LEVEL=0 -DNDEBUG
  -DFLASHATTENTION_DISABLE_LOCAL -DFLASHATTENTION_DISABLE_VARLEN -DFLASHATTENTION_DISABLE_PAGEDKV
  -DFLASHATTENTION_DISABLE_APPENDKV -DFLASHATTENTION_DISABLE_SPLIT -DFLASHATTENTION_DISABLE_SOFTCAP
  -DFLASHATTENTION_DISABLE_PACKGQA -DFLASHATTENTION_DISABLE_FP16 -DFLASHATTENTION_DISABLE_FP8
  -DFLASHATTENTION_DISABLE_CLUSTER -DFLASHATTENTION_DISABLE_SM8x -DFLASHATTENTION_DISABLE_HDIMDIFF64
  -I"$h" -I"$cutlass/include" -I"$cutlass/tools/util/include")
units=("$h/instantiations/flash_fwd_hdim64_bf16_sm90.cu" "$h/instantiations/flash_fwd_hdim128_bf16_sm90.cu"
  "$h/instantiations/flash_bwd_hdim64_bf16_sm90.cu" "$h/instantiations/flash_bwd_hdim128_bf16_sm90.cu"
  "$h/flash_prepare_scheduler.cu" "$repo/dev/fa3_peer/fa3_bench.cu")
objs=()
pids=()
for u in "${units[@]}"; do
  o=$out/obj/$(basename "${u%.cu}").o
  objs+=("$o")
  nvcc "${flags[@]}" -c "$u" -o "$o" &
  pids+=($!)
  # Two at a time: each instantiation takes several GB of memory and a core.
  if ((${#pids[@]} == 2)); then
    wait "${pids[0]}"
    pids=("${pids[1]}")
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
nvcc -gencode arch=compute_90a,code=sm_90a "${objs[@]}" -o "$bin"
echo "$bin (FlashAttention-3 $commit)"
