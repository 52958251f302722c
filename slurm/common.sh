# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by the scripts that source it
# Settings and helpers shared by the sbatch scripts and submit_all.sh (sourced, not run).
#
# Every setting is an environment variable with a default for a GPU cluster; PT_MODE=cpu
# switches the defaults to tiny CPU configurations (the CI test). sbatch passes the submitting
# shell's environment to the job, so `PT_SIZES="small xl" slurm/submit_all.sh` is enough.
#
#   PT_REPO       repository root (default: the directory above this file / the submit dir)
#   PT_BIN        paratrain binary (default $PT_REPO/build/paratrain)
#   PT_OUT        results directory: one HDF5 file per job, logs/, report/ (default $PT_REPO/results)
#   PT_PYTHON     Python with h5py/pandas/matplotlib for the report (default .venv, else python3)
#   PT_MODE       gpu | cpu
#   PT_OVERWRITE  1: replace result files that exist (paratrain --overwrite)
#   PT_SIZES PT_CONTEXTS PT_PRECISIONS   the model sweep (job array over their product)
#   PT_ATTENTION PT_WARMUPS PT_STEPS PT_MODEL_FLAGS
#   PT_ATTN_STUDIES PT_ATTN_FLAGS        bench attention: one array task per study
#   PT_ALLREDUCE_RANKS PT_ALLREDUCE_FLAGS  bench allreduce: one job per rank count
#   PT_DDP_RANKS PT_DDP_PRECISIONS PT_DDP_FLAGS   bench ddp
#   PT_TRAIN_RANKS PT_TRAIN_FLAGS        paratrain train

if [[ -z "${PT_REPO:-}" ]]; then
  if [[ -n "${BASH_SOURCE[0]:-}" && -f "$(dirname "${BASH_SOURCE[0]}")/../slurm/common.sh" ]]; then
    PT_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  else
    PT_REPO=${SLURM_SUBMIT_DIR:-$PWD}
  fi
fi
PT_MODE=${PT_MODE:-gpu}
PT_BIN=${PT_BIN:-$PT_REPO/build/paratrain}
PT_OUT=${PT_OUT:-$PT_REPO/results}
if [[ -z "${PT_PYTHON:-}" ]]; then
  if [[ -x "$PT_REPO/.venv/bin/python" ]]; then PT_PYTHON=$PT_REPO/.venv/bin/python; else PT_PYTHON=python3; fi
fi
PT_OVERWRITE=${PT_OVERWRITE:-0}

