#!/usr/bin/env bash
# Nsight Compute (ncu) profiles: the kernels of one training step summed per kernel and launch shape
# (time, DRAM bytes and rate, occupancy, SM throughput), the flash kernels' speed of light, and one
# kernel's source page (warp-stall samples per SASS instruction, for scripts/ncu_stalls.py). ncu
# serialises kernels and locks the clocks: its times are longer than the timings. Run from the
# repository root on a GPU machine after `source .devbundle/main/env.sh`; the runner is
# scripts/gpu_steps.sh (dev/README.md). Raw CSV and reports land in $RESULTS/ncu_*.
#
#   dev/experiments/ncu.sh STEP[:SECONDS] ...   (default SECONDS per step: 300) | --list | --help
#
# Steps (one GPU each; variables they read in brackets):
#   ncu-memory           one XL bf16 step (--grad-dtype bf16): every memory-bound kernel's time, DRAM
#                        bytes and rate, summed per kernel [NCU_SIZE (small for the small model),
#                        NCU_LAUNCHES, NCU_FLAGS]
#   ab-ncu-memory        ncu-memory's table for each bundle of BUNDLES (default "before main"), over the
#                        kernels NCU_REGEX names (default rmsnorm)
#   ncu-gemm             the same for the step's GEMM kernels: time, grid (waves), SM throughput
#   ncu-flash            the default bf16 flash kernels, one forward+backward each of the leaderboard
#                        case (B 1, H 16, T 16384, d 64, causal) and XL's (B 4, H 25, T 512): speed of
#                        light, tensor pipes, occupancy, stall reasons [NCU_TILES: wgmma tiles instead
#                        of the defaults; NCU_SPECS="NAME:B:H:T:D ...": other shapes]
#   ncu-source           ncu's source page (SASS, warp-stall samples per instruction) of one flash kernel
#                        per NCU_SOURCE spec NAME:KERNEL-REGEX:B:H:T:D:TILES (default: the warp-specialised
#                        forward at d 64 and the single pass at d 128, leaderboard shape), as CSV
# shellcheck disable=SC1090  # .devbundle/NAME/env.sh: the bundle is named at run time
set -uo pipefail
# shellcheck source=scripts/gpu_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/gpu_steps.sh"

