# shellcheck shell=bash
# The step runner shared by scripts/gpu_checks.sh and dev/experiments/*.sh, and the bench helpers
# their steps have in common. Sourced, not run: a script defines its steps as step_NAME functions,
# then calls `run_steps "$@"`. Each step runs under its own timeout and logs to $RESULTS/NAME.log;
# after each step $RESULTS is packed into $OUT/results.tgz and a line goes to $OUT/summary.txt, so
# nothing is lost to the few files a machine may send back.
#
#   SCRIPT STEP[:SECONDS] ...   run the steps in order (default SECONDS per step: 300); a step
#                               written A+B runs A on GPU 0 and B on GPU 1 at the same time
#   SCRIPT --list               the script's steps, one per line
#   SCRIPT --help               the script's header: its steps and the variables they read
: "${OUT:=out/gpu_checks}"
RESULTS=${RESULTS:-/tmp/paratrain_gpu_checks}
NP=${NP:-2}  # ranks of the multi-GPU steps: one GPU each
# --bind-to none: Open MPI binds each rank to one core when np <= 2, and the weights' threaded
# initialisation (XL: 1.6 B normal draws) then takes about a minute a rank.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$NP" -x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE)
PT_STEP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

pack() {
  tar -C "$RESULTS" -czf "$OUT/results.tgz" . 2>/dev/null
}

# run_one NAME SECONDS [CUDA_VISIBLE_DEVICES]
run_one() {
  local name=$1 secs=$2 dev=${3:-} start rc
  start=$(date +%s)
  echo "=== $name (limit ${secs}s${dev:+, GPU $dev}) $(date -u +%H:%M:%S)"
  if [ -n "$dev" ]; then
    CUDA_VISIBLE_DEVICES=$dev timeout -k 10 "$secs" bash -c "$(declare -f); $(declare -p MPIRUN RESULTS NP); step_$name" \
      >"$RESULTS/$name.log" 2>&1
  else
    timeout -k 10 "$secs" bash -c "$(declare -f); $(declare -p MPIRUN RESULTS NP); step_$name" \
      >"$RESULTS/$name.log" 2>&1
  fi
  rc=$?
  echo "$name rc=$rc $(($(date +%s) - start))s" | tee -a "$OUT/summary.txt"
  tail -n 25 "$RESULTS/$name.log"
  pack
  return 0
}

