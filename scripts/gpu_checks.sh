#!/usr/bin/env bash
# The GPU checks a release needs, on a GPU machine in one call: the GPU and NCCL suites, the
# sanitizers, parity with PyTorch, the benchmarks the docs quote and the peers. Run from the
# repository root after `source <bundle>/env.sh` (scripts/device_bundle.sh); the runner is
# scripts/gpu_steps.sh. The experiments (A/B of builds and options, traces, ncu, clocks, probes)
# are in dev/experiments/ (dev/README.md).
#
#   scripts/gpu_checks.sh STEP[:SECONDS] ...   (default SECONDS per step: 300; A+B: A on GPU 0, B on GPU 1)
#   NP=4 scripts/gpu_checks.sh dist-tests ...   (the multi-GPU steps on NP ranks; default 2)
#   scripts/gpu_checks.sh --list | --help
#
# Steps; those marked * need NP GPUs (the others one). Variables they read in brackets.
#   gpu-tests            paratrain_tests_gpu
#   dist-tests *         paratrain_tests_dist on NP ranks: the NCCL suites
#   flash-mma            the flash GPU tests with the mma.sync family only
#   binding *            2-rank train under each GPU binding (both on GPU 0 must be refused); NCCL tests
#   native-arch          scripts/check_native_arch.sh: what CMAKE_CUDA_ARCHITECTURES=native gives
#   sanitizer            compute-sanitizer memcheck + racecheck on small flash GPU tests
#   sanitizer-grads      memcheck on the --grad-dtype bf16 kernels' GPU tests, racecheck on RMSNorm's
#   sanitizer-rmsnorm    memcheck, racecheck, synccheck on the RMSNorm GPU tests
#   flash-sanitizers     the flash GPU tests, memcheck, racecheck, synccheck per tile set [SAN_TILES]
#   model-small          bench model small, ctx 128 and 512, fp32/bf16, naive/flash, breakdown + memory
#   model-xl             bench model xl ctx 512: fp32 naive, bf16 flash, breakdown + memory profile
#   model-xl-keep        model-xl with --recompute off, without breakdown and memory profile
#   model-2.7b           bench model 2.7b ctx 512: fp32 naive, bf16 naive and flash, memory profile
#   model-sizes          bench model, every named size, ctx 512: fp32 naive, bf16 naive and flash
#   gemm-xl              bench gemm xl ctx 512, fp32 and bf16: cuBLAS against cuBLASLt
#   roofline             bench model xl and small, bf16 flash, --breakdown: the roofline [GRAD_DTYPE]
#   small-graph          bench model small, bf16 flash, --cuda-graph on, fp32 and bf16 gradients
#   targets-xl           XL bf16 flash: fp32, bf16 gradients (roofline), bf16 with --recompute off, swiglu
#   accum-xl             XL at llm.c's points 4 x 1024 and 8 x 1024 x --grad-accum 32 [GRAD_DTYPE ACCUM_RECOMPUTE]
#   accum-xl-16          XL 16 x 1024 x --grad-accum 16 [GRAD_DTYPE (bf16) ACCUM_RECOMPUTE ACCUM_WARMUP]
#   mfu-accum            the MFU target's point (accum-xl-16) per ';'-separated option set [MFU_OPTIONS]
#   flash-d80            bench attention flash vs naive, d 64 and 80, T 512 and 4096; d 80's registers
#   flash-sweep-ws       flash B 1 x H 1, T 128 … 65536, d 64 and 128, each default's tile set
#   portable             bench model small and xl bf16 flash; again with mma on 90a builds [BUILD_TAG]
#   portable-small       the small model alone, 30 steps, auto and (90a builds) mma [BUILD_TAG]
#   collectives *        bench allreduce, NCCL: four collectives at 1M-1G (nccl-tests' busbw)
#   plan-xl *            bench ddp xl bf16 flash none/bucketed/zero1: plan's test fixture
#   ddp-xl-bf16 *        bench ddp xl bf16, every strategy [COMM_SMS GRAD_COMM ZERO1_PREFETCH]
#   ddp-xl-fp32 *        the same in fp32
#   torch-ddp-xl *       scripts/compare_torch_ddp.py xl fp32,bf16
#   torch-model-xl       scripts/compare_torch.py xl ctx 512, eager fp32 and bf16
#   torch-model-2.7b     the same for 2.7b
#   torch-model-sizes    the same for every named size
#   torch-compile-S      compare_torch.py S (small|medium|large|xl|2.7b), compiled [COMPILE_PRECISIONS (bf16)]
#   fp32-sizes           bench model fp32 naive and compare_torch.py eager fp32, every named size
#   peers-xl             bench model xl fp32 naive, bf16 flash, bf16 gradients; compare_torch.py xl
#   llmc-xl              llm.c's train_gpt2cu (dev/build_llmc.sh; carry .peers) [LLMC_POINTS]
#   fa3-peer             FlashAttention-3 (dev/build_fa3.sh) beside paratrain and SDPA; ncu of both
#                        d 64 forwards [FA3_ROUNDS FA3_TILES FA3_NCU FA3_NCU_TILES]
set -uo pipefail
# shellcheck source=scripts/gpu_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_steps.sh"

