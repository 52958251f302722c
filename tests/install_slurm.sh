# shellcheck shell=bash disable=SC2154  # src, p, work, py and fail are install_test.sh's
# Sourced by tests/install_test.sh BUILD_DIR slurm, with the moved installed tree at $p: its Slurm
# scripts submit to a real local Slurm (scripts/slurm_local.sh) from a directory outside the
# repository, with only the tree's bin/ on PATH and no PT_* setting, and the jobs run the
# installed program and write their outputs:
#   1. share/paratrain/slurm/submit_all.sh --cpu: train and the report job that waits for it;
#   2. share/paratrain/slurm/train.sbatch given to sbatch by hand;
#   3. a GPU-mode job on this node without a GPU fails at once with paratrain's one error line
#      (--device cuda), instead of training on the CPU.
slurm_local=$src/scripts/slurm_local.sh
"$slurm_local" check || exit 77  # it said what is missing; ctest counts 77 as skipped

# What the caller's shell sets must not decide where the scripts look, nor what they submit.
while read -r v; do
  case "$v" in PT_*|SLURM_*|CUDA_VISIBLE_DEVICES) unset "$v" ;; esac
done < <(compgen -e)
export PATH="$p/bin:$PATH:/usr/sbin"
[ -n "$py" ] && export PT_PYTHON=$py  # the report job's Python (python3 on PATH may lack h5py)

sdir=$work/slurm
trap '"$slurm_local" stop "$sdir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
started=$("$slurm_local" start "$sdir") || fail "the local Slurm did not start"
SLURM_CONF=$(sed -n 's/^export SLURM_CONF=//p' <<<"$started")
export SLURM_CONF

state() { scontrol show job -o "$1" 2>/dev/null | sed -n 's/.* JobState=\([A-Z_]*\).*/\1/p' | head -n 1; }
wait_job() {  # job id → its final state (WAIT-TIMEOUT after 3 minutes)
  local s=""
  for _ in $(seq 900); do
    s=$(state "$1")
    case "$s" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE)
      echo "$s"; return 0 ;;
    esac
    sleep 0.2
  done
  echo WAIT-TIMEOUT
}
show_logs() { tail -n 30 "$@" "$sdir"/log/slurmd.log 2>/dev/null || true; }
ran_installed() {  # record, log: the job ran $p/bin/paratrain (its command line and srun's line)
  grep -aq "$p/bin/paratrain train" "$1" || fail "$1 was not written by $p/bin/paratrain"
  grep -q "^+ srun .* $p/bin/paratrain train" "$2" || fail "$2 shows no srun of $p/bin/paratrain"
}
checkpointed() {  # results directory: train.sbatch's --save-dir has `latest` naming a step checkpoint there
  local d=$1/checkpoints/train_n1 name
  name=$(head -n 1 "$d/latest" 2>/dev/null) || return 1
  [[ $name =~ ^step_[0-9]{6,}\.h5$ && -s $d/$name ]]
}

# 1. submit_all.sh with its defaults: the installed binary, results/ under the submit directory.
mkdir -p "$work/sub" && cd "$work/sub" || exit 1
"$p/share/paratrain/slurm/submit_all.sh" --cpu --only train --time 00:10:00 >jobs.txt 2>submit.log ||
  { cat submit.log; fail "the installed submit_all.sh failed"; }
train=$(awk '$1 == "train_n1" {print $2}' jobs.txt) report=$(awk '$1 == "report" {print $2}' jobs.txt)
[ -n "$train" ] || fail "submit_all.sh printed no train job: $(cat jobs.txt)"
[ -n "$report" ] || fail "submit_all.sh printed no report job: $(cat jobs.txt)"
s=$(wait_job "$train")
[ "$s" = COMPLETED ] || { show_logs results/logs/*; fail "the train job from the installed tree ended $s"; }
ran_installed results/train_n1.h5 "results/logs/pt-train-$train.out"
checkpointed results || fail "the train job left no step checkpoint named by results/checkpoints/train_n1/latest"
if [ -n "$py" ]; then
  s=$(wait_job "$report")
  [ "$s" = COMPLETED ] || { show_logs results/logs/*; fail "the report job from the installed tree ended $s"; }
  [ -s results/report/report.md ] || fail "the report job wrote no results/report/report.md"
fi

# 2. A template by hand: it finds its common.sh and the program through the paratrain on PATH.
mkdir -p "$work/hand" && cd "$work/hand" || exit 1
job=$(PT_MODE=cpu sbatch --parsable --time=00:10:00 --output=train-%j.out "$p/share/paratrain/slurm/train.sbatch") ||
  fail "sbatch of the installed train.sbatch failed"
s=$(wait_job "$job")
[ "$s" = COMPLETED ] || { show_logs train-*.out; fail "the hand-submitted installed train.sbatch ended $s"; }
ran_installed results/train_n1.h5 "train-$job.out"
checkpointed results || fail "the hand-submitted job left no step checkpoint named by results/checkpoints/train_n1/latest"

# 3. GPU mode on a node without a GPU (Slurm has no GPUs to give here, so no GPU options).
mkdir -p "$work/gpu" && cd "$work/gpu" || exit 1
PT_GPU_BIND=none PT_TASK_RESOURCES=--cpus-per-task=1 CUDA_VISIBLE_DEVICES="" \
  "$p/share/paratrain/slurm/submit_all.sh" --only train --time 00:10:00 --out results >jobs.txt 2>submit.log ||
  { cat submit.log; fail "the installed submit_all.sh failed in GPU mode"; }
train=$(awk '$1 == "train_n1" {print $2}' jobs.txt)
s=$(wait_job "$train")
log=results/logs/pt-train-$train.out
[ "$s" = FAILED ] || { show_logs "$log"; fail "a GPU job on a node without a GPU ended $s, not FAILED"; }
if [ "$(grep -c '^paratrain: error:' "$log")" != 1 ] || ! grep -q "^paratrain: error: --device cuda: no CUDA device" "$log"; then
  show_logs "$log"
  fail "the failed GPU job's log lacks paratrain's one --device cuda error line"
fi
! grep -q "^step " "$log" || fail "the GPU job trained on the CPU"
echo "install_test: the moved tree's Slurm scripts submit, run $p/bin/paratrain and write their results"
