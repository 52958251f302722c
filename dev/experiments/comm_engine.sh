#!/usr/bin/env bash
# The copy-engine collectives (--comm-engine ce) against NCCL on one GPU host: the NCCL suite on
# both engines, nccl-tests-style bus bandwidth per engine, the XL step per engine and gradient
# type, PyTorch DDP beside it, and 4 ranks as 2 emulated nodes. Run from the repository root on a
# GPU machine after `source .devbundle/main/env.sh`; the runner is scripts/gpu_steps.sh.
#
#   dev/experiments/comm_engine.sh STEP[:SECONDS] ...   (default SECONDS per step: 300) | --list | --help
#
# Steps (NP ranks, one GPU each; variables they read in brackets):
#   ce-tests             the NCCL suite with PARATRAIN_TEST_COMM_ENGINE=ce, then with nccl, and the
#                        abort test of a copy-engine collective
#   ce-collectives       bench allreduce: all-reduce, reduce-scatter, all-gather, 1M-1G [ENGINES]
#   ce-ddp-bf16          bench ddp xl bf16, bf16 gradients: none, bucketed 25, zero1 [ENGINES]
#   ce-ddp-bf16-sms      the same on ce alone, bucketed 25 and 100 MiB, --comm-sms 0 and 16
#   ce-ddp-buckets       bench ddp xl bf16, bf16 gradients: none, bucketed 25, 50, 100, 200 MiB [ENGINES]
#   ce-ddp-fp32          bench ddp xl bf16, fp32 gradients: none, bucketed 25 [ENGINES]
#   ce-ddp-accum         ce-ddp-bf16 with --grad-accum 4 [ENGINES]
#   ce-torch-ddp         scripts/compare_torch_ddp.py xl bf16: none and DDP (the peer)
#   ce-ddp-1rank         bench ddp xl bf16, bf16 gradients, one rank (GPU 0): the scaling table's first row
#   ce-torch-1rank       PyTorch (SDPA) on one rank, and none and DDP on NP ranks, with and without
#                        --grad-accum 4: the peer of the scaling table
#   llmc-point           bench ddp at llm.c's working point (xl, 8 x 1024, 262 144 tokens a step: --grad-accum
#                        32 / NP): none, bucketed 25, zero1 [ENGINES]
#   llmc-point-torch     PyTorch DDP (SDPA) at the same point
#   ce-split-nodes       PARATRAIN_TEST_SPLIT_NODES=2 (NP=4: 2 nodes x 2): the NCCL suite and bench
#                        ddp with --comm-engine auto, which must fall back to NCCL between nodes
set -uo pipefail
# shellcheck source=scripts/gpu_steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/gpu_steps.sh"

