#!/bin/bash
# Submits the benchmark sweeps and, depending on all of them (afterok), the report job.
# Prints one line per job: "<name> <job id>", and writes the same to $PT_OUT/jobs.txt.
#
#   slurm/submit_all.sh [--cpu] [--out DIR] [--bin PATH] [--only LIST] [--partition P]
#                       [--account A] [--time T] [--dry-run]
#
#   --cpu          tiny CPU configurations (PT_MODE=cpu): the CI test, or a laptop
#   --out DIR      results directory (PT_OUT; default <repo>/results)
#   --bin PATH     paratrain binary (PT_BIN; default <repo>/build/paratrain)
#   --only LIST    comma list of model,attention,allreduce,ddp,train (default: all)
#   --partition P, --account A, --time T   passed to every sbatch
#   --dry-run      print the sbatch commands instead of submitting
# Every other setting is an environment variable read by slurm/common.sh (sizes, contexts,
# precisions, rank counts, flags per benchmark, resources per task).
set -euo pipefail

PT_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PT_REPO
only="model,attention,allreduce,ddp,train"
partition="" account="" dry_run=0
while (( $# )); do
  case "$1" in
    --cpu) export PT_MODE=cpu ;;
    --out) export PT_OUT=$2; shift ;;
    --bin) export PT_BIN=$2; shift ;;
    --only) only=$2; shift ;;
    --partition) partition=$2; shift ;;
    --account) account=$2; shift ;;
    --time) export PT_TIME=$2; shift ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "submit_all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=common.sh
source "$PT_REPO/slurm/common.sh"
PT_OUT=$(mkdir -p "$PT_OUT" && cd "$PT_OUT" && pwd)  # absolute: jobs may start elsewhere
export PT_OUT PT_BIN PT_MODE PT_TIME
mkdir -p "$PT_OUT/logs"
[[ -x "$PT_BIN" ]] || { echo "submit_all.sh: paratrain binary not found at $PT_BIN (--bin)" >&2; exit 2; }
for kind in ${only//,/ }; do
  case "$kind" in model|attention|allreduce|ddp|train) ;; *)
    echo "submit_all.sh: --only: unknown benchmark '$kind'" >&2; exit 2 ;;
  esac
done

common=(--parsable --export=ALL --time="$PT_TIME" --chdir="$PT_OUT")
[[ -n "$partition" ]] && common+=(--partition="$partition")
[[ -n "$account" ]] && common+=(--account="$account")
# shellcheck disable=SC2206  # resource flags split on purpose
task=($PT_TASK_RESOURCES)
[[ "$PT_MODE" == cpu ]] && task+=(--overcommit)  # more ranks than cores on a small CI node

ids=()
: >"$PT_OUT/jobs.txt"
submit() {  # name, sbatch arguments...
  local name=$1 id log="$PT_OUT/logs/%x-%j.out"
  shift
  [[ " $* " == *" --array="* ]] && log="$PT_OUT/logs/%x-%A_%a.out"
  if (( dry_run )); then
    echo "sbatch ${common[*]} --output=$log $*" >&2
    id="dry$(( ${#ids[@]} + 1 ))"
  else
    id=$(sbatch "${common[@]}" --output="$log" "$@")
    id=${id%%;*}  # "id;cluster" on federated setups
  fi
  ids+=("$id")
  echo "$name $id" | tee -a "$PT_OUT/jobs.txt"
}

for kind in ${only//,/ }; do
  case "$kind" in
    model)
      submit model --array="0-$(( PT_MODEL_TASKS - 1 ))" --ntasks=1 "${task[@]}" "$PT_REPO/slurm/model.sbatch" ;;
    attention)
      submit attention --array="0-$(( ${#PT_ATTN_STUDY_LIST[@]} - 1 ))" --ntasks=1 "${task[@]}" \
        "$PT_REPO/slurm/attention.sbatch" ;;
    allreduce)
      for n in $PT_ALLREDUCE_RANKS; do
        submit "allreduce_n$n" --ntasks="$n" --nodes=1 "${task[@]}" "$PT_REPO/slurm/allreduce.sbatch"
      done ;;
    ddp)
      submit "ddp_n$PT_DDP_RANKS" --ntasks="$PT_DDP_RANKS" --nodes=1 "${task[@]}" "$PT_REPO/slurm/ddp.sbatch" ;;
    train)
      submit "train_n$PT_TRAIN_RANKS" --ntasks="$PT_TRAIN_RANKS" --nodes=1 "${task[@]}" "$PT_REPO/slurm/train.sbatch" ;;
  esac
done

deps=$(IFS=:; echo "${ids[*]}")
submit report --ntasks=1 --cpus-per-task=1 --dependency="afterok:$deps" --kill-on-invalid-dep=yes \
  "$PT_REPO/slurm/report.sbatch"
