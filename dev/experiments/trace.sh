#!/usr/bin/env bash
# Kernel traces: every kernel's start and end in plain steps (CUPTI; dev/kernel_trace, loaded by
# the driver through CUDA_INJECTION64_PATH), summed per phase and op family, per gap, or kernel by
# kernel against another build (dev/kernel_trace/{families,gaps,compare}.py). Build the tracer on
# this machine with dev/kernel_trace/build.sh and carry build-trace. Run from the repository root on
# a GPU machine after `source .devbundle/main/env.sh`; the runner is scripts/gpu_steps.sh (dev/README.md).
#
#   dev/experiments/trace.sh STEP[:SECONDS] ...   (default SECONDS per step: 300) | --list | --help
#
# Steps (one GPU each; variables they read in brackets):
#   kernel-trace         XL bf16 gradients, small with and without a CUDA graph (TRACE_CONFIGS: one
#                        configuration a line, SIZE PRECISION ATTENTION [flags]), then gaps.py and
#                        families.py: idle time and the gaps between kernels, per step [TRACE_TAG]
#   roofline-trace       XL bf16 gradients (ROOFLINE_TRACE_CONFIGS: --recompute swiglu, then on): the
#                        breakdown's roofline, then a trace of plain steps (update in order) by family
#   trace-accum          llm.c's point (XL 16 x 1024, bf16 gradients, --grad-accum 4) traced: the families'
#                        kernel time per micro-batch of the measured step [TRACE_ACCUM_OPTIONS]
#   ab-trace             roofline-trace's traced run (its first configuration) for each bundle of BUNDLES
#                        (default "before main"), alternating twice
#   ab-trace-accum       trace-accum for each bundle of BUNDLES, then compare.py of each against the
#                        first: kernel by kernel, the GEMM algorithms each run picked too
#   ab-chained           PT_CHAINED_LAUNCH=off then on (cuda/chained_launch.cuh), alternating twice: XL
#                        bf16 gradients, small with and without a CUDA graph; then kernel-trace's XL and
#                        small-graph traces both ways
# shellcheck disable=SC1090  # .devbundle/NAME/env.sh: the bundle is named at run time
set -uo pipefail
# shellcheck source=scripts/gpu_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/gpu_steps.sh"