# xl_ddp NAME [flags...]: bench ddp, XL at context 512, batch 4 a rank, bf16 with flash attention.
xl_ddp() {
  local name=$1
  shift
  "${MPIRUN[@]}" paratrain bench ddp --model xl --precision bf16 --attention flash --warmup 2 --steps 5 \
    --out "$RESULTS/${name}_np$NP.h5" --overwrite "$@"
}
step_ce-tests() {
  "${MPIRUN[@]}" -x PARATRAIN_TEST_COMM_ENGINE=ce paratrain_tests_dist --gtest_color=no \
    --gtest_filter='*Nccl*:*CopyEngine*' &&
    "${MPIRUN[@]}" paratrain_tests_dist --gtest_color=no --gtest_filter='*Nccl*' &&
    PARATRAIN_COMM_TIMEOUT_S=3 sh tests/parallel/probe/expect_abort.sh mpirun "$(command -v paratrain_comm_probe)" \
      hang ce "rank 0 of 2: communication failure in ce all_reduce"
}
step_ce-collectives() {
  "${MPIRUN[@]}" paratrain bench allreduce --comm-engine "${ENGINES:-nccl,ce}" \
    --collective all_reduce,reduce_scatter,all_gather --bytes 1M,4M,16M,64M,256M,1G \
    --out "$RESULTS/allreduce_np$NP.h5" --overwrite
}
step_ce-ddp-bf16() {
  xl_ddp ddp_bf16 --grad-dtype bf16 --ddp none,bucketed --bucket-mb 25 --shard-optimizer none,zero1 \
    --comm-engine "${ENGINES:-nccl,ce}"
}
step_ce-ddp-bf16-sms() {
  xl_ddp ddp_bf16_sms --grad-dtype bf16 --ddp none,bucketed --bucket-mb 25,100 --comm-engine ce --comm-sms 0,16
}
step_ce-ddp-buckets() {
  xl_ddp ddp_buckets --grad-dtype bf16 --ddp none,bucketed --bucket-mb 25,50,100,200 --comm-engine "${ENGINES:-nccl,ce}"
}
step_ce-ddp-fp32() {
  xl_ddp ddp_fp32 --grad-dtype fp32 --ddp none,bucketed --bucket-mb 25 --comm-engine "${ENGINES:-nccl,ce}"
}
step_ce-ddp-accum() {
  xl_ddp ddp_accum --grad-dtype bf16 --grad-accum 4 --ddp none,bucketed --bucket-mb 25 \
    --shard-optimizer none,zero1 --comm-engine "${ENGINES:-nccl,ce}"
}
step_ce-torch-ddp() {
  "${MPIRUN[@]}" -x PYTHONUNBUFFERED -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 \
    python3 scripts/compare_torch_ddp.py --model xl --precision bf16 --strategies none,ddp --steps 5 --warmup 2 \
    --out "$RESULTS/torch_ddp_np$NP.h5" --overwrite
}
step_ce-ddp-1rank() {
  CUDA_VISIBLE_DEVICES=0 paratrain bench ddp --model xl --precision bf16 --attention flash --warmup 2 --steps 5 \
    --grad-dtype bf16 --ddp none --out "$RESULTS/ddp_bf16_np1.h5" --overwrite
}
torch_ddp() {
  local name=$1
  shift
  "${MPIRUN[@]}" -x PYTHONUNBUFFERED -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 \
    python3 scripts/compare_torch_ddp.py --model xl --precision bf16 --attention sdpa \
    --out "$RESULTS/${name}_np$NP.h5" --overwrite "$@"
}
step_ce-torch-1rank() {
  CUDA_VISIBLE_DEVICES=0 python3 scripts/compare_torch_ddp.py --model xl --precision bf16 --attention sdpa \
    --strategies none --steps 5 --warmup 2 --out "$RESULTS/torch_sdpa_np1.h5" --overwrite &&
    torch_ddp torch_sdpa --strategies none,ddp --steps 5 --warmup 2 &&
    torch_ddp torch_sdpa_accum --strategies none,ddp --steps 5 --warmup 2 --grad-accum 4
}
step_llmc-point() {
  "${MPIRUN[@]}" paratrain bench ddp --model xl --precision bf16 --attention flash --grad-dtype bf16 \
    --context-length 1024 --batch-size 8 --grad-accum $((32 / NP)) --warmup 1 --steps 2 --ddp none,bucketed --bucket-mb 25 \
    --shard-optimizer none,zero1 --comm-engine "${ENGINES:-nccl,ce}" --out "$RESULTS/llmc_point_np$NP.h5" --overwrite
}
step_llmc-point-torch() {
  torch_ddp torch_llmc_point --strategies none,ddp --context-length 1024 --batch-size 8 --grad-accum $((32 / NP)) \
    --steps 2 --warmup 1
}
step_ce-split-nodes() {
  export PARATRAIN_TEST_SPLIT_NODES=2
  "${MPIRUN[@]}" -x PARATRAIN_TEST_SPLIT_NODES -x PARATRAIN_TEST_COMM_ENGINE=auto paratrain_tests_dist \
    --gtest_color=no --gtest_filter='*SplitNodes*:*Nccl*' &&
    NCCL_DEBUG=INFO "${MPIRUN[@]}" -x PARATRAIN_TEST_SPLIT_NODES -x NCCL_DEBUG paratrain bench allreduce \
      --comm-engine auto --bytes 64M,1G --out "$RESULTS/split_allreduce_np$NP.h5" --overwrite |
    grep -E "via NET|via P2P|via SHM|busbw" | sort | uniq -c &&
    "${MPIRUN[@]}" -x PARATRAIN_TEST_SPLIT_NODES paratrain bench ddp --model xl --precision bf16 --attention flash \
      --warmup 2 --steps 5 --grad-dtype bf16 --ddp none,bucketed --bucket-mb 25 --comm-engine auto \
      --out "$RESULTS/split_ddp_np$NP.h5" --overwrite
}

run_steps "$@"
