#!/usr/bin/env bash
# Flash-attention kernel experiments: tile sets and builds timed against each other on chosen
# shapes (bench attention, causal, bf16, dO = ones, wgmma kernels), and the development checks of
# a kernel family (its GPU tests, the sanitizers, timings against the defaults and SDPA). Run from
# the repository root on a GPU machine after `source .devbundle/main/env.sh`; the runner is
# scripts/gpu_steps.sh (dev/README.md). A bundle NAME is .devbundle/NAME (scripts/device_bundle.sh).
#
#   dev/experiments/flash.sh STEP[:SECONDS] ...   (default SECONDS per step: 300) | --list | --help
#
# Steps (one GPU each; variables they read in brackets). The ab-* steps time each bundle of BUNDLES
# (default "before main"; main for ab-flash-specs, ab-flash-lengths and the tile sweeps) with the
# tile sets FLASH_TILES (each step has its own default), alternating, AB_ROUNDS times (default 2):
#   ab-flash             the leaderboard case (B 1, H 16, T 16384) at d 64 and 128
#   ab-flash-specs       any shapes: AB_FLASH_SPECS="NAME:B:H:SEQS:D ..." (required) with FLASH_TILES (required)
#   ab-flash-sdpa        ab-flash (default tiles ws2x128/ws2/ws2,ws2x128/ws2/acc), then SDPA (cuDNN,
#                        flash) on the leaderboard case at d 64 and 128 in the same step
#   ab-flash-d128        d 128 only: the leaderboard shape and B 4 × H 16 at T 512…2048
#   ab-flash-short       the model's lengths: XL's B 4 × H 25 at T 512, 1024; B 4 × H 16 at T 512…2048,
#                        d 64 and 128
#   ab-flash-lengths     the crossover between defaults: XL's shape and B 4 × H 16 at T 512…8192, d 64
#                        and 128, three tile sets
#   flash-model-tiles    a dozen tile sets at XL's heads (B 4 and 16 × H 25, T 512 and 1024, d 64)
#   flash-rows-crossover 1x64/1/1 against the warp-specialised passes at d 64, T 1024, B 4 … 16 × H 25
#   flash-ws             the warp-specialised TMA kernels: flash GPU tests per tile set of WS_TILES,
#                        leaderboard d 64 and 128 against the defaults and SDPA, short lengths, sanitizers
#   flash-acc            the single-pass backward (wgmma tiles …/acc, dQ accumulated): its GPU tests,
#                        memcheck + racecheck, leaderboard and d 64/128 timings against the two-pass
#                        defaults, PyTorch SDPA in the same step
#   flash-single-pass    the warp-specialised single pass (SINGLE_PASS_TILES, default ws2x128/ws2/acc):
#                        flash GPU tests, sanitizers, leaderboard d 64 / 128 (SDPA) and B 4 × H 16
#                        T 512…2048 against ws2x128/ws2/ws2
# shellcheck disable=SC1090  # .devbundle/NAME/env.sh: the bundle is named at run time
set -uo pipefail
# shellcheck source=scripts/gpu_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/gpu_steps.sh"