# ncu_step_table CSV: ncu's raw CSV (paratrain's own output interleaved) summed per kernel and launch
# shape: launches, total time, DRAM bytes and rate, registers, achieved occupancy, SM throughput (% of peak).
ncu_step_table() {
  python3 - "$1" <<'PY'
import csv, sys
# ncu's rows start with a quote (paratrain's own output is interleaved); numbers carry commas.
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')) if r]
col = {name: i for i, name in enumerate(rows[0])}
num = lambda r, k: float(r[col[k]].replace(",", "")) if k in col and r[col[k]] not in ("", "n/a") else 0.0
agg = {}
for r in rows[1:]:
    if not r[col["ID"]].isdigit():
        continue
    key = (r[col["Kernel Name"]][:90], r[col["launch__grid_size"]], r[col["launch__block_size"]])
    a = agg.setdefault(key, [0, 0.0, 0.0, r[col["launch__registers_per_thread"]], 0.0, 0.0])
    a[0] += 1
    a[1] += num(r, "gpu__time_duration.sum") * 1e-6
    a[2] += (num(r, "dram__bytes_read.sum") + num(r, "dram__bytes_write.sum")) * 1e-9
    a[4] += num(r, "sm__warps_active.avg.pct_of_peak_sustained_active")
    a[5] += num(r, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
print(f"{'kernel':90} {'grid':>7} {'blk':>4} {'n':>4} {'ms':>7} {'GB':>6} {'TB/s':>5} {'reg':>4} {'occ%':>5} {'sm%':>5}")
for (name, grid, blk), a in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{name:90} {grid:>7} {blk:>4} {a[0]:>4} {a[1]:7.3f} {a[2]:6.2f} {a[2] / a[1]:5.2f} {a[3]:>4}"
          f" {a[4] / a[0]:5.1f} {a[5] / a[0]:5.1f}")
print(f"total {sum(a[1] for a in agg.values()):.3f} ms over {sum(a[0] for a in agg.values())} launches"
      " (DRAM bytes: writes still in L2 when a kernel ends are not counted)")
PY
}
# ncu_step NAME KERNEL_REGEX [metric...]: ncu over the measured step (NVTX range "measured step",
# after one warm-up step, so --gemm autotune's candidates are not profiled) of XL (NCU_SIZE) bf16,
# --grad-dtype bf16: the kernels matching KERNEL_REGEX, summed per kernel by ncu_step_table.
# NCU_FLAGS adds ncu options (e.g. "--clock-control none --cache-control none": the GPU's own clocks
# and warm caches, as `bench gemm` times its kernels).
ncu_step() {
  local name=$1 regex=$2 size=${NCU_SIZE:-xl}
  shift 2
  local csv=$RESULTS/ncu_${name}_$size.csv metrics
  metrics=$(IFS=,; echo "gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,$*")
  # shellcheck disable=SC2086
  ncu --csv --page raw --print-units base --launch-count "${NCU_LAUNCHES:-1200}" --kernel-name regex:"$regex" \
    --nvtx --nvtx-include "measured step/" --metrics "$metrics" ${NCU_FLAGS:-} \
    paratrain bench model --model "$size" --context-length 512 --precision bf16 --attention flash --grad-dtype bf16 \
    --warmup 1 --steps 1 --out "$RESULTS/ncu_${name}_$size.h5" --overwrite >"$csv" || return
  ncu_step_table "$csv"
}
# The memory-bound kernels of one step (GEMMs, flash and AdamW are profiled elsewhere).
step_ncu-memory() {
  ncu_step memory 'rmsnorm|rope|map_kernel|swiglu|gather_rows|scatter_add|cross_entropy|add_sums|squared_norm|first_row|sum_rows' \
    dram__bytes_read.sum dram__bytes_write.sum sm__warps_active.avg.pct_of_peak_sustained_active
}
# ncu-memory's table for each bundle of BUNDLES in turn, over the kernels NCU_REGEX names (default
# RMSNorm's): the kernels alone, serialised, clocks locked, against the same kernels in a plain step.
step_ab-ncu-memory() {
  local b
  for b in ${BUNDLES:-before main}; do
    echo "--- $b"
    (source ".devbundle/$b/env.sh" && ncu_step "memory_$b" "${NCU_REGEX:-rmsnorm}" dram__bytes_read.sum \
      dram__bytes_write.sum sm__warps_active.avg.pct_of_peak_sustained_active) || return
  done
}
# The GEMMs of one step (cuBLAS's kernels: nvjet on Hopper, sm90/sm80 xmma, cutlass): time per
# kernel and launch shape, the grid against the SM count (waves), SM throughput.
step_ncu-gemm() {
  ncu_step gemm 'nvjet|gemm|xmma|cutlass' sm__throughput.avg.pct_of_peak_sustained_elapsed \
    dram__bytes_read.sum dram__bytes_write.sum
}
step_ncu-flash() {
  local spec name b h t d
  for spec in ${NCU_SPECS:-leaderboard:1:16:16384:64 xl:4:25:512:64}; do
    IFS=: read -r name b h t d <<<"$spec"
    ncu --csv --page raw --print-units base --kernel-name regex:'flash' --launch-count 8 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats \
      --section LaunchStats --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
      paratrain bench attention --attention flash --precision bf16 --batch-size "$b" --num-heads "$h" --context-length "$t" --head-dim "$d" \
      --causal 1 --dout ones --warmup 1 --steps 1 ${NCU_TILES:+--flash-kernels wgmma --wgmma-tiles "$NCU_TILES"} \
      --out "$RESULTS/ncu_flash_$name.h5" --overwrite \
      >"$RESULTS/ncu_flash_$name.csv" || return
    grep -c '^"[0-9]' "$RESULTS/ncu_flash_$name.csv"
  done
}
# Where each instruction of a kernel waits: the report with the SourceCounters section, and its
# source page as CSV (one row per SASS instruction: opcode, samples, stall reasons) for
# scripts/ncu_stalls.py.
step_ncu-source() {
  local spec name re b h t d tiles
  for spec in ${NCU_SOURCE:-fwd64:flash_fwd_ws:1:16:16384:64:ws2x128/ws2/acc acc128:flash_bwd_dkdv_ws:1:16:16384:128:ws2x128/ws2/acc}; do
    IFS=: read -r name re b h t d tiles <<<"$spec"
    ncu --kernel-name regex:"$re" --launch-count 1 --section SourceCounters --section WarpStateStats \
      --import-source no -f -o "$RESULTS/ncu_source_$name" \
      paratrain bench attention --attention flash --precision bf16 --batch-size "$b" --num-heads "$h" --context-length "$t" --head-dim "$d" \
      --causal 1 --dout ones --warmup 0 --steps 1 --flash-kernels wgmma --wgmma-tiles "$tiles" \
      --out "$RESULTS/ncu_source_$name.h5" --overwrite || return
    ncu --import "$RESULTS/ncu_source_$name.ncu-rep" --page source --csv --print-source sass \
      >"$RESULTS/ncu_source_$name.csv" || return
    wc -l "$RESULTS/ncu_source_$name.csv"
  done
}

run_steps "$@"
