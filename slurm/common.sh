# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by the scripts that source it
# Settings and helpers shared by the sbatch scripts and submit_all.sh (sourced, not run).
#
# Every setting is an environment variable with a default for a GPU cluster; PT_MODE=cpu
# switches the defaults to tiny CPU configurations (the CI test). sbatch passes the submitting
# shell's environment to the job, so `PT_SIZES="small xl" slurm/submit_all.sh` is enough.
#
#   PT_REPO       the directory above slurm/: the repository root, or <prefix>/share/paratrain of
#                 an installed tree (default: the directory above this file)
#   PT_BIN        paratrain binary (default $PT_REPO/build/paratrain; installed: <prefix>/bin/paratrain)
#   PT_OUT        results directory: one HDF5 file per job, logs/, checkpoints/, report/
#                 (default $PT_REPO/results; installed: results/ in the submit directory)
#   PT_PYTHON     Python with h5py/pandas/matplotlib for the report (default .venv, else python3)
#   PT_MODE       gpu | cpu
#   PT_DEVICE_FLAGS  paratrain's device option in every job (default --device cuda: a node without
#                 a usable GPU fails the job at once; cpu mode --device cpu)
#   PT_OVERWRITE  1: replace result files that exist (paratrain --overwrite); train starts over
#                 instead of resuming, removing its old step checkpoints and `latest` first
#   PT_SIZES PT_CONTEXTS PT_PRECISIONS   the model sweep (job array over their product)
#   PT_ATTENTION PT_WARMUPS PT_STEPS PT_MODEL_FLAGS
#   PT_ATTN_STUDIES PT_ATTN_FLAGS        bench attention: one array task per study
#   PT_ALLREDUCE_RANKS PT_ALLREDUCE_FLAGS  bench allreduce: one job per rank count
#   PT_DDP_RANKS PT_DDP_PRECISIONS PT_DDP_FLAGS   bench ddp
#   PT_TRAIN_RANKS PT_TRAIN_FLAGS        paratrain train
#   PT_SAVE_EVERY     train: checkpoint every N steps besides the one at a stop (default 500; cpu 50)
#   PT_KEEP_LAST      train: the newest K step checkpoints the run keeps, older ones removed
#                     (paratrain --keep-last; default 3; 0 keeps every one)
#   PT_SIGNAL_LEAD    train: seconds before the time limit at which Slurm sends SIGUSR1 to the
#                     batch shell (--signal=B:USR1@N; default 120; cpu 10)
# Where the ranks go (allreduce, ddp, train; model and attention are one-rank array jobs):
#   PT_GPUS_PER_NODE  GPUs of a node (default 8): one rank per GPU, so at most this many ranks a node
#   PT_NODES          nodes of every multi-rank job (default: 1 node for N <= PT_GPUS_PER_NODE
#                     ranks, else N / PT_GPUS_PER_NODE nodes; N must then be a multiple of it)
#   PT_GPU_BIND       per-node (default): --gpus-per-node=R, every rank sees the R GPUs of its node
#                     and drives its local rank's; per-task: --gpus-per-task=1, each rank sees only
#                     its own; none: no GPU option (put the site's own in PT_TASK_RESOURCES)
#   PT_SRUN_MPI       srun --mpi= plugin (default pmix; pmi2, pmix_v4, ... per site; empty: the
#                     site's MpiDefault)
#   PT_TASK_RESOURCES other sbatch options of each benchmark job (default --cpus-per-task=8; cpu
#                     --cpus-per-task=1; CPU mode adds --overcommit)
#   PT_TIME           --time of every job (default 02:00:00; cpu 00:10:00)

if [[ -z "${PT_REPO:-}" ]]; then
  if [[ -n "${BASH_SOURCE[0]:-}" && -f "$(dirname "${BASH_SOURCE[0]}")/../slurm/common.sh" ]]; then
    PT_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  else
    PT_REPO=${SLURM_SUBMIT_DIR:-$PWD}
  fi
fi
PT_MODE=${PT_MODE:-gpu}
if [[ -f "$PT_REPO/CMakeLists.txt" ]]; then  # the repository: its build, results/ beside it
  PT_BIN=${PT_BIN:-$PT_REPO/build/paratrain}
  PT_OUT=${PT_OUT:-$PT_REPO/results}
else  # an installed tree, <prefix>/share/paratrain (often read-only): results where submitted
  PT_BIN=${PT_BIN:-$(cd "$PT_REPO/../.." && pwd)/bin/paratrain}
  PT_OUT=${PT_OUT:-${SLURM_SUBMIT_DIR:-$PWD}/results}
fi
if [[ -z "${PT_PYTHON:-}" ]]; then
  if [[ -x "$PT_REPO/.venv/bin/python" ]]; then PT_PYTHON=$PT_REPO/.venv/bin/python; else PT_PYTHON=python3; fi
fi
PT_OVERWRITE=${PT_OVERWRITE:-0}
PT_KEEP_LAST=${PT_KEEP_LAST:-3}