step_gpu-tests() { paratrain_tests_gpu --gtest_color=no; }
step_dist-tests() { "${MPIRUN[@]}" paratrain_tests_dist --gtest_color=no --gtest_filter='Nccl*'; }
step_flash-mma() { PT_FLASH_TEST_KERNELS=mma paratrain_tests_gpu --gtest_color=no --gtest_filter='FlashGpu.*'; }
step_native-arch() { scripts/check_native_arch.sh; }
step_binding() {
  local train=(paratrain train --model small --precision bf16 --attention flash --steps 3 --log-every 1)
  # shellcheck disable=SC2016  # expanded by the rank's own shell
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

# ---- sanitizers -----------------------------------------------------------------------------
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
step_flash-sanitizers() {
  local t rc=0
  for t in ${SAN_TILES:-ws2x128/ws2/acc 1x64/1/1}; do
    flash_tests_with "$t" || rc=1
    flash_sanitizers "$t" || rc=1
  done
  return $rc
}

# ---- the benchmarks the docs quote ------------------------------------------------------------
step_model-small() {
  paratrain bench model --model small --context-length 128,512 --precision fp32,bf16 --attention naive,flash \
    --warmup 3 --steps 10 --breakdown --memory-profile --out "$RESULTS/model_small.h5" --overwrite
}
step_model-xl() {
  bench_model model_xl_fp32 xl fp32 naive --breakdown --memory-profile &&
  bench_model model_xl_bf16 xl bf16 flash --breakdown --memory-profile
}
step_model-xl-keep() {
  bench_model model_xl_fp32_keep xl fp32 naive --recompute off &&
  bench_model model_xl_bf16_keep xl bf16 flash --recompute off
}
step_model-2.7b() {
  bench_model model_27b_fp32 2.7b fp32 naive --memory-profile &&
  bench_model model_27b_bf16 2.7b bf16 naive,flash --memory-profile
}
step_model-sizes() {
  bench_model model_sizes_fp32 small,medium,large,xl,2.7b fp32 naive &&
  bench_model model_sizes_bf16 small,medium,large,xl,2.7b bf16 naive,flash
}
step_gemm-xl() {
  for p in fp32 bf16; do
    paratrain bench gemm --model xl --context-length 512 --batch-size 4 --precision $p --out "$RESULTS/gemm_xl_$p.h5" --overwrite || return
  done
}
step_roofline() {
  bench_model roofline_xl xl bf16 flash --breakdown --grad-dtype "${GRAD_DTYPE:-fp32}" &&
  bench_model roofline_small small bf16 flash --breakdown --grad-dtype "${GRAD_DTYPE:-fp32}"
}
# The small model's target configuration (context 512, batch 4, bf16, flash, CUDA graph).
step_small-graph() {
  local g
  for g in fp32 bf16; do
    paratrain bench model --model small --context-length 512 --precision bf16 --attention flash --grad-dtype "$g" \
      --cuda-graph on --warmup 3 --steps 30 --out "$RESULTS/small_graph_$g.h5" --overwrite || return
  done
}
step_targets-xl() {
  bench_model targets_xl_fp32_grads xl bf16 flash --grad-dtype fp32 --breakdown &&
  bench_model targets_xl_bf16_grads xl bf16 flash --grad-dtype bf16 --breakdown &&
  bench_model targets_xl_bf16_grads_keep xl bf16 flash --grad-dtype bf16 --recompute off &&
  bench_model targets_xl_bf16_grads_swiglu xl bf16 flash --grad-dtype bf16 --recompute swiglu
}
step_accum-xl() {
  local g=${GRAD_DTYPE:-fp32} r
  for r in ${ACCUM_RECOMPUTE:-on}; do
    xl_1024 "accum_xl_4x1024_${g}_$r" 4 --recompute "$r" --warmup 2 --steps 5 &&
      xl_1024 "accum_xl_8x1024x32_${g}_$r" 8 --recompute "$r" --grad-accum 32 --warmup 1 --steps 2 || return
  done
}
step_accum-xl-16() {
  local g=${GRAD_DTYPE:-bf16} r
  for r in ${ACCUM_RECOMPUTE:-on}; do
    GRAD_DTYPE=$g accum_16 "accum_xl_16x1024x16_${g}_$r" --recompute "$r" || return
  done
}
step_mfu-accum() {
  local opts k=0 IFS=";" args
  for opts in ${MFU_OPTIONS:---recompute on;--recompute swiglu;--recompute swiglu --update-sms 24}; do
    k=$((k + 1))
    echo "--- $opts"
    IFS=' ' read -r -a args <<<"$opts"
    GRAD_DTYPE=bf16 accum_16 "mfu_accum_$k" "${args[@]}" | grep -E "^xl|^\[|device alloc" || return
  done
}
step_flash-d80() {
  paratrain bench attention --attention flash,naive --precision bf16 --batch-size 4 --num-heads 32 --context-length 512,4096 \
    --head-dim 64,80 --causal 1 --out "$RESULTS/flash_d80.h5" --overwrite || return
  local lib
  lib=$(ldd "$(command -v paratrain)" | awk '/libparatrain/ {print $3}')
  cuobjdump --dump-resource-usage "$lib" 2>/dev/null | grep -A1 'Li80E' | grep -o 'Function [^:]*\|REG:[0-9]*\|STACK:[0-9]*\|LOCAL:[0-9]*' | paste - - - -
}
# The flash sweep of docs/FLASH_ATTENTION.md (B 1, H 1, causal, bf16, 10 timed passes, dO random).
step_flash-sweep-ws() {
  local seq=128,256,512,1024,2048,4096,8192,16384,32768,65536 d tiles
  local both=1x64/1/1,ws2x128/ws2/ws2,ws2x128/ws2/acc  # each default's rows (ops/flash_attention.cpp)
  for d in 64:$both 128:$both; do
    tiles=${d#*:} d=${d%%:*}
    paratrain bench attention --attention flash --precision bf16 --batch-size 1 --num-heads 1 --context-length $seq --head-dim "$d" --causal 1 \
      --flash-kernels wgmma --wgmma-tiles "$tiles" --steps 10 --warmup 2 --out "$RESULTS/flash_sweep_d$d.h5" \
      --overwrite || return
  done
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
    paratrain bench model --model small --context-length 512 --precision bf16 --attention flash --warmup 5 --steps 30 \
      --flash-kernels $k --out "$RESULTS/portable_small_${tag}_$k.h5" --overwrite || return
  done
}

# ---- several GPUs -----------------------------------------------------------------------------
step_collectives() {
  "${MPIRUN[@]}" paratrain bench allreduce --backend nccl --collective all_reduce,reduce_scatter,all_gather,broadcast \
    --bytes 1M,10M,100M,1G --out "$RESULTS/collectives_$NP.h5" --overwrite
}
step_plan-xl() {
  "${MPIRUN[@]}" paratrain bench ddp --model xl --precision bf16 --attention flash --ddp none,bucketed \
    --shard-optimizer zero1 --zero1-prefetch on --warmup 1 --steps 2 --out "$RESULTS/bench_ddp_xl_2xh200.h5" --overwrite
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

# ---- PyTorch and the other peers ----------------------------------------------------------------
torch_model() {
  python3 scripts/compare_torch.py --model "$1" --context-length 512 --precision fp32,bf16 --variants eager \
    --warmup 2 --steps 5 --out "$RESULTS/torch_model_${1//,/_}.h5" --overwrite
}
step_torch-model-xl() { torch_model xl; }
step_torch-model-2.7b() { torch_model 2.7b; }
step_torch-model-sizes() { torch_model small,medium,large,xl,2.7b; }
torch_compile() {
  python3 scripts/compare_torch.py --model "$1" --context-length 512 --precision "${COMPILE_PRECISIONS:-bf16}" --variants compile \
    --warmup 2 --steps 5 --out "$RESULTS/torch_compile_${1//,/_}.h5" --overwrite
}
for _s in small medium large xl 2.7b; do eval "step_torch-compile-$_s() { torch_compile $_s; }"; done
unset _s
# The fp32 target (≤ 0.90× PyTorch eager at every size): paratrain fp32 (naive attention, the
# reference model) at every named size, then PyTorch eager fp32 at the same sizes, one call.
step_fp32-sizes() {
  bench_model fp32_sizes small,medium,large,xl,2.7b fp32 naive &&
  python3 scripts/compare_torch.py --model small,medium,large,xl,2.7b --context-length 512 --precision fp32 --variants eager \
    --warmup 2 --steps 5 --out "$RESULTS/torch_fp32_sizes.h5" --overwrite
}
step_peers-xl() {
  bench_model peers_xl_fp32 xl fp32 naive &&
  bench_model peers_xl_bf16 xl bf16 flash &&
  bench_model peers_xl_bf16_grads xl bf16 flash --grad-dtype bf16 &&
  torch_model xl
}
# GPT-2 1.5B from scratch (-e d48, no cuDNN) on the sample tokens at each point of LLMC_POINTS
# (micro-batch:tokens a step; default 4:4096 8:262144 16:262144).
step_llmc-xl() {
  local bin=.peers/llm.c/train_gpt2cu data=$RESULTS/llmc_data
  [ -x "$bin" ] || { echo "llmc-xl: no $bin (build it here with dev/build_llmc.sh, carry .peers)"; return 1; }
  mkdir -p "$data" "$RESULTS/llmc_out"
  python3 scripts/llmc_tokens.py data/sample_tokens.npy "$data" || return
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
# FlashAttention-3 on the leaderboard case (B 1, H 16, T 16384, causal, bf16, dO = ones), without
# PyTorch. Per round, at d 64 and 128: paratrain's defaults with --deterministic on and off
# (FA3_TILES names tiles instead), FA3 (dQ by atomics, its default) and FA3 --deterministic; then SDPA
# beside paratrain's last record of each d; then ncu on one forward of each at d 64 (paratrain's
# with FA3_NCU_TILES, default ws3x128/ws2/fxp): cycles, tensor and XU pipes, issue slots.
step_fa3-peer() {
  local bin=.devbundle/fa3_bench k d det
  [ -x "$bin" ] || { echo "fa3-peer: no $bin (build it here with dev/build_fa3.sh)"; return 1; }
  for k in $(seq "${FA3_ROUNDS:-2}"); do
    for d in 64 128; do
      for det in on off; do
        paratrain bench attention --attention flash --precision bf16 --batch-size 1 --num-heads 16 --context-length 16384 --head-dim "$d" \
          --causal 1 --dout ones --steps 20 --deterministic "$det" ${FA3_TILES:+--wgmma-tiles "$FA3_TILES"} \
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
    paratrain bench attention --attention flash --precision bf16 --batch-size 1 --num-heads 16 --context-length 16384 --head-dim 64 --causal 1 \
    --dout ones --warmup 0 --steps 1 --flash-kernels wgmma --wgmma-tiles "${FA3_NCU_TILES:-ws3x128/ws2/fxp}" \
    --out "$RESULTS/ncu_fa3_peer_paratrain.h5" --overwrite >"$RESULTS/ncu_fa3_peer_paratrain_fwd64.csv" || return
  ncu --csv --page raw --print-units base --kernel-name-base demangled --kernel-name regex:FlashAttnFwdSm90 \
    --launch-count 1 "${sections[@]}" "$bin" --batch 1 --heads 16 --seq 16384 --head-dim 64 --warmup 0 --iters 1 \
    >"$RESULTS/ncu_fa3_peer_fa3_fwd64.csv" || return
  python3 scripts/ncu_kernel_metrics.py "$RESULTS"/ncu_fa3_peer_paratrain_fwd64.csv "$RESULTS"/ncu_fa3_peer_fa3_fwd64.csv
}

run_steps "$@"
