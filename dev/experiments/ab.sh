#!/usr/bin/env bash
# A/B experiments on the training step: two builds (bundles) or two option sets measured in one
# call, alternating, so that drift of the machine reaches each side alike. Run from the repository
# root on a GPU machine, after `source .devbundle/main/env.sh`; the runner is scripts/gpu_steps.sh
# (dev/README.md). A bundle NAME is .devbundle/NAME, built by scripts/device_bundle.sh from a commit.
#
#   dev/experiments/ab.sh STEP[:SECONDS] ...   (default SECONDS per step: 300) | --list | --help
#
# Steps (one GPU each; variables they read in brackets):
#   ab                   XL (each of AB_GRAD_DTYPES, default bf16) and small (bf16 gradients, CUDA graph)
#                        for each bundle of BUNDLES (default "before main"), alternating twice; then the
#                        XL roofline of the last bundle
#   ab-options           one bundle, XL (bf16 gradients) and small (bf16 gradients, CUDA graph) with each
#                        option set of AB_OPTIONS (';'-separated; default: none; --residual-dtype bf16),
#                        alternating twice
#   ab-roofline          the XL bf16-gradient roofline of each bundle in BUNDLES, one after the other
#   ab-overlap           --update-overlap off then on (this bundle), alternating twice, XL with each of
#                        AB_GRAD_DTYPES after BUNDLES' first bundle, and AB_OVERLAP_SIZES (default small)
#   ab-update-sms        XL bf16 gradients with each --update-sms of UPDATE_SMS (default "0 24 32"),
#                        alternating twice; then small, medium, large with 0 and UPDATE_SMS_OTHERS (32)
#   ab-accum             accum-xl-16's point (--recompute AB_ACCUM_RECOMPUTE, default on) for each bundle
#                        of BUNDLES, alternating twice
#   ab-chained-accum     PT_CHAINED_LAUNCH=off then on (cuda/chained_launch.cuh) at llm.c's point: XL
#                        16 x 1024 x --grad-accum 16, bf16 gradients, --recompute on, alternating twice
#   graphs               small and XL, bf16 flash, --cuda-graph off then on, alternating twice
#   grad-dtype           small and XL, --grad-dtype fp32 then bf16, alternating twice; the XL roofline
#                        and the small model's CUDA graph both ways
#   recompute            XL bf16 gradients: --recompute on, swiglu, off alternating twice; the roofline
#                        with swiglu
#   targets-xl-options   XL bf16 gradients alone and with --recompute swiglu --update-sms UPDATE_SMS
#                        (default 24), alternating twice; fp32 gradients with both; the bf16 + swiglu roofline
#   model-xl-gemm        bench model xl fp32 naive and bf16 flash, --gemm cublas then autotune
#   model-xl-fused       bench model xl fp32 naive and bf16 flash, --fused off then on, with the breakdown
#   model-long           XL at T 2048 (batch 1, bf16 gradients): the flash defaults with --deterministic
#                        off and on, and 1x64/1/1, alternating twice
#   grad-dtype-accuracy  train small bf16, 500 steps on the sample tokens, fp32 gradients with two seeds (the
#                        run-to-run yardstick) and bf16 ones; scripts/compare_runs.py on them
#   train-overlap        train small bf16 with --update-overlap off (twice), on, and on resumed halfway;
#                        scripts/compare_runs.py on each pair
# shellcheck disable=SC1090  # .devbundle/NAME/env.sh: the bundle is named at run time
set -uo pipefail
# shellcheck source=scripts/gpu_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/gpu_steps.sh"

