#!/usr/bin/env bash
# Copy-engine collectives against NCCL on one GPU host, in one device call: the NCCL suite on
# both engines, nccl-tests-style busbw per engine, the XL step per engine and gradient type,
# PyTorch DDP beside it. Run from the repository root with the bundle built
# (scripts/device_bundle.sh); logs and records land in $OUT (results.tgz, summary.txt).
#
#   dev/experiments/comm_engine.sh STEP[:SECONDS] ...      NP=4 for four ranks (default 2)
# Steps: tests  collectives  ddp-bf16  ddp-fp32  ddp-accum  torch-ddp  split-nodes  timeline
set -uo pipefail
source .devbundle/main/env.sh >/dev/null
: "${OUT:=out/comm_engine}"
R=${RESULTS:-/tmp/comm_engine}
mkdir -p "$OUT" "$R"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
NP=${NP:-2}
ENGINES=${ENGINES:-nccl,ce}
M=(mpirun --allow-run-as-root --oversubscribe -np "$NP" -x LD_LIBRARY_PATH -x PATH -x NCCL_NVLS_ENABLE)
trap 'tar -C "$R" -czf "$OUT/results.tgz" . 2>/dev/null' EXIT

XL=(paratrain bench ddp --model xl --precision bf16 --attention flash --warmup 2 --steps 5)
step_tests() {
  "${M[@]}" -x PARATRAIN_TEST_COMM_ENGINE=ce paratrain_tests_dist --gtest_color=no --gtest_filter='*Nccl*:*CopyEngine*' &&
    "${M[@]}" paratrain_tests_dist --gtest_color=no --gtest_filter='*Nccl*' &&
    PARATRAIN_COMM_TIMEOUT_S=3 sh tests/parallel/probe/expect_abort.sh mpirun "$(command -v paratrain_comm_probe)" hang ce \
      "rank 0 of 2: communication failure in ce all_reduce"
}
step_collectives() {
  "${M[@]}" paratrain bench allreduce --comm-engine "$ENGINES" --collectives all_reduce,reduce_scatter,all_gather \
    --sizes 1M,4M,16M,64M,256M,1G --out "$R/allreduce_np$NP.h5" --overwrite
}
step_ddp-bf16() {
  "${M[@]}" "${XL[@]}" --grad-dtype bf16 --ddp none,bucketed --bucket-mb 25 --shard-optimizer none,zero1 \
    --comm-engine "$ENGINES" --out "$R/ddp_bf16_np$NP.h5" --overwrite
}
step_ddp-bf16-sms() {
  "${M[@]}" "${XL[@]}" --grad-dtype bf16 --ddp none,bucketed --bucket-mb 25,100 --comm-engine ce --comm-sms 0,16 \
    --out "$R/ddp_bf16_sms_np$NP.h5" --overwrite
}
step_ddp-fp32() {
  "${M[@]}" "${XL[@]}" --grad-dtype fp32 --ddp none,bucketed --bucket-mb 25 \
    --comm-engine "$ENGINES" --out "$R/ddp_fp32_np$NP.h5" --overwrite
}
step_ddp-accum() {
  "${M[@]}" "${XL[@]}" --grad-dtype bf16 --grad-accum 4 --ddp none,bucketed --bucket-mb 25 --shard-optimizer none,zero1 \
    --comm-engine "$ENGINES" --out "$R/ddp_accum_np$NP.h5" --overwrite
}
step_torch-ddp() {
  "${M[@]}" -x PYTHONUNBUFFERED -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 \
    python3 scripts/compare_torch_ddp.py --model xl --precision bf16 --strategies none,ddp --steps 5 --warmup 2 \
    --out "$R/torch_ddp_np$NP.h5" --overwrite
}
step_split-nodes() {
  PARATRAIN_TEST_SPLIT_NODES=2 "${M[@]}" -x PARATRAIN_TEST_SPLIT_NODES -x PARATRAIN_TEST_COMM_ENGINE=auto \
    paratrain_tests_dist --gtest_color=no --gtest_filter='*SplitNodes*:*Nccl*' &&
    PARATRAIN_TEST_SPLIT_NODES=2 "${M[@]}" -x PARATRAIN_TEST_SPLIT_NODES "${XL[@]}" --grad-dtype bf16 \
      --ddp none,bucketed --bucket-mb 25 --comm-engine auto --out "$R/ddp_split_np$NP.h5" --overwrite
}

for arg in "$@"; do
  name=${arg%%:*}
  secs=300
  [[ $arg == *:* ]] && secs=${arg##*:}
  start=$(date +%s)
  timeout "$secs" bash -c "$(declare -f step_$name); $(declare -p M XL R NP ENGINES); step_$name" >"$R/$name.log" 2>&1
  rc=$?
  line="$name rc=$rc $(($(date +%s) - start))s"
  echo "$line" | tee -a "$OUT/summary.txt"
  grep -E "ms/step|busbw|PASSED|FAILED|passed|error" "$R/$name.log" | tail -40
done
