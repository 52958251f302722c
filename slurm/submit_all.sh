#!/bin/bash
# Submits the benchmark sweeps and, depending on all of them (afterok), the report job.
# Prints one line per job: "<name> <job id>", and writes the same to $PT_OUT/jobs.txt.
#
#   slurm/submit_all.sh [--cpu] [--out DIR] [--bin PATH] [--only LIST] [--partition P]
#                       [--account A] [--time T] [--dry-run]
#
#   --cpu          tiny CPU configurations (PT_MODE=cpu): the CI test, or a laptop
#   --out DIR      results directory (PT_OUT; default <repo>/results; from an installed tree
#                  ./results)
#   --bin PATH     paratrain binary (PT_BIN; default <repo>/build/paratrain; from an installed
#                  tree <prefix>/bin/paratrain)
#   --only LIST    comma list of model,attention,allreduce,ddp,train (default: all)
#   --partition P, --account A, --time T   passed to every sbatch
#   --dry-run      print the sbatch commands (on stderr) instead of submitting
# Every other setting is an environment variable read by slurm/common.sh (sizes, contexts,
# precisions, rank counts, flags per benchmark, resources per task). Multi-rank jobs (allreduce,
# ddp, train) get --nodes=M --ntasks-per-node=R for their N ranks: one node while N fits
# PT_GPUS_PER_NODE (default 8), else N/8 nodes of 8 (N must be a multiple), or PT_NODES nodes;
# GPUs per PT_GPU_BIND (per-node: --gpus-per-node=R, per-task: --gpus-per-task=1); srun --mpi
# from PT_SRUN_MPI (default pmix). A layout that does not fit is refused before anything is
# submitted (one line, exit 2).
set -euo pipefail

PT_REPO=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)  # the repository or <prefix>/share/paratrain
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
    -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "submit_all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
PT_MSG=submit_all.sh  # what common.sh's messages start with
# shellcheck source=slurm/common.sh disable=SC2034  # PT_MSG is read by common.sh
source "$PT_REPO/slurm/common.sh"
pt_check_settings || exit 2
for kind in ${only//,/ }; do
  case "$kind" in model|attention|allreduce|ddp|train) ;; *)
    echo "submit_all.sh: --only: unknown benchmark '$kind'" >&2; exit 2 ;;
  esac
done

# Seconds of a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS); empty when
# unlimited or not understood (sbatch judges it then).
time_seconds() {
  local t=$1 d=0 h=0 m=0 sec=0
  if [[ $t =~ ^([0-9]+)-([0-9]+)(:([0-9]+))?(:([0-9]+))?$ ]]; then
    d=${BASH_REMATCH[1]} h=${BASH_REMATCH[2]} m=${BASH_REMATCH[4]:-0} sec=${BASH_REMATCH[6]:-0}
  elif [[ $t =~ ^([0-9]+)$ ]]; then m=$t
  elif [[ $t =~ ^([0-9]+):([0-9]+)$ ]]; then m=${BASH_REMATCH[1]} sec=${BASH_REMATCH[2]}
  elif [[ $t =~ ^([0-9]+):([0-9]+):([0-9]+)$ ]]; then h=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]} sec=${BASH_REMATCH[3]}
  else return 0
  fi
  echo $(( ((10#$d * 24 + 10#$h) * 60 + 10#$m) * 60 + 10#$sec ))
}

# Every job's layout first: one that does not fit refuses the whole submission (its line, exit 2).
declare -A layout
for kind in ${only//,/ }; do
  case "$kind" in
    model|attention)  # one rank, one GPU per array task: PT_NODES is for the multi-rank jobs
      PT_NODES="" pt_layout "$kind" 1 || exit 2
      layout[$kind]="${PT_LAYOUT[*]}" ;;
    allreduce)
      for n in $PT_ALLREDUCE_RANKS; do
        pt_layout "allreduce (PT_ALLREDUCE_RANKS)" "$n" || exit 2
        layout[allreduce_n$n]="${PT_LAYOUT[*]}"
      done ;;
    ddp) pt_layout "ddp (PT_DDP_RANKS)" "$PT_DDP_RANKS" || exit 2; layout[ddp]="${PT_LAYOUT[*]}" ;;
    train)
      pt_layout "train (PT_TRAIN_RANKS)" "$PT_TRAIN_RANKS" || exit 2
      layout[train]="${PT_LAYOUT[*]}"
      limit=$(time_seconds "$PT_TIME")
      if [[ -n "$limit" ]] && (( PT_SIGNAL_LEAD >= limit )); then
        echo "submit_all.sh: train: PT_SIGNAL_LEAD=$PT_SIGNAL_LEAD s is not shorter than the time limit $PT_TIME (--time)" >&2
        exit 2
      fi ;;
  esac
done

PT_OUT=$(mkdir -p "$PT_OUT" && cd "$PT_OUT" && pwd)  # absolute: jobs may start elsewhere
export PT_OUT PT_BIN PT_MODE PT_TIME
mkdir -p "$PT_OUT/logs"
[[ -x "$PT_BIN" ]] || { echo "submit_all.sh: paratrain binary not found at $PT_BIN (--bin)" >&2; exit 2; }

common=(--parsable --export=ALL --time="$PT_TIME" --chdir="$PT_OUT")
[[ -n "$partition" ]] && common+=(--partition="$partition")
[[ -n "$account" ]] && common+=(--account="$account")
# shellcheck disable=SC2206  # resource flags split on purpose
task=($PT_TASK_RESOURCES)

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

# shellcheck disable=SC2086  # the layouts are option lists
for kind in ${only//,/ }; do
  case "$kind" in
    model)
      submit model --array="0-$(( PT_MODEL_TASKS - 1 ))" ${layout[model]} "${task[@]}" "$PT_REPO/slurm/model.sbatch" ;;
    attention)
      submit attention --array="0-$(( ${#PT_ATTN_STUDY_LIST[@]} - 1 ))" ${layout[attention]} "${task[@]}" \
        "$PT_REPO/slurm/attention.sbatch" ;;
    allreduce)
      for n in $PT_ALLREDUCE_RANKS; do
        submit "allreduce_n$n" ${layout[allreduce_n$n]} "${task[@]}" "$PT_REPO/slurm/allreduce.sbatch"
      done ;;
    ddp)
      submit "ddp_n$PT_DDP_RANKS" ${layout[ddp]} "${task[@]}" "$PT_REPO/slurm/ddp.sbatch" ;;
    train)
      # SIGUSR1 to the batch shell PT_SIGNAL_LEAD s before the time limit: the run checkpoints and
      # the job requeues itself (train.sbatch); --requeue and --open-mode=append are in the script.
      submit "train_n$PT_TRAIN_RANKS" ${layout[train]} "${task[@]}" --signal="B:USR1@$PT_SIGNAL_LEAD" \
        "$PT_REPO/slurm/train.sbatch" ;;
  esac
done

deps=$(IFS=:; echo "${ids[*]}")
submit report --ntasks=1 --cpus-per-task=1 --dependency="afterok:$deps" --kill-on-invalid-dep=yes \
  "$PT_REPO/slurm/report.sbatch"