# alternate NAME FLAG "V1 V2" STEPS: small and XL, bf16 flash, context 512, with FLAG at each value
# in turn, twice over (alternating, so drift of the machine reaches every value alike).
alternate() {
  local name=$1 flag=$2 values=$3 steps=$4 size v k
  for k in 1 2; do
    for size in small xl; do
      for v in $values; do
        paratrain bench model --model "$size" --context-length 512 --precision bf16 --attention flash "$flag" "$v" \
          --warmup 3 --steps "$steps" --out "$RESULTS/${name}_${size}_${v}_$k.h5" --overwrite || return
      done
    done
  done
}
# A/B of two bundles in one call (BUNDLES, default "before main": .devbundle/<name>, built by
# scripts/device_bundle.sh from two commits), alternating, twice: XL and small (CUDA graph), ctx 512,
# bf16 flash, --grad-dtype bf16; then the XL roofline of the last bundle.
step_ab() {
  local k b g
  for k in 1 2; do
    for b in ${BUNDLES:-before main}; do
      for g in ${AB_GRAD_DTYPES:-bf16}; do
        (source ".devbundle/$b/env.sh" && ab_model "ab_xl_${g}_${b}_$k" xl 10 --grad-dtype "$g") || return
      done
      (source ".devbundle/$b/env.sh" &&
        ab_model "ab_small_${b}_$k" small 20 --grad-dtype bf16 --cuda-graph on) || return
    done
  done
  local bundles=${BUNDLES:-before main}
  (source ".devbundle/${bundles##* }/env.sh" && bench_model ab_roofline_xl xl bf16 flash --grad-dtype bf16 --breakdown)
}
# ab's two models on one bundle with each option set of AB_OPTIONS (';'-separated; an empty set runs
# the defaults), alternating twice: options compared in one call as `ab` compares builds.
step_ab-options() {
  local k i opts args sets
  IFS=';' read -r -a sets <<<"${AB_OPTIONS-;--residual-dtype bf16}"
  for k in 1 2; do
    i=0
    for opts in "${sets[@]}"; do
      i=$((i + 1))
      echo "--- ${opts:-(defaults)}, round $k"
      IFS=' ' read -r -a args <<<"$opts"
      ab_model "abo_xl_${i}_$k" xl 10 --grad-dtype bf16 "${args[@]}" | grep -E "^\[" || return
      ab_model "abo_small_${i}_$k" small 20 --grad-dtype bf16 --cuda-graph on "${args[@]}" | grep -E "^\[" || return
    done
  done
}
# The XL roofline (bf16 gradients) of each bundle in BUNDLES, in turn: the "before" build's op
# families beside the new one's (ab profiles only the new build).
step_ab-roofline() {
  local b
  for b in ${BUNDLES:-before main}; do
    (source ".devbundle/$b/env.sh" && bench_model "ab_roofline_xl_$b" xl bf16 flash --grad-dtype bf16 --breakdown) ||
      return
  done
}
step_ab-overlap() {
  local k g u s before
  before=$(echo "${BUNDLES:-before main}" | cut -d' ' -f1)
  for k in 1 2; do
    for g in ${AB_GRAD_DTYPES:-bf16}; do
      (source ".devbundle/$before/env.sh" && ab_model "abo_xl_${g}_${before}_$k" xl 10 --grad-dtype "$g") || return
      for u in off on; do
        ab_model "abo_xl_${g}_overlap-${u}_$k" xl 10 --grad-dtype "$g" --update-overlap "$u" || return
      done
    done
    for s in ${AB_OVERLAP_SIZES:-small}; do
      for u in off on; do
        ab_model "abo_${s}_overlap-${u}_$k" "$s" 20 --grad-dtype bf16 --update-overlap "$u" || return
      done
    done
  done
}
# ab-update-sms: GEMMs kept off N SMs while the update runs under the forward (--update-sms), XL
# alternating twice over UPDATE_SMS, then the smaller models once each with 0 and UPDATE_SMS_OTHERS.
step_ab-update-sms() {
  local k s size
  for k in 1 2; do
    for s in ${UPDATE_SMS:-0 24 32}; do
      ab_model "update_sms_xl_${s}_$k" xl 10 --grad-dtype bf16 --update-sms "$s" || return
    done
  done
  for size in small medium large; do
    for s in 0 ${UPDATE_SMS_OTHERS:-32}; do
      ab_model "update_sms_${size}_$s" "$size" 10 --grad-dtype bf16 --update-sms "$s" || return
    done
  done
}
# accum-xl-16's working point (AB_ACCUM_RECOMPUTE, default on) for each bundle of BUNDLES, alternating twice.
step_ab-accum() {
  local k b
  for k in 1 2; do
    for b in ${BUNDLES:-before main}; do
      (source ".devbundle/$b/env.sh" &&
        GRAD_DTYPE=bf16 accum_16 "ab_accum_${b}_$k" --recompute "${AB_ACCUM_RECOMPUTE:-on}" | grep -E "^xl|^\[" |
        sed "s|^|$b |") || return
    done
  done
}
step_ab-chained-accum() {
  local k c
  for k in 1 2; do
    for c in off on; do
      PT_CHAINED_LAUNCH=$c GRAD_DTYPE=bf16 xl_1024 "chained_accum_xl_16x1024x16_${c}_$k" 16 --recompute on \
        --grad-accum 16 --warmup 1 --steps 2 || return
    done
  done
}
step_graphs() { alternate graph --cuda-graph "off on" 20; }
step_grad-dtype() {
  local g
  alternate grad --grad-dtype "fp32 bf16" 10 || return
  for g in fp32 bf16; do
    bench_model "grad_roofline_xl_$g" xl bf16 flash --grad-dtype "$g" --breakdown || return
    paratrain bench model --model small --context-length 512 --precision bf16 --attention flash --grad-dtype "$g" \
      --cuda-graph on --warmup 3 --steps 20 --out "$RESULTS/grad_graph_small_$g.h5" --overwrite || return
  done
}
# --recompute on, swiglu and off alternating twice (XL, bf16 gradients), then the roofline of swiglu.
step_recompute() {
  local k v
  for k in 1 2; do
    for v in on swiglu off; do
      ab_model "recompute_xl_${v}_$k" xl 10 --grad-dtype bf16 --recompute "$v" || return
    done
  done
  bench_model recompute_roofline_xl_swiglu xl bf16 flash --grad-dtype bf16 --recompute swiglu --breakdown
}
# The XL step with the options that each took time off it (bf16 gradients, --recompute swiglu,
# --update-sms), A/B against bf16 gradients alone, alternating twice; fp32 gradients with both options;
# the roofline of bf16 + swiglu (a breakdown runs the update in order, so --update-sms has no part in it).
step_targets-xl-options() {
  local k opts=(--recompute swiglu --update-sms "${UPDATE_SMS:-24}")
  for k in 1 2; do
    bench_model "targets_xl_bf16_grads_$k" xl bf16 flash --grad-dtype bf16 &&
    bench_model "targets_xl_bf16_grads_options_$k" xl bf16 flash --grad-dtype bf16 "${opts[@]}" || return
  done
  bench_model targets_xl_fp32_grads_options xl bf16 flash --grad-dtype fp32 "${opts[@]}" &&
  bench_model targets_xl_bf16_grads_swiglu_roofline xl bf16 flash --grad-dtype bf16 --recompute swiglu --breakdown
}
step_model-xl-gemm() {
  for g in cublas autotune; do
    bench_model "model_xl_fp32_gemm_$g" xl fp32 naive --gemm $g &&
    bench_model "model_xl_bf16_gemm_$g" xl bf16 flash --gemm $g || return
  done
}
step_model-xl-fused() {
  for f in off on; do
    bench_model "model_xl_fp32_fused_$f" xl fp32 naive --fused $f --breakdown &&
    bench_model "model_xl_bf16_fused_$f" xl bf16 flash --fused $f --breakdown || return
  done
}
# The model at a long context, where the flash defaults change: XL, T 2048, batch 1, bf16 flash,
# bf16 gradients: the defaults with --deterministic off (the single pass from 2048 keys) and on
# (the two warp-specialised passes), and 1x64/1/1, alternating twice.
step_model-long() {
  local k t
  for k in 1 2; do
    for t in --deterministic=off --deterministic=on --wgmma-tiles=1x64/1/1; do
      echo "== $t, round $k"
      paratrain bench model --model xl --context-length 2048 --batch-size 1 --precision bf16 --attention flash \
        --grad-dtype bf16 --warmup 2 --steps 5 "$t" --out "$RESULTS/model_long_${t//[\/=-]/_}_$k.h5" --overwrite ||
        return
    done
  done
}
step_grad-dtype-accuracy() {
  # The checkpoints (1.5 GB each with AdamW's state) stay out of $RESULTS, which is packed after every step.
  local g ckpt=/tmp/paratrain_accuracy
  mkdir -p "$ckpt"
  # fp32 twice, the second with another seed: the yardstick for bf16's difference (runs with one seed
  # agree bit for bit).
  for g in fp32 fp32_again bf16; do
    local seed=1337
    [ "$g" = fp32_again ] && seed=1338
    paratrain train --model small --precision bf16 --grad-dtype "${g%_again}" --seed "$seed" --steps 500 --batch-size 8 \
      --context-length 512 --log-every 50 --out "$RESULTS/accuracy_$g.h5" --save "$ckpt/accuracy_${g}.h5" \
      --overwrite || return
  done
  for g in fp32_again bf16; do
    echo "fp32 against $g:"
    python3 scripts/compare_runs.py --records "$RESULTS/accuracy_fp32.h5" "$RESULTS/accuracy_$g.h5" \
      --checkpoints "$ckpt/accuracy_fp32.h5" "$ckpt/accuracy_$g.h5" || return
  done
}
# train-overlap: `paratrain train` small, bf16, --update-overlap off twice (the same bits: runs
# repeat), on, and on stopped halfway and resumed from its checkpoint;
# scripts/compare_runs.py on each pair (the resumed run's record holds its own steps only: its
# final weights are compared).
step_train-overlap() {
  local u ckpt=/tmp/paratrain_overlap
  local args=(--model small --precision bf16 --grad-dtype bf16 --batch-size 8 --context-length 512 --log-every 10
    --sampling sequential --overwrite)
  mkdir -p "$ckpt"
  for u in off off_again on; do
    paratrain train "${args[@]}" --steps 100 --update-overlap "${u%_again}" --out "$RESULTS/overlap_train_$u.h5" \
      --save "$ckpt/$u.h5" || return
  done
  paratrain train "${args[@]}" --steps 50 --update-overlap on --out "$RESULTS/overlap_train_half.h5" \
    --save "$ckpt/half.h5" || return
  paratrain train --resume "$ckpt/half.h5" --steps 100 --overwrite --out "$RESULTS/overlap_train_resumed.h5" \
    --save "$ckpt/resumed.h5" || return
  for u in off_again on; do
    echo "off against $u:"
    python3 scripts/compare_runs.py --records "$RESULTS/overlap_train_off.h5" "$RESULTS/overlap_train_$u.h5" \
      --checkpoints "$ckpt/off.h5" "$ckpt/$u.h5" || return
  done
  echo "on against on resumed at step 50 (weights after step 100):"
  python3 scripts/compare_runs.py --checkpoints "$ckpt/on.h5" "$ckpt/resumed.h5"
}

run_steps "$@"