# ab_flash SPECS...: the A/B of two bundles (BUNDLES, default "before main") on causal bf16 flash
# timings, each bundle twice, alternating; a SPEC is NAME:B:H:SEQS:D (SEQS comma-separated), run
# with the wgmma tiles FLASH_TILES (else ab_flash's caller's default, AB_FLASH_TILES).
ab_flash() {
  local k b spec name bb h t d
  for k in $(seq "${AB_ROUNDS:-2}"); do
    for b in ${BUNDLES:-before main}; do
      for spec in "$@"; do
        IFS=: read -r name bb h t d <<<"$spec"
        (source ".devbundle/$b/env.sh" &&
          flash_times "ab_flash_${name}_${b}_d${d}_$k" "$bb" "$h" "$t" "$d" "${FLASH_TILES:-$AB_FLASH_TILES}" |
          grep "^flash " | sed "s|^|$b |") || return
      done
    done
  done
}
# The leaderboard case at d 64 and 128 (default tiles: the warp-specialised passes).
step_ab-flash() { AB_FLASH_TILES=ws2x128/ws2/ws2 ab_flash lb:1:16:16384:64 lb:1:16:16384:128; }
# Any shapes: AB_FLASH_SPECS (NAME:B:H:SEQS:D ..., required) with FLASH_TILES (required), each bundle
# of BUNDLES (default main) in each of AB_ROUNDS (default 2) alternating rounds.
step_ab-flash-specs() {
  if [ -z "${AB_FLASH_SPECS:-}" ] || [ -z "${FLASH_TILES:-}" ]; then
    echo "ab-flash-specs: set AB_FLASH_SPECS and FLASH_TILES"; return 1
  fi
  # shellcheck disable=SC2086  # one spec a word
  BUNDLES=${BUNDLES:-main} ab_flash $AB_FLASH_SPECS
}
# The same with both warp-specialised backwards, then SDPA's backends on the two cases (the targets' peer).
step_ab-flash-sdpa() {
  FLASH_TILES=${FLASH_TILES:-ws2x128/ws2/ws2,ws2x128/ws2/acc} step_ab-flash || return
  local d bundles=${BUNDLES:-before main}
  for d in 64 128; do  # SDPA beside the last bundle's second round
    python3 scripts/bench_attention_torch.py --head-dim "$d" \
      --paratrain-h5 "$RESULTS/ab_flash_lb_${bundles##* }_d${d}_2.h5" || return
  done
}
# d 128 alone (a change that leaves d 64's instructions as they are): the leaderboard shape and
# B 4 × H 16 at T 512…2048.
step_ab-flash-d128() { AB_FLASH_TILES=ws2x128/ws2/ws2 ab_flash lb:1:16:16384:128 h16:4:16:512,1024,2048:128; }
# The model's lengths: XL's shape (B 4, H 25, T 512 and 1024) and B 4 × H 16 at T 512…2048, d 64 and
# 128 (default tiles: d 64's short-length default 1x64/1/1 and the ws default).
step_ab-flash-short() {
  AB_FLASH_TILES=1x64/1/1,ws2x128/ws2/ws2 ab_flash xl:4:25:512,1024:64 h16:4:16:512,1024,2048:64 h16:4:16:512,1024,2048:128
}
# Where one default hands over to another: XL's shape (B 4 × H 25, T 512 and 1024) and B 4 × H 16
# at T 512…8192, d 64 and 128, with FLASH_TILES (default: d 64's short-length default, the two
# warp-specialised passes and the warp-specialised single pass).
step_ab-flash-lengths() {
  AB_FLASH_TILES=1x64/1/1,ws2x128/ws2/ws2,ws2x128/ws2/acc BUNDLES=${BUNDLES:-main} ab_flash xl:4:25:512,1024:64 \
    h16:4:16:512,1024,2048,4096,8192:64 h16:4:16:512,1024,2048,4096,8192:128
}
# Every tile set the model could take at its own shapes: XL's heads (B·H = 4 × 25 and llm.c's point
# 16 × 25) at T 512 and 1024, d 64, each bundle of BUNDLES (default main) twice.
step_flash-model-tiles() {
  AB_FLASH_TILES=1x64/1/1,1x64/2/2,2x64/2/2,1x128/2/2,2x128/2/2,1x64/1/2,1x64/2/1,1x64/ws2/ws2,ws2x128/ws2/ws2,ws2x128/1/1,1x64/1/acc,ws2x128/ws2/acc \
    BUNDLES=${BUNDLES:-main} ab_flash xl:4:25:512,1024:64 llmc:16:25:512,1024:64
}
# Where d 64 at T 1024 hands over from 1x64/1/1 to the warp-specialised passes (the 2^18-row rule of
# ops/flash_attention.cpp): B 4 … 16 × H 25.
step_flash-rows-crossover() {
  AB_FLASH_TILES=1x64/1/1,ws2x128/ws2/ws2 BUNDLES=${BUNDLES:-main} ab_flash b4:4:25:1024:64 b6:6:25:1024:64 \
    b8:8:25:1024:64 b10:10:25:1024:64 b12:12:25:1024:64 b16:16:25:1024:64
}
# The warp-specialised TMA kernels: the flash GPU tests with each of their shapes, the leaderboard
# case at d 64 and 128 against the cp.async shapes and SDPA in the same step, the short lengths
# (B·H = 64) at d 64 and 128, then memcheck / racecheck / synccheck on small cases.
step_flash-ws() {
  local rc=0 t all=ws2x128/ws2/ws2
  for t in ${WS_TILES:-ws2x128/ws2/ws2 ws3x128/1/1}; do flash_tests_with "$t" || rc=1; done
  paratrain bench attention --study leaderboard --flash-kernels wgmma \
    --wgmma-tiles 1x64/1/1,ws2x128/1/1,ws3x128/ws2/ws2,$all --out "$RESULTS/flash_ws_lb.h5" --overwrite &&
  python3 scripts/bench_attention_torch.py --paratrain-h5 "$RESULTS/flash_ws_lb.h5" || rc=1
  flash_times flash_ws_d128 1 16 16384 128 2x128/2/1,2x128/ws2/ws2,$all &&
  python3 scripts/bench_attention_torch.py --head-dim 128 --paratrain-h5 "$RESULTS/flash_ws_d128.h5" || rc=1
  flash_times flash_ws_short64 4 16 512,1024,2048 64 1x64/1/1,ws2x128/1/1,1x64/ws2/ws2,$all || rc=1
  flash_times flash_ws_short128 4 16 512,1024,2048 128 2x128/2/1,2x128/ws2/ws2,$all || rc=1
  flash_sanitizers "$all" || rc=1
  return $rc
}
step_flash-acc() {
  paratrain_tests_gpu --gtest_color=no --gtest_filter='FlashGpu.SinglePassBackwardAccumulatesDq' &&
  PT_FLASH_TEST_KERNELS=wgmma PT_FLASH_TEST_WGMMA_TILES=1x64/1/acc compute-sanitizer --tool memcheck \
    --error-exitcode 3 paratrain_tests_gpu --gtest_color=no --gtest_filter='FlashGpu.OddLengths:FlashGpu.FusedQkvStrides' &&
  PT_FLASH_TEST_KERNELS=wgmma PT_FLASH_TEST_WGMMA_TILES=2x128/2/acc compute-sanitizer --tool racecheck \
    --error-exitcode 3 paratrain_tests_gpu --gtest_color=no --gtest_filter='FlashGpu.EveryHeadDim' &&
  PT_FLASH_TEST_KERNELS=wgmma PT_FLASH_TEST_WGMMA_TILES=1x64/1/acc compute-sanitizer --tool racecheck \
    --error-exitcode 3 paratrain_tests_gpu --gtest_color=no --gtest_filter='FlashGpu.Batch4Seq128D64' || return
  paratrain bench attention --study leaderboard --flash-kernels wgmma \
    --wgmma-tiles 1x64/1/1,1x64/1/acc,1x64/2/acc,2x64/2/acc,1x128/1/acc --out "$RESULTS/flash_acc_lb.h5" --overwrite &&
  python3 scripts/bench_attention_torch.py --paratrain-h5 "$RESULTS/flash_acc_lb.h5" &&
  paratrain bench attention --attention flash --precision bf16 --batch-size 1 --num-heads 16 --context-length 2048,8192,16384 --head-dim 64,128 \
    --causal 1 --dout ones --flash-kernels wgmma --wgmma-tiles 1x64/1/1,2x128/2/1,1x64/1/acc,2x128/2/acc,2x128/1/acc \
    --out "$RESULTS/flash_acc_sweep.h5" --overwrite
}
# The single pass in the warp-specialised dK/dV kernel (SINGLE_PASS_TILES, default ws2x128/ws2/acc):
# the flash GPU tests with its tiles, memcheck / racecheck / synccheck, then in one step against the
# two warp-specialised passes: the leaderboard case at d 64 and 128 with SDPA, and B 4 × H 16 at T
# 512…2048.
step_flash-single-pass() {
  local rc=0 t=${SINGLE_PASS_TILES:-ws2x128/ws2/acc} d
  local ab=ws2x128/ws2/ws2,$t
  paratrain_tests_gpu --gtest_color=no \
    --gtest_filter='FlashGpu.SinglePassBackwardAccumulatesDq:FlashGpu.BackwardRotatesDqAndDkBack' || rc=1
  flash_tests_with "$t" || rc=1
  flash_sanitizers "$t" || rc=1
  for d in 64 128; do
    flash_times "single_pass_lb_d$d" 1 16 16384 "$d" "$ab" &&
      python3 scripts/bench_attention_torch.py --head-dim "$d" --paratrain-h5 "$RESULTS/single_pass_lb_d$d.h5" || rc=1
    flash_times "single_pass_short_d$d" 4 16 512,1024,2048 "$d" "$ab" || rc=1
  done
  return $rc
}

run_steps "$@"