case "$PT_MODE" in
  gpu)
    # --device cuda, never auto: a job on a node without a usable GPU stops at once with one line
    # instead of spending its time limit on the CPU
    PT_DEVICE_FLAGS=${PT_DEVICE_FLAGS:---device cuda}
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
    PT_SAVE_EVERY=${PT_SAVE_EVERY:-500}
    PT_SIGNAL_LEAD=${PT_SIGNAL_LEAD:-120}
    # sbatch options of each benchmark job besides nodes, tasks and GPUs (one rank per GPU)
    PT_TASK_RESOURCES=${PT_TASK_RESOURCES:---cpus-per-task=8}
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
    PT_ATTN_FLAGS=${PT_ATTN_FLAGS:---batch-size 1 --num-heads 1 --context-length 32,64 --head-dim 16 --precision fp32 --warmup 1 --steps 2}
    PT_ALLREDUCE_RANKS=${PT_ALLREDUCE_RANKS:-2}
    PT_ALLREDUCE_FLAGS=${PT_ALLREDUCE_FLAGS:---backend mpi --bytes 64K,1M --steps 3 --warmup 1}
    PT_DDP_RANKS=${PT_DDP_RANKS:-2}
    PT_DDP_PRECISIONS=${PT_DDP_PRECISIONS:-fp32}
    PT_DDP_FLAGS=${PT_DDP_FLAGS:---model tiny --context-length 32 --batch-size 2 --ddp none,flat,bucketed --bucket-mb 0,1 --shard-optimizer zero1 --steps 2 --warmup 1}
    PT_TRAIN_RANKS=${PT_TRAIN_RANKS:-1}
    PT_TRAIN_FLAGS=${PT_TRAIN_FLAGS:---model tiny --context-length 32 --batch-size 2 --steps 5}
    PT_SAVE_EVERY=${PT_SAVE_EVERY:-50}
    PT_SIGNAL_LEAD=${PT_SIGNAL_LEAD:-10}
    PT_TASK_RESOURCES=${PT_TASK_RESOURCES:---cpus-per-task=1}
    PT_TIME=${PT_TIME:-00:10:00}
    export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
    ;;
  *)
    echo "slurm: PT_MODE must be gpu or cpu (got '$PT_MODE')" >&2
    # shellcheck disable=SC2317  # exit: when run rather than sourced
    return 2 2>/dev/null || exit 2
    ;;
esac
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # NVLink multicast stays off on these machines
PT_GPUS_PER_NODE=${PT_GPUS_PER_NODE:-8}
PT_NODES=${PT_NODES:-}
PT_GPU_BIND=${PT_GPU_BIND:-per-node}
PT_SRUN_MPI=${PT_SRUN_MPI-pmix}  # set but empty: no --mpi, the site's MpiDefault
PT_MSG=${PT_MSG:-slurm}  # what messages start with

# The model sweep's job array: task i → (size, context, precision), sizes outermost.
read -r -a PT_SIZE_LIST <<<"$PT_SIZES"
read -r -a PT_CONTEXT_LIST <<<"$PT_CONTEXTS"
read -r -a PT_PRECISION_LIST <<<"$PT_PRECISIONS"
read -r -a PT_ATTN_STUDY_LIST <<<"$PT_ATTN_STUDIES"
PT_MODEL_TASKS=$(( ${#PT_SIZE_LIST[@]} * ${#PT_CONTEXT_LIST[@]} * ${#PT_PRECISION_LIST[@]} ))

PT_OVERWRITE_ARGS=()  # "${PT_OVERWRITE_ARGS[@]}" on paratrain's command line
if [[ "$PT_OVERWRITE" == 1 ]]; then PT_OVERWRITE_ARGS=(--overwrite); fi

# Checks the settings that shape jobs; prints one line naming the bad one and returns 2.
pt_check_settings() {
  local v
  [[ "$PT_GPUS_PER_NODE" =~ ^[1-9][0-9]*$ ]] ||
    { echo "$PT_MSG: PT_GPUS_PER_NODE must be a positive whole number (got '$PT_GPUS_PER_NODE')" >&2; return 2; }
  [[ -z "$PT_NODES" || "$PT_NODES" =~ ^[1-9][0-9]*$ ]] ||
    { echo "$PT_MSG: PT_NODES must be a positive whole number or unset (got '$PT_NODES')" >&2; return 2; }
  case "$PT_GPU_BIND" in per-node|per-task|none) ;; *)
    echo "$PT_MSG: PT_GPU_BIND must be per-node, per-task or none (got '$PT_GPU_BIND')" >&2; return 2 ;;
  esac
  [[ -z "$PT_SRUN_MPI" || "$PT_SRUN_MPI" =~ ^[A-Za-z0-9_]+$ ]] ||
    { echo "$PT_MSG: PT_SRUN_MPI must be an srun --mpi plugin name such as pmix, pmi2 or pmix_v4 (got '$PT_SRUN_MPI')" >&2; return 2; }
  if [[ ! "$PT_SIGNAL_LEAD" =~ ^[1-9][0-9]{0,4}$ ]] || (( PT_SIGNAL_LEAD > 65535 )); then
    echo "$PT_MSG: PT_SIGNAL_LEAD must be seconds from 1 to 65535 (got '$PT_SIGNAL_LEAD')" >&2
    return 2
  fi
  [[ "$PT_SAVE_EVERY" =~ ^[0-9]+$ ]] ||
    { echo "$PT_MSG: PT_SAVE_EVERY must be a whole number of steps, 0 for none (got '$PT_SAVE_EVERY')" >&2; return 2; }
  [[ "$PT_KEEP_LAST" =~ ^[0-9]+$ ]] ||
    { echo "$PT_MSG: PT_KEEP_LAST must be a whole number of checkpoints, 0 for all (got '$PT_KEEP_LAST')" >&2; return 2; }
  if [[ "$PT_MODE" == gpu && "$PT_GPU_BIND" != none ]]; then
    for v in $PT_TASK_RESOURCES; do
      case "$v" in --gpus*|--gres=gpu*|--gres=*,gpu*|-G*|--gpu-bind*)
        echo "$PT_MSG: PT_TASK_RESOURCES has '$v' but the GPU options come from PT_GPU_BIND=$PT_GPU_BIND (set PT_GPU_BIND=none to keep yours)" >&2
        return 2 ;;
      esac
    done
  fi
  return 0
}

