#!/usr/bin/env bash
# GPU checks and benchmarks for a GPU machine, in one call: run from the repository root
# after `source <bundle>/env.sh` (scripts/device_bundle.sh). Each step is bounded by its own
# timeout and logs to $RESULTS/<step>.log; HDF5 records land in $RESULTS too. At the end (or
# when the caller's time limit kills the steps) everything is packed into $OUT/results.tgz and
# a one-line-per-step summary goes to $OUT/summary.txt, so nothing is lost to the few files a
# machine may send back.
#
#   scripts/gpu_checks.sh STEP[:SECONDS] ...     (default SECONDS per step: 300)
#   NP=4 scripts/gpu_checks.sh dist-tests ...     (the multi-GPU steps on NP ranks; default 2)
#
# Steps (GPUs they need; the (2) steps run on NP):
#   gpu-tests            paratrain_tests_gpu on GPU 0                                       (1)
#   dist-tests           mpirun -np $NP paratrain_tests_dist, NCCL suites                    (NP)
#   model-small          bench model small, breakdown + memory profile, ctx 128/512          (1)
#   model-xl             bench model xl ctx 512: fp32 naive, bf16 flash, breakdown + memory  (1)
#   model-xl-keep        model-xl with --recompute off, without breakdown and memory profile (1)
#   model-2.7b           bench model 2.7b ctx 512: fp32 naive, bf16 naive (flash: d_head 80)   (1)
#   torch-model-xl       scripts/compare_torch.py xl ctx 512, eager fp32 and bf16             (1)
#   torch-model-2.7b     the same for 2.7b                                                    (1)
#   ddp-xl-bf16          bench ddp xl bf16: none, bucketed 25/1000, zero1; --comm-sms auto,
#                        --grad-comm fp32,bf16, --zero1-prefetch on,off (env COMM_SMS, GRAD_COMM,
#                        ZERO1_PREFETCH override the lists)                                   (2)
#   ddp-xl-fp32          the same in fp32                                                     (2)
#   torch-ddp-xl         scripts/compare_torch_ddp.py xl fp32,bf16 on 2 ranks                 (2)
#   nccl-channels        NCCL_DEBUG=INFO all-reduce on 2 ranks: the channel count NCCL picks  (2)
#   sanitizer            compute-sanitizer memcheck + racecheck on the small flash GPU tests  (1)
#   flash-ws             the warp-specialised TMA kernels (tiles ws…): flash GPU tests, sanitizers,
#                        leaderboard d 64 and 128 against the defaults and SDPA, short lengths (1)
#   flash-sweep-ws       the B 1 × H 1 flash sweep (T 128 … 65536) at d 64 and 128: each tile set of the
#                        defaults (1x64/1/1, ws2x128/ws2/ws2, ws2x128/ws2/acc) at every length     (1)
#   gemm-xl              bench gemm xl ctx 512, fp32 and bf16: cuBLAS against cuBLASLt        (1)
#   model-sizes          bench model, every named size, ctx 512: fp32 naive, bf16 naive+flash  (1)
#   model-xl-gemm        bench model xl ctx 512 fp32 naive and bf16 flash, --gemm cublas,autotune (1)
#   model-xl-fused       bench model xl ctx 512 fp32 naive and bf16 flash, --fused off,on,
#                        with the kernel-time breakdown                                       (1)
#   torch-model-sizes    scripts/compare_torch.py, every named size, eager                    (1)
#   fp32-sizes           bench model fp32 naive and compare_torch.py eager fp32, every named size, ctx 512 (1)
#   flash-d80            bench attention, flash vs naive at d 64 and 80 (the 2.7b heads), bf16,
#                        B 4, 32 heads, T 512 and 4096; kernel resource usage for d = 80     (1)
#   flash-acc            the single-pass flash backward (wgmma tiles …/acc, dQ accumulated):
#                        its GPU tests, memcheck + racecheck, leaderboard and d 64/128 timings
#                        against the two-pass defaults, PyTorch SDPA in the same step         (1)
#   torch-compile-S      scripts/compare_torch.py S (small|medium|large|xl|2.7b), compiled,
#                        bf16 (issue 6's target; COMPILE_PRECISIONS=fp32,bf16 for both)      (1)
#   portable             bench model small and xl, ctx 512, bf16 flash, with the bundle on PATH
#                        (BUILD_TAG names the records: a 90a build and an 80-virtual one, issue 13);
#                        builds with an sm_90a image run it again with --flash-kernels mma     (1)
#   portable-small       the small model alone, 30 measured steps, auto and (90a builds) mma      (1)
#   flash-mma            the flash GPU tests with the mma.sync family only (PT_FLASH_TEST_KERNELS) (1)
#   native-arch          scripts/check_native_arch.sh: what CMAKE_CUDA_ARCHITECTURES=native gives (1)
#   binding              2-rank train under each GPU binding: both GPUs visible, one per rank
#                        (CUDA_VISIBLE_DEVICES from the local rank), both on GPU 0 (refused),
#                        and with --allow-gpu-sharing; NCCL tests under per-rank binding       (2)
#   collectives          bench allreduce, NCCL, 2 ranks: all-reduce, reduce-scatter, all-gather,
#                        broadcast at 1M-1G (nccl-tests' busbw)                                (2)
#   plan-xl              bench ddp xl bf16 flash none/bucketed/zero1, 2 ranks: plan's fixture    (2)
#   roofline             bench model xl and small, ctx 512, bf16 flash, --breakdown: the roofline
#                        table (bytes, FLOPs, floor against achieved per phase and op family)     (1)
#   small-graph          bench model small, ctx 512, bf16 flash, --cuda-graph on, fp32 and bf16 gradients (1)
#   graphs               bench model small and xl, ctx 512, bf16 flash, --cuda-graph off then on,
#                        alternating twice (the same call, the same GPU)                         (1)
#   accum-xl             bench model xl bf16 flash at llm.c's working points: 4 x 1024 tokens, and
#                        8 x 1024 x --grad-accum 32 (262 144 tokens a step); GRAD_DTYPE=bf16, and
#                        ACCUM_RECOMPUTE="on swiglu" for each --recompute in turn                   (1)
#   ab-accum             accum-xl-16 (--recompute AB_ACCUM_RECOMPUTE, default on) for each bundle of BUNDLES,
#                        alternating twice                                                             (1)
#   mfu-accum            the MFU target's point (16 x 1024 x 16, bf16 gradients) with each option set of MFU_OPTIONS
#                        (default: --recompute on; swiglu; swiglu --update-sms 24), one after the other      (1)
#   accum-xl-16          bench model xl bf16 flash, micro-batch 16 x 1024 x --grad-accum 16 (262 144 tokens a
#                        step), GRAD_DTYPE (default bf16) and each of ACCUM_RECOMPUTE (default on)           (1)
#   peers-xl             bench model xl: fp32 naive, bf16 flash (fp32 and bf16 gradients), then
#                        compare_torch.py xl eager fp32 and bf16                                  (1)
#   ab                   two bundles (BUNDLES="before main") alternating on XL and small bf16, one call; XL
#                        with each of AB_GRAD_DTYPES (default bf16; "bf16 fp32" for both)                (1)
#   ab-options           one bundle, XL (bf16 gradients) and small (bf16 gradients, CUDA graph) with each option
#                        set of AB_OPTIONS (';'-separated; default: none; --residual-dtype bf16), alternating twice (1)
#   ab-chained           one bundle, PT_CHAINED_LAUNCH=off then on (cuda/chained_launch.cuh), alternating twice:
#                        XL bf16 gradients, small with and without a CUDA graph; then kernel-trace's XL and
#                        small-graph traces both ways                                                 (1)
#   ab-chained-accum     the same switch at llm.c's working point: XL 16 x 1024 x --grad-accum 16, bf16 gradients,
#                        --recompute on, alternating twice (the MFU target)                            (1)
#   recompute            XL bf16 flash, bf16 gradients: --recompute on, swiglu, off alternating twice; the
#                        roofline with swiglu                                                         (1)
#   ab-roofline          the XL bf16-gradient roofline of each bundle in BUNDLES, one after the other  (1)
#   ab-overlap           --update-overlap off then on (bundle main), alternating twice, XL bf16 flash with
#                        each of AB_GRAD_DTYPES (default bf16) after the bundle "before" (BUNDLES' first),
#                        and AB_OVERLAP_SIZES (default small) without a CUDA graph, off then on          (1)
#   ab-update-sms        XL bf16 flash, bf16 gradients, with each --update-sms of UPDATE_SMS (default "0 24 32"),
#                        alternating twice; then small, medium, large with 0 and UPDATE_SMS_OTHERS (32)       (1)
#   train-overlap        train small bf16 with --update-overlap off (twice), on, and on resumed halfway: compare_runs (1)
#   ab-flash             the same for the flash leaderboard case, d 64 and 128 (FLASH_TILES)          (1)
#   ab-flash-specs       ab-flash on any shapes: AB_FLASH_SPECS="NAME:B:H:SEQS:D ..." with FLASH_TILES, BUNDLES,
#                        AB_ROUNDS (default 2)                                                         (1)
#   flash-single-pass    the warp-specialised single pass (ws2x128/ws2/acc): flash GPU tests, sanitizers,
#                        leaderboard d 64 / 128 (SDPA) and B 4 × H 16 T 512…2048 against ws2x128/ws2/ws2 (1)
#   model-long           XL at T 2048 (batch 1, bf16, bf16 gradients): the flash defaults with
#                        --deterministic off and on, and 1x64/1/1, alternating twice                  (1)
#   clocks-accum         the clocks at llm.c's working point, then during its attention alone (model layout,
#                        1x64/1/1 and ws2x128/ws2/ws2): the power cap's share of the step's slower flash (1)
#   clocks-flash         SM clock, power, throttle reasons during the leaderboard case, per tile set
#                        (CLOCKS_FLASH_D, default 128; CLOCKS_FLASH_TILES, CLOCKS_FLASH_ITERS, CLOCKS_SERIES)  (1)
#   ab-flash-lengths     the crossover between defaults: XL's shape and B 4 × H 16 at T 512…8192, d 64 and
#                        128, three tile sets (FLASH_TILES)                                            (1)
#   ab-flash-d128        the same at d 128 only: the leaderboard shape and B 4 × H 16 at T 512…2048     (1)
#   ab-flash-short       the same at the model's lengths: XL's B 4 × H 25 at T 512, 1024; B 4 × H 16 at
#                        T 512…2048, d 64 and 128                                                     (1)
#   grad-dtype           bench model small and xl, ctx 512, bf16 flash, --grad-dtype fp32 then bf16,
#                        alternating twice; the XL roofline and the small model's CUDA graph both ways (1)
#   sanitizer-grads      compute-sanitizer memcheck on the --grad-dtype bf16 kernels' GPU tests      (1)
#   sanitizer-rmsnorm    compute-sanitizer memcheck, racecheck, synccheck on the RMSNorm GPU tests      (1)
#   grad-dtype-accuracy  train small, bf16, 500 steps on the sample tokens with fp32 gradients (twice:
#                        the run-to-run yardstick) and bf16 ones; scripts/compare_runs.py on them     (1)
#   targets-xl           issue 16's XL measurements in one call: bf16 flash ctx 512 batch 4 with the roofline,
#                        fp32 then bf16 gradients, and bf16 gradients with --recompute off and swiglu     (1)
#   targets-xl-options   XL bf16 flash ctx 512 batch 4, alternating twice: bf16 gradients alone, and with
#                        --recompute swiglu --update-sms UPDATE_SMS (default 24); then fp32 gradients with
#                        the same two options, and the roofline of the bf16 + swiglu run               (1)
#   flash-model-tiles    a dozen tile sets at XL's heads (B 4 and 16 × H 25, T 512 and 1024, d 64): which the
#                        model's lengths should default to                                              (1)
#   flash-rows-crossover 1x64/1/1 against the warp-specialised passes at d 64, T 1024, B 4 … 16 × H 25     (1)
#   ab-flash-sdpa        ab-flash with FLASH_TILES (default ws2x128/ws2/ws2,ws2x128/ws2/acc), then SDPA
#                        (cuDNN, flash) on the leaderboard case at d 64 and 128 in the same step         (1)
#   flash-sanitizers     for each tile set of SAN_TILES (default: the defaults ws2x128/ws2/acc and 1x64/1/1):
#                        the flash GPU tests with those tiles, then memcheck, racecheck, synccheck on small cases (1)
#   ncu-flash            ncu on the default bf16 flash kernels, one forward+backward each of the leaderboard
#                        case (B 1, H 16, T 16384, d 64, causal) and XL's (B 4, H 25, T 512): speed of light,
#                        tensor pipes, occupancy, stall reasons (raw CSV, $RESULTS/ncu_flash_*.csv);
#                        NCU_TILES=<wgmma tiles> profiles those instead of the defaults; NCU_SPECS="name:B:H:T:d
#                        ..." other shapes (e.g. lb128:1:16:16384:128)                                   (1)
#   ncu-source           ncu's source page (SASS, warp-stall samples per instruction) of one flash kernel per
#                        NCU_SOURCE spec NAME:KERNEL-REGEX:B:H:T:D:TILES (default: the warp-specialised
#                        forward at d 64 and the single pass at d 128, leaderboard shape), as CSV  (1)
#   ncu-memory           ncu on one XL bf16 step (--grad-dtype bf16): every memory-bound kernel's time,
#                        DRAM bytes and rate, summed per kernel (NCU_SIZE=small for the small model)   (1)
#   ab-ncu-memory        ncu-memory's table for each bundle of BUNDLES, over the kernels NCU_REGEX names
#                        (default rmsnorm)                                                              (1)
#   ncu-gemm             the same for the step's GEMM kernels: time, grid (waves), SM throughput       (1)
#   kernel-trace         every kernel's start and end in plain steps (CUPTI, dev/kernel_trace; carry build-trace):
#                        XL bf16 gradients, small with and without a CUDA graph (TRACE_CONFIGS), then
#                        dev/kernel_trace/gaps.py: idle time and the gaps between kernels, per step    (1)
#   roofline-trace       XL bf16 gradients (ROOFLINE_TRACE_CONFIGS: --recompute swiglu, then on): the breakdown's
#                        roofline, then a kernel trace of plain steps (update in order) summed per phase
#                        and family (dev/kernel_trace/families.py): the achieved times without events (1)
#   trace-accum          llm.c's working point (XL 16 x 1024, bf16 gradients, --grad-accum 4) traced: the
#                        families' kernel time per micro-batch of the measured step (families.py)      (1)
#   ab-trace             roofline-trace's traced run (its first configuration) for each bundle of BUNDLES,
#                        alternating twice: two builds' kernel time per phase and family in one call      (1)
#   ab-trace-accum       trace-accum (TRACE_ACCUM_OPTIONS) for each bundle of BUNDLES, then dev/kernel_trace/compare.py
#                        of each against the first: kernel by kernel, the GEMM algorithms each run picked too (1)
#   dev-variants         dev/cuda's measurement programs built into .devbundle (dev/cuda/build.sh; DEV_VARIANTS,
#                        default "stream_variants rmsnorm_variants"): launch variants against the production
#                        kernels, bit for bit, and the byte-mix floors of the memory-bound passes            (1)
#   fa3-peer             FlashAttention-3 (dev/build_fa3.sh's .devbundle/fa3_bench) beside paratrain's two single
#                        passes on the leaderboard case, d 64 and 128, twice; SDPA; ncu of both d 64 forwards (1)
#   llmc-xl              llm.c's train_gpt2cu (GPT-2 1.5B from scratch, -e d48, no cuDNN) at the working
#                        points LLMC_POINTS (micro-batch:tokens a step; default 4:4096 8:262144 16:262144),
#                        on the sample tokens in its headered .bin format; the binary is built here
#                        beforehand by dev/build_llmc.sh into .peers/llm.c (carry .peers)            (1)
#   probe-opt-overlap    dev/probe_optimizer_overlap.py: an AdamW update under the next forward, with
#                        PyTorch's GEMMs and a Triton AdamW at XL's shapes (the measurement first)   (1)
#   probe-swiglu-epilogue dev/probe_swiglu_epilogue.py: SwiGLU forward and backward as Triton GEMM epilogues
#                        against cuBLAS + one pass, at XL's shapes (the measurement before a fused GEMM)  (1)
#   probe-cutlass-swiglu dev/probe_cutlass_swiglu.cu (built by dev/build_probe_cutlass.sh into .devbundle): CUTLASS
#                        against cuBLAS on the FFN GEMMs, and SwiGLU's backward as a CUTLASS epilogue (1)
# A step written A+B runs A on GPU 0 and B on GPU 1 at the same time (single-GPU steps only).
set -uo pipefail
: "${OUT:=out/gpu_checks}"
RESULTS=${RESULTS:-/tmp/paratrain_gpu_checks}
mkdir -p "$OUT" "$RESULTS"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
NP=${NP:-2}  # ranks of the multi-GPU steps: one GPU each
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np "$NP" -x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE)