# traced_model NAME SIZE PRECISION ATTENTION [flags...]: bench_model with every kernel's start and end
# written to $RESULTS/NAME.csv (dev/kernel_trace, loaded by the driver; carry build-trace), 2 warm-up
# and 6 measured steps.
traced_model() { BENCH_WARMUP=2 BENCH_STEPS=6 traced "$1" bench_model "$@"; }
# traced NAME CMD...: CMD with every kernel's start and end written to $RESULTS/NAME.csv.
traced() {
  local lib=$PWD/build-trace/libpt_kernel_trace.so name=$1
  shift
  [ -f "$lib" ] || { echo "no $lib: run dev/kernel_trace/build.sh and carry build-trace"; return 2; }
  CUDA_INJECTION64_PATH=$lib PT_KERNEL_TRACE="$RESULTS/$name.csv" "$@"
}
# A configuration line as a record name: lowercase letters and digits, the rest one underscore.
config_name() { echo "$1" | tr -c 'a-z0-9\n' _ | tr -s _; }
step_kernel-trace() {
  local cfg name
  while IFS= read -r cfg; do
    [ -n "$cfg" ] || continue
    name=trace_${TRACE_TAG:+${TRACE_TAG}_}$(config_name "$cfg")
    # shellcheck disable=SC2086
    traced_model "$name" $cfg &&
    python3 dev/kernel_trace/gaps.py "$RESULTS/$name.csv" --steps 4 &&
    python3 dev/kernel_trace/families.py "$RESULTS/$name.csv" --steps 4 || return
  done <<<"${TRACE_CONFIGS:-"xl bf16 flash --grad-dtype bf16
small bf16 flash --grad-dtype bf16
small bf16 flash --grad-dtype bf16 --cuda-graph on"}"
}
# The roofline's achieved times two ways, per configuration of ROOFLINE_TRACE_CONFIGS: the breakdown
# (CUDA events around every op, the update in order) and a kernel trace of plain steps with the update
# in order too (--update-overlap off), summed per phase and family by dev/kernel_trace/families.py.
step_roofline-trace() {
  local cfg name
  while IFS= read -r cfg; do
    [ -n "$cfg" ] || continue
    name=rt_${TRACE_TAG:+${TRACE_TAG}_}$(config_name "$cfg")
    # shellcheck disable=SC2086  # $cfg: a configuration's words
    bench_model "${name}_breakdown" $cfg --breakdown &&
    traced_model "$name" $cfg --update-overlap off &&
    python3 dev/kernel_trace/families.py "$RESULTS/$name.csv" --steps 4 --top 16 || return
  done <<<"${ROOFLINE_TRACE_CONFIGS:-"xl bf16 flash --grad-dtype bf16 --recompute swiglu
xl bf16 flash --grad-dtype bf16"}"
}
# The same trace for each bundle of BUNDLES, alternating twice (one configuration, the first of
# ROOFLINE_TRACE_CONFIGS): the families' kernel time of two builds in one call, without events.
step_ab-trace() {
  local cfg k b
  cfg=$(echo "${ROOFLINE_TRACE_CONFIGS:-"xl bf16 flash --grad-dtype bf16 --recompute swiglu"}" | head -1)
  for k in 1 2; do
    for b in ${BUNDLES:-before main}; do
      # shellcheck disable=SC2086
      (source ".devbundle/$b/env.sh" && traced_model "abt_${b}_$k" $cfg --update-overlap off) &&
      python3 dev/kernel_trace/families.py "$RESULTS/abt_${b}_$k.csv" --steps 4 --top 8 || return
    done
  done
}
# Where llm.c's working point spends its time: micro-batch 16 x 1024, bf16 gradients, --recompute on,
# traced (carry build-trace) over a warm-up step and a measured one of --grad-accum 4; families.py per
# micro-batch (one starts at the embedding) over the measured step's first three, the first of them
# with the update of the step before beside its forward. (The warm-up step's first micro-batch holds
# the GEMM autotuning: 90 more launches, 1.3 s; it is left out.)
# TRACE_ACCUM_OPTIONS (default --recompute on) replaces the options; the record's name carries them.
# trace_accum NAME: that traced run, TRACE_ACCUM_OPTIONS its options, to $RESULTS/NAME.csv.
trace_accum() {
  # shellcheck disable=SC2086
  GRAD_DTYPE=bf16 traced "$1" xl_1024 "$1" 16 ${TRACE_ACCUM_OPTIONS:---recompute on} --grad-accum 4 --warmup 1 --steps 1
}
step_trace-accum() {
  local name=trace_accum_16x1024${TRACE_ACCUM_OPTIONS:+$(config_name "_$TRACE_ACCUM_OPTIONS")}
  trace_accum "$name" && python3 dev/kernel_trace/families.py "$RESULTS/$name.csv" --steps 3 --top 16
}
# trace-accum for each bundle of BUNDLES in turn (one run each), then each against the first with
# compare.py: which kernels' time moved, and which GEMM kernels only one run launched (autotune's picks
# vary from run to run).
step_ab-trace-accum() {
  local b first=""
  for b in ${BUNDLES:-before main}; do
    (source ".devbundle/$b/env.sh" && trace_accum "abta_$b" >/dev/null) || return
    if [ -z "$first" ]; then
      first=$b
    else
      echo "--- A: $first, B: $b"
      python3 dev/kernel_trace/compare.py "$RESULTS/abta_$first.csv" "$RESULTS/abta_$b.csv" --steps 3 --top 16 || return
    fi
  done
}
# The chained launch (PT_CHAINED_LAUNCH) off then on, alternating twice: timings, then kernel traces.
step_ab-chained() {
  local k c
  for k in 1 2; do
    for c in off on; do
      PT_CHAINED_LAUNCH=$c ab_model "chained_xl_${c}_$k" xl 10 --grad-dtype bf16 || return
      PT_CHAINED_LAUNCH=$c ab_model "chained_small_${c}_$k" small 20 --grad-dtype bf16 --cuda-graph on || return
      PT_CHAINED_LAUNCH=$c ab_model "chained_small_eager_${c}_$k" small 20 --grad-dtype bf16 || return
    done
  done
  for c in off on; do
    echo "--- PT_CHAINED_LAUNCH=$c"
    TRACE_TAG=chained_$c PT_CHAINED_LAUNCH=$c TRACE_CONFIGS="xl bf16 flash --grad-dtype bf16
small bf16 flash --grad-dtype bf16 --cuda-graph on" step_kernel-trace || return
  done
}

run_steps "$@"