# The sbatch options placing N ranks, one per GPU (GPU mode) or CPU task (CPU mode), into the
# array PT_LAYOUT: --nodes=M --ntasks-per-node=R and the GPU options of PT_GPU_BIND. M is
# PT_NODES, else 1 while N fits one node of PT_GPUS_PER_NODE, else N / PT_GPUS_PER_NODE. CPU mode
# puts the ranks on one node unless PT_NODES says otherwise (with --overcommit: the CI node has
# 2 CPUs). A layout that does not fit prints one line naming the job and the settings, returns 2.
pt_layout() {  # what (for messages: the job and its setting), N
  local what=$1 n=$2 nodes per_node g=$PT_GPUS_PER_NODE
  PT_LAYOUT=()
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "$PT_MSG: $what: the rank count must be a positive whole number (got '$n')" >&2; return 2; }
  if [[ -n "$PT_NODES" ]]; then
    nodes=$PT_NODES
    if (( n % nodes != 0 )); then
      echo "$PT_MSG: $what: $n ranks do not split evenly over $nodes nodes (PT_NODES)" >&2
      return 2
    fi
    per_node=$(( n / nodes ))
    if [[ "$PT_MODE" == gpu ]] && (( per_node > g )); then
      echo "$PT_MSG: $what: $n ranks over $nodes node(s) (PT_NODES) is $per_node a node, more than its $g GPUs (PT_GPUS_PER_NODE)" >&2
      return 2
    fi
  elif [[ "$PT_MODE" == cpu ]] || (( n <= g )); then
    nodes=1 per_node=$n
  elif (( n % g != 0 )); then
    echo "$PT_MSG: $what: $n ranks span several nodes of $g GPUs (PT_GPUS_PER_NODE) but are not a multiple of $g:" \
         "use $(( n / g * g )) or $(( (n / g + 1) * g )), or set PT_NODES to spread them evenly" >&2
    return 2
  else
    nodes=$(( n / g )) per_node=$g
  fi
  PT_LAYOUT=(--nodes="$nodes" --ntasks-per-node="$per_node")
  if [[ "$PT_MODE" == cpu ]]; then
    PT_LAYOUT+=(--overcommit)  # tasks share the CI node's 2 CPUs, jobs run side by side
  else
    case "$PT_GPU_BIND" in
      per-node) PT_LAYOUT+=(--gpus-per-node="$per_node") ;;
      per-task) PT_LAYOUT+=(--gpus-per-task=1) ;;
    esac
  fi
  return 0
}

# Prints a command, then runs it; the job fails with it.
pt_run() {
  echo "+ $*" >&2
  "$@"
}

# srun with one rank per task of the allocation, as an array (PT_SRUN) for scripts that run it in
# the background: --mpi from PT_SRUN_MPI (PMIx: the way Debian's and most clusters' Open MPI
# bootstrap under Slurm), and the job's --cpus-per-task again (since Slurm 22.05 srun no longer
# inherits it from sbatch). The GPU options (--gpus-per-node / --gpus-per-task) are inherited.
PT_SRUN=(srun)
[[ -n "$PT_SRUN_MPI" ]] && PT_SRUN+=(--mpi="$PT_SRUN_MPI")
PT_SRUN+=(--ntasks="${SLURM_NTASKS:-1}")
[[ -n "${SLURM_CPUS_PER_TASK:-}" ]] && PT_SRUN+=(--cpus-per-task="$SLURM_CPUS_PER_TASK")

pt_srun() {
  pt_run "${PT_SRUN[@]}" "$@"
}

pt_check_setup() {
  [[ -x "$PT_BIN" ]] || { echo "slurm: paratrain binary not found at PT_BIN=$PT_BIN" >&2; exit 2; }
  mkdir -p "$PT_OUT"
}