pack() {
  tar -C "$RESULTS" -czf "$OUT/results.tgz" . 2>/dev/null
}
trap pack EXIT

step_gpu-tests() { paratrain_tests_gpu --gtest_color=no; }
step_dist-tests() {
  "${MPIRUN[@]}" paratrain_tests_dist --gtest_color=no --gtest_filter='Nccl*'
}
step_model-small() {
  paratrain bench model --sizes small --contexts 128,512 --precisions fp32,bf16 --attention naive,flash \
    --warmup 3 --steps 10 --breakdown --memory-profile --out "$RESULTS/model_small.h5" --overwrite
}
# bench_model NAME SIZE PRECISION ATTENTION [extra flags...]: one configuration at context 512,
# BENCH_WARMUP (2) warm-up and BENCH_STEPS (5) measured steps.
bench_model() {
  local name=$1 size=$2 prec=$3 attn=$4
  shift 4
  paratrain bench model --sizes "$size" --contexts 512 --precisions "$prec" --attention "$attn" \
    --warmup "${BENCH_WARMUP:-2}" --steps "${BENCH_STEPS:-5}" "$@" --out "$RESULTS/$name.h5" --overwrite
}
# ab_model NAME SIZE STEPS [extra flags...]: bf16 flash, 3 warm-up steps: the A/B steps' runs.
ab_model() {
  local name=$1 size=$2 steps=$3
  shift 3
  BENCH_WARMUP=3 BENCH_STEPS=$steps bench_model "$name" "$size" bf16 flash "$@"
}
step_model-xl() {
  bench_model model_xl_fp32 xl fp32 naive --breakdown --memory-profile &&
  bench_model model_xl_bf16 xl bf16 flash --breakdown --memory-profile
}
step_model-xl-keep() {
  bench_model model_xl_fp32_keep xl fp32 naive --recompute off &&
  bench_model model_xl_bf16_keep xl bf16 flash --recompute off
}
step_model-sizes() {
  bench_model model_sizes_fp32 small,medium,large,xl,2.7b fp32 naive &&
  bench_model model_sizes_bf16 small,medium,large,xl,2.7b bf16 naive,flash
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
step_flash-d80() {
  paratrain bench attention --impl flash,naive --dtype bf16 --batch 4 --heads 32 --seq 512,4096 \
    --head-dim 64,80 --causal 1 --out "$RESULTS/flash_d80.h5" --overwrite || return
  local lib
  lib=$(ldd "$(command -v paratrain)" | awk '/libparatrain/ {print $3}')
  cuobjdump --dump-resource-usage "$lib" 2>/dev/null | grep -A1 'Li80E' | grep -o 'Function [^:]*\|REG:[0-9]*\|STACK:[0-9]*\|LOCAL:[0-9]*' | paste - - - -
}
step_portable() {
  local tag=${BUILD_TAG:-build}
  paratrain --version &&
  bench_model "portable_${tag}" small,xl bf16 flash --breakdown || return
  if paratrain --version | grep -q '90a'; then
    bench_model "portable_${tag}_mma" small,xl bf16 flash --flash-kernels mma --breakdown
  fi
}
step_portable-small() {
  local tag=${BUILD_TAG:-build} k
  for k in auto mma; do
    [ $k = mma ] && ! paratrain --version | grep -q '90a' && continue
    paratrain bench model --sizes small --contexts 512 --precisions bf16 --attention flash --warmup 5 --steps 30 \
      --flash-kernels $k --out "$RESULTS/portable_small_${tag}_$k.h5" --overwrite || return
  done
}
step_flash-mma() { PT_FLASH_TEST_KERNELS=mma paratrain_tests_gpu --gtest_color=no --gtest_filter='FlashGpu.*'; }
step_native-arch() { scripts/check_native_arch.sh; }
step_binding() {
  local train=(paratrain train --model small --precision bf16 --attention flash --steps 3 --log-every 1)
  local per_rank='export CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK; exec "$@"'
  echo "--- both GPUs visible" && "${MPIRUN[@]}" "${train[@]}" --out "$RESULTS/bind_all.h5" --overwrite &&
  echo "--- one GPU per rank" && "${MPIRUN[@]}" bash -c "$per_rank" _ "${train[@]}" --out "$RESULTS/bind_one.h5" --overwrite &&
  echo "--- NCCL tests, one GPU per rank" && "${MPIRUN[@]}" bash -c "$per_rank" _ paratrain_tests_dist --gtest_color=no --gtest_filter='Nccl*' || return
  echo "--- both ranks on GPU 0 (must be refused)"
  if "${MPIRUN[@]}" -x CUDA_VISIBLE_DEVICES=0 "${train[@]}" --out "$RESULTS/bind_shared.h5" --overwrite; then
    echo "binding: two ranks on one GPU were not refused"; return 1
  fi
  echo "--- both on GPU 0 with --allow-gpu-sharing: independent single-GPU benchmarks (no NCCL)" &&
  "${MPIRUN[@]}" -x CUDA_VISIBLE_DEVICES=0 paratrain bench gemm --model small --allow-gpu-sharing \
    --out "$RESULTS/bind_shared_ok.h5" --overwrite &&
  python3 -c "import h5py,sys; [print(f, list(h5py.File(sys.argv[1]+'/'+f).attrs['gpu_pci_bus_ids'])) for f in ('bind_all.h5','bind_one.h5','bind_shared_ok.h5')]" "$RESULTS"
}
step_collectives() {
  "${MPIRUN[@]}" paratrain bench allreduce --backend nccl --collectives all_reduce,reduce_scatter,all_gather,broadcast \
    --sizes 1M,10M,100M,1G --out "$RESULTS/collectives_$NP.h5" --overwrite
}
step_plan-xl() {
  "${MPIRUN[@]}" paratrain bench ddp --model xl --precision bf16 --attention flash --ddp none,bucketed \
    --shard-optimizer zero1 --zero1-prefetch on --warmup 1 --steps 2 --out "$RESULTS/bench_ddp_xl_2xh200.h5" --overwrite
}
step_roofline() {
  bench_model roofline_xl xl bf16 flash --breakdown --grad-dtype "${GRAD_DTYPE:-fp32}" &&
  bench_model roofline_small small bf16 flash --breakdown --grad-dtype "${GRAD_DTYPE:-fp32}"
}
step_targets-xl() {
  bench_model targets_xl_fp32_grads xl bf16 flash --grad-dtype fp32 --breakdown &&
  bench_model targets_xl_bf16_grads xl bf16 flash --grad-dtype bf16 --breakdown &&
  bench_model targets_xl_bf16_grads_keep xl bf16 flash --grad-dtype bf16 --recompute off &&
  bench_model targets_xl_bf16_grads_swiglu xl bf16 flash --grad-dtype bf16 --recompute swiglu
}
# The issue's XL step with the options that each took time off it (bf16 gradients, --recompute swiglu,
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
# alternate NAME FLAG "V1 V2" STEPS: small and XL, bf16 flash, context 512, with FLAG at each value
# in turn, twice over (alternating, so drift of the machine reaches every value alike).
alternate() {
  local name=$1 flag=$2 values=$3 steps=$4 size v k
  for k in 1 2; do
    for size in small xl; do
      for v in $values; do
        paratrain bench model --sizes "$size" --contexts 512 --precisions bf16 --attention flash "$flag" "$v" \
          --warmup 3 --steps "$steps" --out "$RESULTS/${name}_${size}_${v}_$k.h5" --overwrite || return
      done
    done
  done
}
# --recompute on, swiglu and off alternating twice (XL, bf16 gradients), then the roofline of swiglu.
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
step_ab-chained-accum() {
  local k c
  for k in 1 2; do
    for c in off on; do
      PT_CHAINED_LAUNCH=$c GRAD_DTYPE=bf16 xl_1024 "chained_accum_xl_16x1024x16_${c}_$k" 16 --recompute on \
        --grad-accum 16 --warmup 1 --steps 2 || return
    done
  done
}
step_recompute() {
  local k v
  for k in 1 2; do
    for v in on swiglu off; do
      ab_model "recompute_xl_${v}_$k" xl 10 --grad-dtype bf16 --recompute "$v" || return
    done
  done
  bench_model recompute_roofline_xl_swiglu xl bf16 flash --grad-dtype bf16 --recompute swiglu --breakdown
}
# The small model's issue-16 target configuration (context 512, batch 4, bf16, flash, CUDA graph),
# fp32 and bf16 gradients.
step_small-graph() {
  local g
  for g in fp32 bf16; do
    paratrain bench model --sizes small --contexts 512 --precisions bf16 --attention flash --grad-dtype "$g" \
      --cuda-graph on --warmup 3 --steps 30 --out "$RESULTS/small_graph_$g.h5" --overwrite || return
  done
}
step_graphs() { alternate graph --cuda-graph "off on" 20; }
step_grad-dtype() {
  local g
  alternate grad --grad-dtype "fp32 bf16" 10 || return
  for g in fp32 bf16; do
    bench_model "grad_roofline_xl_$g" xl bf16 flash --grad-dtype "$g" --breakdown || return
    paratrain bench model --sizes small --contexts 512 --precisions bf16 --attention flash --grad-dtype "$g" \
      --cuda-graph on --warmup 3 --steps 20 --out "$RESULTS/grad_graph_small_$g.h5" --overwrite || return
  done
}
step_grad-dtype-accuracy() {
  # The checkpoints (1.5 GB each with AdamW's state) stay out of $RESULTS, which is packed after every step.
  local g ckpt=/tmp/paratrain_accuracy
  mkdir -p "$ckpt"
  # fp32 twice: the GPU's atomics make two fp32 runs differ too, the yardstick for bf16's difference.
  for g in fp32 fp32_again bf16; do
    paratrain train --model small --precision bf16 --grad-dtype "${g%_again}" --steps 500 --batch-size 8 \
      --context-length 512 --log-every 50 --out "$RESULTS/accuracy_$g.h5" --save "$ckpt/accuracy_${g}.h5" \
      --overwrite || return
  done
  for g in fp32_again bf16; do
    echo "fp32 against $g:"
    python3 scripts/compare_runs.py --records "$RESULTS/accuracy_fp32.h5" "$RESULTS/accuracy_$g.h5" \
      --checkpoints "$ckpt/accuracy_fp32.h5" "$ckpt/accuracy_$g.h5" || return
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
# train-overlap: `paratrain train` small, bf16, --update-overlap off twice (the GPU's atomics make two
# runs differ: the yardstick), on, and on stopped halfway and resumed from its checkpoint;
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
# Any shapes: AB_FLASH_SPECS (NAME:B:H:SEQS:D ..., required) with FLASH_TILES (required), each bundle
# of BUNDLES (default main) in each of AB_ROUNDS (default 2) alternating rounds.
step_ab-flash-specs() {
  [ -n "${AB_FLASH_SPECS:-}" ] && [ -n "${FLASH_TILES:-}" ] || { echo "ab-flash-specs: set AB_FLASH_SPECS and FLASH_TILES"; return 1; }
  BUNDLES=${BUNDLES:-main} ab_flash $AB_FLASH_SPECS
}
# The leaderboard case at d 64 and 128 (default tiles: the warp-specialised passes).
step_ab-flash() { AB_FLASH_TILES=ws2x128/ws2/ws2 ab_flash lb:1:16:16384:64 lb:1:16:16384:128; }
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
# The model at a long context, where the flash defaults change: XL, T 2048, batch 1, bf16 flash,
# bf16 gradients: the defaults with --deterministic off (the single pass from 2048 keys) and on
# (the two warp-specialised passes), and 1x64/1/1, alternating twice.
step_model-long() {
  local k t
  for k in 1 2; do
    for t in --deterministic=off --deterministic=on --wgmma-tiles=1x64/1/1; do
      echo "== $t, round $k"
      paratrain bench model --sizes xl --contexts 2048 --batch-size 1 --precisions bf16 --attention flash \
        --grad-dtype bf16 --warmup 2 --steps 5 "$t" --out "$RESULTS/model_long_${t//[\/=-]/_}_$k.h5" --overwrite ||
        return
    done
  done
}
# xl_1024 NAME BATCH [extra flags...]: XL, context 1024, bf16 flash, GRAD_DTYPE gradients (default
# fp32), the accumulation steps' runs.
xl_1024() {
  local name=$1 batch=$2
  shift 2
  paratrain bench model --sizes xl --contexts 1024 --precisions bf16 --attention flash --batch-size "$batch" \
    --grad-dtype "${GRAD_DTYPE:-fp32}" "$@" --out "$RESULTS/$name.h5" --overwrite
}
step_accum-xl() {
  local g=${GRAD_DTYPE:-fp32} r
  for r in ${ACCUM_RECOMPUTE:-on}; do
    xl_1024 "accum_xl_4x1024_${g}_$r" 4 --recompute "$r" --warmup 2 --steps 5 &&
      xl_1024 "accum_xl_8x1024x32_${g}_$r" 8 --recompute "$r" --grad-accum 32 --warmup 1 --steps 2 || return
  done
}
# The issue's own working point: micro-batch 16 × 1024 with --grad-accum 16 (262 144 tokens a step),
# which fits on 80 GB with bf16 gradients (plan: 73.1 GB with --recompute on, 78.2 with swiglu).
# accum_16 NAME [flags...]: one run of it, ACCUM_WARMUP warm-up steps (default 1; --cuda-graph on
# needs 2) and two measured ones, gradients in GRAD_DTYPE (default bf16).
accum_16() {
  local name=$1
  shift
  GRAD_DTYPE=${GRAD_DTYPE:-bf16} xl_1024 "$name" 16 --grad-accum 16 --warmup "${ACCUM_WARMUP:-1}" --steps 2 "$@"
}
step_accum-xl-16() {
  local g=${GRAD_DTYPE:-bf16} r
  for r in ${ACCUM_RECOMPUTE:-on}; do
    GRAD_DTYPE=$g accum_16 "accum_xl_16x1024x16_${g}_$r" --recompute "$r" || return
  done
}
# The MFU target's working point (accum_16, bf16 gradients) with each option set of MFU_OPTIONS
# (';'-separated; default: --recompute on, swiglu, swiglu with --update-sms 24), in turn.
step_mfu-accum() {
  local opts k=0 IFS=";" args
  for opts in ${MFU_OPTIONS:---recompute on;--recompute swiglu;--recompute swiglu --update-sms 24}; do
    k=$((k + 1))
    echo "--- $opts"
    IFS=' ' read -r -a args <<<"$opts"
    GRAD_DTYPE=bf16 accum_16 "mfu_accum_$k" "${args[@]}" | grep -E "^xl|^\[|device alloc" || return
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
# paratrain's XL at its defaults and with bf16 gradients beside PyTorch eager, one call.
step_peers-xl() {
  bench_model peers_xl_fp32 xl fp32 naive &&
  bench_model peers_xl_bf16 xl bf16 flash &&
  bench_model peers_xl_bf16_grads xl bf16 flash --grad-dtype bf16 &&
  torch_model xl
}
# FlashAttention-3 as issue 18's peer on the leaderboard case (B 1, H 16, T 16384, causal, bf16, dO =
# ones): .devbundle/fa3_bench is FA3's hopper kernels called without PyTorch (dev/build_fa3.sh builds
# it here; the bundle's .devbundle carries it). Twice, at d 64 and 128: paratrain's default kernels
# with --deterministic on and off (FA3_TILES names tiles instead), FA3 (dQ by atomics, its default) and
# FA3 --deterministic (FA3_ROUNDS rounds, default 2); then SDPA (cuDNN, flash) beside paratrain's last
# record of each d. Then ncu on one forward of each at d 64 (paratrain's with FA3_NCU_TILES, default
# ws3x128/ws2/fxp; FA3_NCU=0 skips it): the same sections as ncu-flash, for the cycles, the tensor and
# XU pipes and the issue slots side by side.
step_fa3-peer() {
  local bin=.devbundle/fa3_bench k d
  [ -x "$bin" ] || { echo "fa3-peer: no $bin (build it here with dev/build_fa3.sh)"; return 1; }
  local det
  for k in $(seq "${FA3_ROUNDS:-2}"); do
    for d in 64 128; do
      for det in on off; do
        paratrain bench attention --impl flash --dtype bf16 --batch 1 --heads 16 --seq 16384 --head-dim "$d" \
          --causal 1 --dout ones --iters 20 --deterministic "$det" ${FA3_TILES:+--wgmma-tiles "$FA3_TILES"} \
          --out "$RESULTS/fa3_peer_lb_d${d}_${det}_$k.h5" --overwrite | grep "^flash " || return
      done
      "$bin" --batch 1 --heads 16 --seq 16384 --head-dim "$d" --iters 20 || return
      "$bin" --batch 1 --heads 16 --seq 16384 --head-dim "$d" --iters 20 --deterministic 1 | sed 's/^fa3 /fa3-det /' ||
        return
    done
  done
  for d in 64 128; do
    [ "${FA3_ROUNDS:-2}" -gt 0 ] || break
    python3 scripts/bench_attention_torch.py --head-dim "$d" --paratrain-h5 "$RESULTS/fa3_peer_lb_d${d}_on_$k.h5" || return
  done
  [ "${FA3_NCU:-1}" = 0 ] && return
  local sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats
    --section LaunchStats --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active)
  ncu --csv --page raw --print-units base --kernel-name regex:flash_fwd_ws --launch-count 1 "${sections[@]}" \
    paratrain bench attention --impl flash --dtype bf16 --batch 1 --heads 16 --seq 16384 --head-dim 64 --causal 1 \
    --dout ones --warmup 0 --iters 1 --flash-kernels wgmma --wgmma-tiles "${FA3_NCU_TILES:-ws3x128/ws2/fxp}" \
    --out "$RESULTS/ncu_fa3_peer_paratrain.h5" --overwrite >"$RESULTS/ncu_fa3_peer_paratrain_fwd64.csv" || return
  ncu --csv --page raw --print-units base --kernel-name-base demangled --kernel-name regex:FlashAttnFwdSm90 \
    --launch-count 1 "${sections[@]}" "$bin" --batch 1 --heads 16 --seq 16384 --head-dim 64 --warmup 0 --iters 1 \
    >"$RESULTS/ncu_fa3_peer_fa3_fwd64.csv" || return
  python3 - "$RESULTS"/ncu_fa3_peer_paratrain_fwd64.csv "$RESULTS"/ncu_fa3_peer_fa3_fwd64.csv <<'PY'
import csv, sys
want = ["gpc__cycles_elapsed.max", "sm__cycles_elapsed.avg.per_second", "gpu__time_duration.sum",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", "sm__inst_executed.avg.per_cycle_active",
        "launch__registers_per_thread", "launch__block_size", "launch__grid_size"]
want += [f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in
         ("wait", "long_scoreboard", "short_scoreboard", "mio_throttle", "barrier", "dispatch_stall", "not_selected",
          "math_pipe_throttle", "sleeping")]
for path in sys.argv[1:]:
    rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
    if len(rows) < 3:
        print(path, ": no kernel rows"); continue
    head, data = rows[0], rows[2]
    print("==", path.rsplit("/", 1)[-1])
    for w in want:
        if w in head: print(f"  {w} = {data[head.index(w)]}")
PY
}
step_llmc-xl() {
  local bin=.peers/llm.c/train_gpt2cu data=$RESULTS/llmc_data
  [ -x "$bin" ] || { echo "llmc-xl: no $bin (build it here with dev/build_llmc.sh, carry .peers)"; return 1; }
  mkdir -p "$data" "$RESULTS/llmc_out"
  # The sample tokens in llm.c's format: a 256 x int32 header (magic 20240520, version 1, count),
  # then uint16 tokens (the ids are below 10 000, inside GPT-2's vocabulary).
  python3 - "$data" <<'PY' || return
import sys, numpy as np
toks = np.load("data/sample_tokens.npy").astype(np.uint16)
cut = len(toks) * 9 // 10
for name, part in (("train", toks[:cut]), ("val", toks[cut:])):
    header = np.zeros(256, np.int32)
    header[:3] = (20240520, 1, len(part))
    with open(f"{sys.argv[1]}/sample_{name}_000000.bin", "wb") as f:
        f.write(header.tobytes())
        f.write(part.tobytes())
PY
  local spec b d rc=0
  for spec in ${LLMC_POINTS:-4:4096 8:262144 16:262144}; do
    b=${spec%%:*} d=${spec##*:}
    echo "--- llm.c -e d48 -b $b -t 1024 -d $d"
    "$bin" -i "$data/sample_train_*.bin" -j "$data/sample_val_*.bin" -e d48 -b "$b" -t 1024 -d "$d" \
      -x 4 -v 1000 -m 1 -s 0 -n 0 -h 0 -o "$RESULTS/llmc_out" -l 1e-4 -u 0 2>&1 |
      grep -E "step +[0-9]+/|MFU|num_parameters|device memory|batch size|HINT|error|Error|failed" || rc=1
  done
  return $rc
}
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
    paratrain bench model --sizes "$size" --contexts 512 --precisions bf16 --attention flash --grad-dtype bf16 \
    --warmup 1 --steps 1 --out "$RESULTS/ncu_${name}_$size.h5" --overwrite >"$csv" || return
  ncu_step_table "$csv"
}
# The memory-bound kernels of one step (GEMMs, flash and AdamW are profiled elsewhere).
step_ncu-memory() {
  ncu_step memory 'rmsnorm|rope|map_kernel|swiglu|gather_rows|scatter_add|cross_entropy|add_sums|squared_norm|first_row|sum_rows' \
    dram__bytes_read.sum dram__bytes_write.sum sm__warps_active.avg.pct_of_peak_sustained_active
}
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
# vary from run to run: docs/reports/2026-11-27_gemm-choice-covering-grid_h100.md).
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
      paratrain bench attention --impl flash --dtype bf16 --batch "$b" --heads "$h" --seq "$t" --head-dim "$d" \
      --causal 1 --dout ones --warmup 1 --iters 1 ${NCU_TILES:+--flash-kernels wgmma --wgmma-tiles "$NCU_TILES"} \
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
      paratrain bench attention --impl flash --dtype bf16 --batch "$b" --heads "$h" --seq "$t" --head-dim "$d" \
      --causal 1 --dout ones --warmup 0 --iters 1 --flash-kernels wgmma --wgmma-tiles "$tiles" \
      --out "$RESULTS/ncu_source_$name.h5" --overwrite || return
    ncu --import "$RESULTS/ncu_source_$name.ncu-rep" --page source --csv --print-source sass \
      >"$RESULTS/ncu_source_$name.csv" || return
    wc -l "$RESULTS/ncu_source_$name.csv"
  done
}
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
  clocks paratrain bench model --sizes xl --contexts 512 --precisions bf16 --attention flash --grad-dtype bf16 \
    --warmup 3 --steps 20 --out "$RESULTS/clocks_xl.h5" --overwrite &&
  clocks paratrain bench gemm --model xl --context 512 --batch 4 --precision bf16 --out "$RESULTS/clocks_gemm.h5" --overwrite
}
# The clocks while the leaderboard case runs (CLOCKS_FLASH_D, default 128; each tile set of
# CLOCKS_FLASH_TILES alone, CLOCKS_FLASH_ITERS timed passes of each loop, default 300; the forward
# loop, then the backward's, then fwd+bwd): whether a loop runs below the boost clock, at the power
# cap. CLOCKS_SERIES=1 prints the samples in order, so each loop's share can be read off.
step_clocks-flash() {
  local t d=${CLOCKS_FLASH_D:-128}
  for t in ${CLOCKS_FLASH_TILES:-ws2x128/ws2/acc ws2x128/ws2/ws2}; do
    echo "== tiles $t, d $d"
    clocks flash_times "clocks_flash_d${d}_${t//\//_}" 1 16 16384 "$d" "$t" --iters "${CLOCKS_FLASH_ITERS:-300}" || return
  done
}
# The clocks at llm.c's working point (XL 16 x 1024, bf16 gradients, --grad-accum 4), then while the
# attention of that shape runs alone in the model's layout (1x64/1/1 and the warp-specialised passes,
# 300 timed passes each): whether the step's power cap slows the compute-bound flash kernels
# (slower in the step than alone: docs/reports/2026-11-26_power-cap_h100.md).
step_clocks-accum() {
  local t
  GRAD_DTYPE=bf16 clocks xl_1024 clocks_accum 16 --recompute on --grad-accum 4 --warmup 1 --steps 1 || return
  for t in 1x64/1/1 ws2x128/ws2/ws2; do
    echo "== tiles $t, model layout"
    FLASH_LAYOUT=model clocks flash_times "clocks_attn_${t//\//_}" 16 25 1024 64 "$t" --iters 300 || return
  done
}
step_torch-model-sizes() { torch_model small,medium,large,xl,2.7b; }
# Issue 16's fp32 target (≤ 0.90× PyTorch eager at every size): paratrain fp32 (naive attention, the
# reference model) at every named size, then PyTorch eager fp32 at the same sizes, one call.
step_fp32-sizes() {
  bench_model fp32_sizes small,medium,large,xl,2.7b fp32 naive &&
  python3 scripts/compare_torch.py --sizes small,medium,large,xl,2.7b --contexts 512 --precisions fp32 --variants eager \
    --warmup 2 --steps 5 --out "$RESULTS/torch_fp32_sizes.h5" --overwrite
}
step_model-2.7b() {
  bench_model model_27b_fp32 2.7b fp32 naive --memory-profile &&
  bench_model model_27b_bf16 2.7b bf16 naive,flash --memory-profile
}
torch_model() {
  python3 scripts/compare_torch.py --sizes "$1" --contexts 512 --precisions fp32,bf16 --variants eager \
    --warmup 2 --steps 5 --out "$RESULTS/torch_model_${1//,/_}.h5" --overwrite
}
step_torch-model-xl() { torch_model xl; }
step_sanitizer() {
  compute-sanitizer --tool memcheck --error-exitcode 3 paratrain_tests_gpu --gtest_color=no \
    --gtest_filter='FlashGpu.OddLengths:FlashGpu.FusedQkvStrides' &&
  compute-sanitizer --tool racecheck --error-exitcode 3 paratrain_tests_gpu --gtest_color=no \
    --gtest_filter='FlashGpu.Batch4Seq128D64'
}
# The kernels of --grad-dtype bf16 (the embedding's fp32 sums, RMSNorm's, the updates) under memcheck;
# RMSNorm's last-block rounding under racecheck.
step_sanitizer-grads() {
  compute-sanitizer --tool memcheck --error-exitcode 3 paratrain_tests_gpu --gtest_color=no \
    --gtest_filter='GpuEmbedding.*:GpuRMSNormBf16Grad.*:GpuOptim.Bf16*' &&
  compute-sanitizer --tool racecheck --error-exitcode 3 paratrain_tests_gpu --gtest_color=no \
    --gtest_filter='GpuRMSNormBf16Grad.*'
}
# RMSNorm's backward (dw lines in shared memory, reused chunk after chunk) under memcheck, racecheck
# and synccheck: every width of the GPU test, 70 000 columns (69 chunks) included.
step_sanitizer-rmsnorm() {
  local tool
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool $tool --error-exitcode 3 paratrain_tests_gpu --gtest_color=no \
      --gtest_filter='*GpuRMSNorm*:-*BitForBit*' || return
  done
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
  paratrain bench attention --impl flash --dtype bf16 --batch 1 --heads 16 --seq 2048,8192,16384 --head-dim 64,128 \
    --causal 1 --dout ones --flash-kernels wgmma --wgmma-tiles 1x64/1/1,2x128/2/1,1x64/1/acc,2x128/2/acc,2x128/1/acc \
    --out "$RESULTS/flash_acc_sweep.h5" --overwrite
}
# Causal bf16 flash timings with dO = ones: RECORD B H SEQ D TILES [more bench attention options]; in
# FLASH_LAYOUT's layout when set (heads or model: bench attention --layout).
flash_times() {
  paratrain bench attention --impl flash --dtype bf16 --batch "$2" --heads "$3" --seq "$4" --head-dim "$5" \
    --causal 1 --dout ones --flash-kernels wgmma --wgmma-tiles "$6" ${FLASH_LAYOUT:+--layout "$FLASH_LAYOUT"} \
    --out "$RESULTS/$1.h5" --overwrite "${@:7}"
}
# The warp-specialised TMA kernels (issue 18): the flash GPU tests with each of their shapes, the
# leaderboard case at d 64 and 128 against the cp.async shapes and SDPA in the same step, the short
# lengths (B·H = 64) at d 64 and 128, then memcheck / racecheck / synccheck on small cases.
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
step_flash-sanitizers() {
  local t rc=0
  for t in ${SAN_TILES:-ws2x128/ws2/acc 1x64/1/1}; do
    flash_tests_with "$t" || rc=1
    flash_sanitizers "$t" || rc=1
  done
  return $rc
}
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
    flash_times "single_pass_lb_d$d" 1 16 16384 $d $ab &&
      python3 scripts/bench_attention_torch.py --head-dim $d --paratrain-h5 "$RESULTS/single_pass_lb_d$d.h5" || rc=1
    flash_times "single_pass_short_d$d" 4 16 512,1024,2048 $d $ab || rc=1
  done
  return $rc
}
# The flash sweep of docs/FLASH_ATTENTION.md (B 1, H 1, causal, bf16, T 128 … 65536, 10 timed
# passes, dO random) for d 64 and 128: each tile set of the defaults at every length.
step_flash-sweep-ws() {
  local seq=128,256,512,1024,2048,4096,8192,16384,32768,65536 d tiles
  local both=1x64/1/1,ws2x128/ws2/ws2,ws2x128/ws2/acc  # each default's rows (ops/flash_attention.cpp)
  for d in 64:$both 128:$both; do
    tiles=${d#*:} d=${d%%:*}
    paratrain bench attention --impl flash --dtype bf16 --batch 1 --heads 1 --seq $seq --head-dim "$d" --causal 1 \
      --flash-kernels wgmma --wgmma-tiles "$tiles" --iters 10 --warmup 2 --out "$RESULTS/flash_sweep_d$d.h5" \
      --overwrite || return
  done
}
step_gemm-xl() {
  for p in fp32 bf16; do
    paratrain bench gemm --model xl --context 512 --batch 4 --precision $p --out "$RESULTS/gemm_xl_$p.h5" --overwrite || return
  done
}
torch_compile() {
  python3 scripts/compare_torch.py --sizes "$1" --contexts 512 --precisions "${COMPILE_PRECISIONS:-bf16}" --variants compile \
    --warmup 2 --steps 5 --out "$RESULTS/torch_compile_${1//,/_}.h5" --overwrite
}
for _s in small medium large xl 2.7b; do eval "step_torch-compile-$_s() { torch_compile $_s; }"; done
unset _s
step_torch-model-2.7b() { torch_model 2.7b; }
step_probe-opt-overlap() { python3 dev/probe_optimizer_overlap.py; }
step_probe-swiglu-epilogue() { python3 dev/probe_swiglu_epilogue.py; }
step_probe-cutlass-swiglu() {
  local bin=${PROBE_CUTLASS:-.devbundle/probe_cutlass_swiglu}
  [ -x "$bin" ] || { echo "probe-cutlass-swiglu: no $bin (build it here: dev/build_probe_cutlass.sh)"; return 1; }
  "$bin"
}
ddp_xl() {
  "${MPIRUN[@]}" paratrain bench ddp --model xl --precision "$1" --ddp none,bucketed --bucket-mb 25,1000 \
    --shard-optimizer zero1 --comm-sms "${COMM_SMS:-auto}" --grad-comm "${GRAD_COMM:-fp32,bf16}" \
    --zero1-prefetch "${ZERO1_PREFETCH:-on,off}" --warmup 2 --steps 5 --out "$RESULTS/ddp_xl_$1.h5" --overwrite
}
step_ddp-xl-bf16() { ddp_xl bf16; }
step_ddp-xl-fp32() { ddp_xl fp32; }
step_torch-ddp-xl() {
  "${MPIRUN[@]}" -x PYTHONUNBUFFERED -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 \
    python3 scripts/compare_torch_ddp.py --model xl --precision fp32,bf16 --steps 5 --warmup 2 \
    --out "$RESULTS/torch_ddp_xl.h5" --overwrite
}
step_nccl-channels() {
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING "${MPIRUN[@]}" -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
    paratrain bench allreduce --sizes 1G --out "$RESULTS/allreduce_2.h5" --overwrite 2>&1 |
    grep -E "channels|nChannels|Channel 0|Connected all|NCCL version" | head -40
}

# run_one NAME SECONDS [CUDA_VISIBLE_DEVICES]
run_one() {
  local name=$1 secs=$2 dev=${3:-} start rc
  declare -F "step_$name" >/dev/null || { echo "gpu_checks: unknown step '$name'" >&2; return 2; }
  start=$(date +%s)
  echo "=== $name (limit ${secs}s${dev:+, GPU $dev}) $(date -u +%H:%M:%S)"
  if [ -n "$dev" ]; then
    CUDA_VISIBLE_DEVICES=$dev timeout -k 10 "$secs" bash -c "$(declare -f); $(declare -p MPIRUN RESULTS); step_$name" \
      >"$RESULTS/$name.log" 2>&1
  else
    timeout -k 10 "$secs" bash -c "$(declare -f); $(declare -p MPIRUN RESULTS); step_$name" \
      >"$RESULTS/$name.log" 2>&1
  fi
  rc=$?
  echo "$name rc=$rc $(( $(date +%s) - start ))s" | tee -a "$OUT/summary.txt"
  tail -n 25 "$RESULTS/$name.log"
  pack
  return 0
}

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
