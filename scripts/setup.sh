#!/usr/bin/env bash
# One command on a fresh machine: install what is missing (Debian/Ubuntu packages, the Python
# environment for the report scripts), build, and train the default model on the sample data
# (on the GPU when there is one, otherwise on the CPU).
#
#   scripts/setup.sh              install + build + train
#   scripts/setup.sh --no-train   install + build only (CI uses this through scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
train=1
for a in "$@"; do
  case "$a" in
    --no-train) train=0 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done

# ---- system packages (apt) -------------------------------------------------------------------
packages=(cmake ninja-build g++ openmpi-bin libopenmpi-dev libhdf5-dev hdf5-tools
          libboost-program-options-dev libopenblas-dev libgtest-dev python3-venv
          libssl-dev nlohmann-json3-dev  # SHA-256 of token shards; JSON: manifests, the Hugging Face export
          clang-format      # the format check (scripts/check_format.sh, ctest test `format`)
          clang-tidy        # the C++ lint, the same version (scripts/check_tidy.sh, ctest test `clang-tidy`)
          slurm-wlm munge)  # slurm-wlm, munge: the local-Slurm test of the sweep scripts
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "setup: the CUDA toolkit (nvcc) is required to build; install CUDA 12.8+ or 13 under /usr/local/cuda" >&2
  exit 1
}
export PATH="/usr/local/cuda/bin:$PATH"

# ---- Python environment for scripts/ (pinned versions; ruff, the Python lint, among them) -----
scripts/setup_python.sh

# ---- build ----------------------------------------------------------------------------------
cmake --preset release >/dev/null
cmake --build build -j "$(nproc)"

# ---- the main job ---------------------------------------------------------------------------
if ((train)); then
  mkdir -p out
  echo "setup: training the default model on data/sample_tokens.npy"
  build/paratrain train --out out/train-default.h5 --overwrite
fi