# known_step NAME: whether this script defines the step; if not, one line on stderr (naming the
# script that has it, when another one does).
known_step() {
  declare -F "step_$1" >/dev/null && return 0
  local f home=""
  for f in "$PT_STEP_ROOT"/scripts/gpu_checks.sh "$PT_STEP_ROOT"/dev/experiments/*.sh; do
    if "$f" --list 2>/dev/null | grep -qxF -- "$1"; then home=${f#"$PT_STEP_ROOT"/}; break; fi
  done
  echo "$(basename "$0"): unknown step '$1'${home:+ (it is in $home)}" >&2
  return 1
}

run_steps() {
  local spec secs steps s bad=0
  case "${1:-}" in
    -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; return 0 ;;
    --list) declare -F | sed -n 's/^declare -f step_//p'; return 0 ;;
    "" | -*)
      echo "$(basename "$0"): ${1:+unknown option '$1'; }usage: $(basename "$0") STEP[:SECONDS] ... | --list | --help" >&2
      exit 2 ;;
  esac
  for spec in "$@"; do  # every name and limit checked before the first step starts
    secs=${spec##*:}
    [[ $secs == "$spec" || $secs =~ ^[0-9]+(\.[0-9]+)?[smhd]?$ ]] ||
      { echo "$(basename "$0"): '$spec': the time limit is not a duration timeout(1) takes" >&2; bad=1; }
    steps=${spec%%:*}
    for s in ${steps//+/ }; do known_step "$s" || bad=1; done
  done
  ((bad)) && exit 2
  mkdir -p "$OUT" "$RESULTS"
  export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
  trap pack EXIT
  for spec in "$@"; do
    secs=${spec##*:}
    [ "$secs" = "$spec" ] && secs=300
    steps=${spec%%:*}
    if [[ $steps == *+* ]]; then
      run_one "${steps%%+*}" "$secs" 0 &
      run_one "${steps##*+}" "$secs" 1 &
      wait
    else
      run_one "$steps" "$secs"
    fi
  done
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$OUT/summary.txt" 2>/dev/null
}

# bench_model NAME SIZE PRECISION ATTENTION [extra flags...]: one configuration at context 512,
# BENCH_WARMUP (2) warm-up and BENCH_STEPS (5) measured steps.
bench_model() {
  local name=$1 size=$2 prec=$3 attn=$4
  shift 4
  paratrain bench model --model "$size" --context-length 512 --precision "$prec" --attention "$attn" \
    --warmup "${BENCH_WARMUP:-2}" --steps "${BENCH_STEPS:-5}" "$@" --out "$RESULTS/$name.h5" --overwrite
}
# ab_model NAME SIZE STEPS [extra flags...]: bf16 flash, 3 warm-up steps: the A/B steps' runs.
ab_model() {
  local name=$1 size=$2 steps=$3
  shift 3
  BENCH_WARMUP=3 BENCH_STEPS=$steps bench_model "$name" "$size" bf16 flash "$@"
}
# xl_1024 NAME BATCH [extra flags...]: XL, context 1024, bf16 flash, GRAD_DTYPE gradients (default
# fp32), the accumulation steps' runs.
xl_1024() {
  local name=$1 batch=$2
  shift 2
  paratrain bench model --model xl --context-length 1024 --precision bf16 --attention flash --batch-size "$batch" \
    --grad-dtype "${GRAD_DTYPE:-fp32}" "$@" --out "$RESULTS/$name.h5" --overwrite
}
# llm.c's working point: micro-batch 16 × 1024 with --grad-accum 16 (262 144 tokens a step), which
# fits on 80 GB with bf16 gradients. accum_16 NAME [flags...]: one run of it, ACCUM_WARMUP warm-up
# steps (default 1; --cuda-graph on needs 2) and two measured ones, gradients in GRAD_DTYPE (default bf16).
accum_16() {
  local name=$1
  shift
  GRAD_DTYPE=${GRAD_DTYPE:-bf16} xl_1024 "$name" 16 --grad-accum 16 --warmup "${ACCUM_WARMUP:-1}" --steps 2 "$@"
}
# Causal bf16 flash timings with dO = ones: RECORD B H SEQ D TILES [more bench attention options]; in
# FLASH_LAYOUT's layout when set (heads or model: bench attention --layout).
flash_times() {
  paratrain bench attention --attention flash --precision bf16 --batch-size "$2" --num-heads "$3" --context-length "$4" --head-dim "$5" \
    --causal 1 --dout ones --flash-kernels wgmma --wgmma-tiles "$6" ${FLASH_LAYOUT:+--layout "$FLASH_LAYOUT"} \
    --out "$RESULTS/$1.h5" --overwrite "${@:7}"
}
# flash_tests_with TILES: every FlashGpu test with the wgmma kernels of TILES (the two tests that
# name their own tiles left out).
flash_tests_with() {
  echo "== flash GPU tests, tiles $1"
  PT_FLASH_TEST_KERNELS=wgmma PT_FLASH_TEST_WGMMA_TILES=$1 paratrain_tests_gpu --gtest_color=no \
    --gtest_filter='FlashGpu.*:-FlashGpu.SinglePassBackwardAccumulatesDq:FlashGpu.WarpSpecializedKernels'
}
# flash_sanitizers TILES: compute-sanitizer memcheck, racecheck, synccheck on small flash cases with
# TILES. racecheck takes minutes on OddLengths' many shapes: the fused-QKV case (d 16, 64, 128) instead.
flash_sanitizers() {
  local tool rc=0
  for tool in memcheck:OddLengths racecheck:FusedQkvStrides synccheck:OddLengths; do
    echo "== compute-sanitizer ${tool%%:*}, tiles $1"
    PT_FLASH_TEST_KERNELS=wgmma PT_FLASH_TEST_WGMMA_TILES=$1 compute-sanitizer --tool "${tool%%:*}" --error-exitcode 3 \
      paratrain_tests_gpu --gtest_color=no --gtest_filter="FlashGpu.Batch4Seq128D64:FlashGpu.${tool#*:}" || rc=1
  done
  return $rc
}
