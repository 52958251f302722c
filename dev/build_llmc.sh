#!/usr/bin/env bash
# llm.c's train_gpt2cu (karpathy/llm.c), built from its source as issue 16's peer for the
# `llmc-xl` step of scripts/gpu_checks.sh: bf16, no cuDNN, no MPI or NCCL, for sm_90.
#
#   dev/build_llmc.sh LLMC_GIT_DIR [COMMIT]      (COMMIT default f1e2ace, the one measured so far)
#
# LLMC_GIT_DIR is a clone (or a bare mirror, e.g. what the `fetch` tool gives for
# github:karpathy/llm.c). The commit is extracted afresh into .peers/llm.c (ignored by git) and
# one local edit is made there before `make train_gpt2cu`:
# - llm.c falls back to cudaMallocManaged (and a cudaMemAdvise that CUDA 13 no longer compiles:
#   it takes a cudaMemLocation now) when cudaMalloc runs out of memory. A managed allocation
#   beyond free memory can hang a shared GPU, so the fallback becomes an error and an exit.
set -euo pipefail
src=${1:?usage: dev/build_llmc.sh LLMC_GIT_DIR [COMMIT]}
commit=${2:-f1e2ace}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/.peers/llm.c

rm -rf "$out"
mkdir -p "$out"
git --git-dir="$(git -C "$src" rev-parse --absolute-git-dir)" archive "$commit" | tar -x -C "$out"

# The managed-memory fallback: its two calls become an error message and an exit.
utils=$out/llmc/cuda_utils.cuh
grep -q 'cudaCheck_(cudaMallocManaged(out, bytes), file, line);' "$utils" ||
  { echo "build_llmc: the managed fallback is not where expected in $utils" >&2; exit 1; }
sed -i \
  -e 's|cudaCheck_(cudaMallocManaged(out, bytes), file, line);|fprintf(stderr, "llm.c (edited): cudaMalloc of %zu bytes failed at %s:%d; no managed fallback\\n", bytes, file, line); exit(EXIT_FAILURE);|' \
  -e '/cudaMemAdvise(\*out, bytes, cudaMemAdviseSetPreferredLocation/d' "$utils"
grep -q 'no managed fallback' "$utils" && ! grep -q 'cudaMemAdvise' "$utils" ||
  { echo "build_llmc: the edit of $utils did not take" >&2; exit 1; }

# llm.c reads clocks and power through NVML only where <nvml.h> is found; without it (CUDA 13's
# toolkit here has none) there is nothing to link, so its -lnvidia-ml goes.
nvml=()
echo '#include <nvml.h>' | nvcc -x cu -E - >/dev/null 2>&1 || nvml=("NVCC_LDFLAGS=-lcublas -lcublasLt")
make -C "$out" -j2 train_gpt2cu USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1 GPU_COMPUTE_CAPABILITY=90 "${nvml[@]}" >&2
echo "$out/train_gpt2cu (llm.c $commit)"