case "$PT_MODE" in
  gpu)
    PT_DEVICE_FLAGS=${PT_DEVICE_FLAGS:-}
    PT_SIZES=${PT_SIZES:-small medium large xl 2.7b}
    PT_CONTEXTS=${PT_CONTEXTS:-128 256 512 1024}
    PT_PRECISIONS=${PT_PRECISIONS:-fp32 bf16}
    PT_ATTENTION=${PT_ATTENTION:-naive,flash}
    PT_WARMUPS=${PT_WARMUPS:-0,1,2,5}
    PT_STEPS=${PT_STEPS:-10}
    PT_MODEL_FLAGS=${PT_MODEL_FLAGS:---breakdown --memory-profile}
    PT_ATTN_STUDIES=${PT_ATTN_STUDIES:-naive flash leaderboard}
    PT_ATTN_FLAGS=${PT_ATTN_FLAGS:-}
    PT_ALLREDUCE_RANKS=${PT_ALLREDUCE_RANKS:-2 4}
    PT_ALLREDUCE_FLAGS=${PT_ALLREDUCE_FLAGS:-}
    PT_DDP_RANKS=${PT_DDP_RANKS:-2}
    PT_DDP_PRECISIONS=${PT_DDP_PRECISIONS:-fp32 bf16}
    PT_DDP_FLAGS=${PT_DDP_FLAGS:---model xl --ddp none,naive,flat,overlap,bucketed --bucket-mb 0,1,10,25,100,1000 --shard-optimizer broadcast,zero1}
    PT_TRAIN_RANKS=${PT_TRAIN_RANKS:-1}
    PT_TRAIN_FLAGS=${PT_TRAIN_FLAGS:---model small --precision bf16 --steps 2000}
    # sbatch options per task (one rank per GPU) and per job
    PT_TASK_RESOURCES=${PT_TASK_RESOURCES:---gpus-per-task=1 --cpus-per-task=8}
    PT_TIME=${PT_TIME:-02:00:00}
    ;;
  cpu)
    PT_DEVICE_FLAGS=${PT_DEVICE_FLAGS:---device cpu}
    PT_SIZES=${PT_SIZES:-tiny}
    PT_CONTEXTS=${PT_CONTEXTS:-32 64}
    PT_PRECISIONS=${PT_PRECISIONS:-fp32}
    PT_ATTENTION=${PT_ATTENTION:-naive,flash}
    PT_WARMUPS=${PT_WARMUPS:-0,1}
    PT_STEPS=${PT_STEPS:-2}
    PT_MODEL_FLAGS=${PT_MODEL_FLAGS:---batch-size 2 --breakdown --memory-profile}
    PT_ATTN_STUDIES=${PT_ATTN_STUDIES:-naive flash}
    PT_ATTN_FLAGS=${PT_ATTN_FLAGS:---batch 1 --heads 1 --seq 32,64 --head-dim 16 --dtype fp32 --warmup 1 --iters 2}
    PT_ALLREDUCE_RANKS=${PT_ALLREDUCE_RANKS:-2}
    PT_ALLREDUCE_FLAGS=${PT_ALLREDUCE_FLAGS:---backend mpi --sizes 64K,1M --iters 3 --warmup 1}
    PT_DDP_RANKS=${PT_DDP_RANKS:-2}
    PT_DDP_PRECISIONS=${PT_DDP_PRECISIONS:-fp32}
    PT_DDP_FLAGS=${PT_DDP_FLAGS:---model tiny --context 32 --batch 2 --ddp none,flat,bucketed --bucket-mb 0,1 --shard-optimizer zero1 --steps 2 --warmup 1}
    PT_TRAIN_RANKS=${PT_TRAIN_RANKS:-1}
    PT_TRAIN_FLAGS=${PT_TRAIN_FLAGS:---model tiny --context-length 32 --batch-size 2 --steps 5}
    PT_TASK_RESOURCES=${PT_TASK_RESOURCES:---cpus-per-task=1}
    PT_TIME=${PT_TIME:-00:10:00}
    export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
    ;;
  *)
    echo "slurm: PT_MODE must be gpu or cpu (got '$PT_MODE')" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # NVLink multicast stays off on these machines

# The model sweep's job array: task i → (size, context, precision), sizes outermost.
read -r -a PT_SIZE_LIST <<<"$PT_SIZES"
read -r -a PT_CONTEXT_LIST <<<"$PT_CONTEXTS"
read -r -a PT_PRECISION_LIST <<<"$PT_PRECISIONS"
read -r -a PT_ATTN_STUDY_LIST <<<"$PT_ATTN_STUDIES"
PT_MODEL_TASKS=$(( ${#PT_SIZE_LIST[@]} * ${#PT_CONTEXT_LIST[@]} * ${#PT_PRECISION_LIST[@]} ))

PT_OVERWRITE_ARGS=()  # "${PT_OVERWRITE_ARGS[@]}" on paratrain's command line
if [[ "$PT_OVERWRITE" == 1 ]]; then PT_OVERWRITE_ARGS=(--overwrite); fi

# Prints a command, then runs it; the job fails with it.
pt_run() {
  echo "+ $*" >&2
  "$@"
}

# One rank per task of the allocation (PMIx: the way Debian's and most clusters' Open MPI
# bootstrap under Slurm).
pt_srun() {
  pt_run srun --mpi=pmix --ntasks="${SLURM_NTASKS:-1}" "$@"
}

pt_check_setup() {
  [[ -x "$PT_BIN" ]] || { echo "slurm: paratrain binary not found at PT_BIN=$PT_BIN" >&2; exit 2; }
  mkdir -p "$PT_OUT"
}
