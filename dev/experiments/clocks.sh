#!/usr/bin/env bash
# The GPU's clocks, power and throttle reasons (nvidia-smi every 200 ms) while a workload runs,
# summarised as min / mean / max over the busy samples: whether a long run holds the clocks a short
# benchmark sees, and whether the power cap slows a phase. Run from the repository root on a GPU
# machine after `source .devbundle/main/env.sh`; the runner is scripts/gpu_steps.sh (dev/README.md).
#
#   dev/experiments/clocks.sh STEP[:SECONDS] ...   (default SECONDS per step: 300) | --list | --help
#
# Steps (one GPU each; variables they read in brackets):
#   clocks-xl            during bench model xl bf16 flash (bf16 gradients, 20 steps), then bench gemm xl bf16
#   clocks-flash         during the leaderboard case, per tile set [CLOCKS_FLASH_D (128),
#                        CLOCKS_FLASH_TILES, CLOCKS_FLASH_ITERS (300), CLOCKS_SERIES]
#   clocks-accum         at llm.c's working point, then during its attention alone (model layout,
#                        1x64/1/1 and ws2x128/ws2/ws2): the power cap's share of the step's slower flash
set -uo pipefail
# shellcheck source=scripts/gpu_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/gpu_steps.sh"

# clocks CMD...: the SM clock, power and throttle reasons (nvidia-smi every 200 ms) while CMD runs,
# summarised as min / mean / max: whether a long run holds the clocks a short benchmark sees.
clocks() {
  local log=$RESULTS/clocks_$$.csv pid rc
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader,nounits \
    -lms 200 >"$log" &
  pid=$!
  "$@"
  rc=$?
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  python3 - "$log" <<'PY'
import collections, os, sys
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 3]
busy = [r for r in rows if float(r[1]) > 250]  # samples while the GPU works (W above idle)
if not busy:
    sys.exit(print("clocks: no busy samples"))
for i, name in ((0, "SM MHz"), (1, "power W"), (2, "temp C")):
    v = [float(r[i]) for r in busy]
    print(f"clocks: {name:8} min {min(v):7.1f} mean {sum(v) / len(v):7.1f} max {max(v):7.1f} ({len(v)} busy samples)")
print("clocks: throttle reasons", dict(collections.Counter(r[3] for r in busy)))
if os.environ.get("CLOCKS_SERIES"):  # every busy sample in order: MHz/W (which phase ran when)
    print("clocks: series", " ".join(f"{float(r[0]):.0f}/{float(r[1]):.0f}" for r in busy))
PY
  return $rc
}
step_clocks-xl() {
  clocks paratrain bench model --model xl --context-length 512 --precision bf16 --attention flash --grad-dtype bf16 \
    --warmup 3 --steps 20 --out "$RESULTS/clocks_xl.h5" --overwrite &&
  clocks paratrain bench gemm --model xl --context-length 512 --batch-size 4 --precision bf16 --out "$RESULTS/clocks_gemm.h5" --overwrite
}
# The clocks while the leaderboard case runs (CLOCKS_FLASH_D, default 128; each tile set of
# CLOCKS_FLASH_TILES alone, CLOCKS_FLASH_ITERS timed passes of each loop, default 300; the forward
# loop, then the backward's, then fwd+bwd): whether a loop runs below the boost clock, at the power
# cap. CLOCKS_SERIES=1 prints the samples in order, so each loop's share can be read off.
step_clocks-flash() {
  local t d=${CLOCKS_FLASH_D:-128}
  for t in ${CLOCKS_FLASH_TILES:-ws2x128/ws2/acc ws2x128/ws2/ws2}; do
    echo "== tiles $t, d $d"
    clocks flash_times "clocks_flash_d${d}_${t//\//_}" 1 16 16384 "$d" "$t" --steps "${CLOCKS_FLASH_ITERS:-300}" || return
  done
}
# The clocks at llm.c's working point (XL 16 x 1024, bf16 gradients, --grad-accum 4), then while the
# attention of that shape runs alone in the model's layout (1x64/1/1 and the warp-specialised passes,
# 300 timed passes each): whether the step's power cap slows the compute-bound flash kernels.
step_clocks-accum() {
  local t
  GRAD_DTYPE=bf16 clocks xl_1024 clocks_accum 16 --recompute on --grad-accum 4 --warmup 1 --steps 1 || return
  for t in 1x64/1/1 ws2x128/ws2/ws2; do
    echo "== tiles $t, model layout"
    FLASH_LAYOUT=model clocks flash_times "clocks_attn_${t//\//_}" 16 25 1024 64 "$t" --steps 300 || return
  done
}

run_steps "$@"
