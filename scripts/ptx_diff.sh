#!/usr/bin/env bash
# Compares the PTX of CUDA sources in two trees, so that a refactor of kernels can be checked on a
# machine without a GPU. For each file and architecture it prints one of:
#   identical        the same PTX (once the anonymous-namespace hash of the path is masked);
#   same instructions the same multiset of instructions once registers are renamed: only their
#                    order or register numbers moved (ptxas schedules and allocates anew anyway);
#   DIFFERENT        N instruction lines differ: run the GPU tests, and time it if it is hot.
# No GPU needed; nvcc only. It says nothing of speed or of what ptxas makes of reordered code.
#
#   scripts/ptx_diff.sh [--base REV | --base-tree DIR] [--tree DIR] [--arch LIST] [FILE.cu ...]
#     --base REV       the "before" side: a git revision of this checkout (default HEAD)
#     --base-tree DIR  or a directory holding the same layout (src/, cuda/)
#     --tree DIR       the "after" side (default: this checkout's working tree)
#     --arch LIST      compute capabilities, comma-separated (default 90a,80)
#     FILE.cu          paths relative to the trees (default: every .cu under cuda/ of the after side)
# Exit status: 0 when every file is identical or has the same instructions, 1 when one differs,
# 2 on a usage error or when a side does not compile (its errors are printed).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="/usr/local/cuda/bin:$PATH"

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
base_rev="" base_tree="" tree="$repo" archs="90a,80" files=()
while (($#)); do
  case "$1" in
    --base) base_rev=${2:?--base needs a revision}; shift 2 ;;
    --base-tree) base_tree=${2:?--base-tree needs a directory}; shift 2 ;;
    --tree) tree=${2:?--tree needs a directory}; shift 2 ;;
    --arch) archs=${2:?--arch needs a list}; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "ptx_diff: unknown option $1" >&2; usage ;;
    *) files+=("$1"); shift ;;
  esac
done
if [[ -n $base_rev && -n $base_tree ]]; then
  echo "ptx_diff: --base and --base-tree exclude each other" >&2
  exit 2
fi
command -v nvcc >/dev/null || { echo "ptx_diff: no nvcc on PATH" >&2; exit 2; }
[[ -d $tree/cuda ]] || { echo "ptx_diff: $tree has no cuda/ directory" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ptx_diff.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [[ -z $base_tree ]]; then
  base_tree=$work/base
  mkdir -p "$base_tree"
  if ! git -C "$repo" archive "${base_rev:-HEAD}" cuda src | tar -x -C "$base_tree"; then
    echo "ptx_diff: cannot read cuda/ and src/ at '${base_rev:-HEAD}'" >&2
    exit 2
  fi
fi
[[ -d $base_tree/cuda ]] || { echo "ptx_diff: $base_tree has no cuda/ directory" >&2; exit 2; }
if ((${#files[@]} == 0)); then
  mapfile -t files < <(cd "$tree" && find cuda -name '*.cu' | sort)
fi

# The kernels include "core/…" and "cuda/…" as the build's include roots show them (its
# layers/LAYER directories of links); every folder of src/ is linked too, so an older tree whose
# kernels include a layer above still compiles: one such include root per side.
include_root() {  # TREE DIR
  mkdir -p "$2"
  ln -s "$1/cuda" "$2/cuda"
  local d
  for d in "$1"/src/*/; do [[ -d $d ]] && ln -s "${d%/}" "$2/$(basename "$d")"; done
}
include_root "$base_tree" "$work/inc_base"
include_root "$tree" "$work/inc_tree"
extra=()
if mpi_inc=$(mpicxx --showme:incdirs 2>/dev/null); then
  for d in $mpi_inc; do extra+=("-isystem=$d"); done
fi
[[ -d $repo/build/generated ]] && extra+=("-I$repo/build/generated")

# One nvcc per (side, file, arch), all in parallel; a failure leaves its errors in a .log.
started=()
for side in base tree; do
  src=$([[ $side == base ]] && echo "$base_tree" || echo "$tree")
  for f in "${files[@]}"; do
    [[ -f $src/$f ]] || { echo "ptx_diff: $f is not in the $side side ($src)" >&2; exit 2; }
    for arch in ${archs//,/ }; do
      out="$work/$side/${f//\//_}.$arch"
      mkdir -p "$work/$side"
      nvcc -DNDEBUG -O3 -std=c++17 --expt-relaxed-constexpr "-I$work/inc_$side" "${extra[@]}" \
        "--generate-code=arch=compute_$arch,code=[compute_$arch]" -x cu -ptx "$src/$f" -o "$out.ptx" \
        >"$out.log" 2>&1 &
      started+=("$!:$side:$f:$arch")
      while (($(jobs -rp | wc -l) >= $(nproc))); do sleep 0.2; done
    done
  done
done
failed=0
for j in "${started[@]}"; do
  IFS=: read -r pid side f arch <<<"$j"
  if ! wait "$pid"; then
    echo "ptx_diff: $f (compute_$arch) does not compile on the $side side:" >&2
    grep -m 5 -E "error" "$work/$side/${f//\//_}.$arch.log" >&2
    failed=1
  fi
done
((failed)) && exit 2

# Instruction lines only, registers renamed, branch labels without the function's index (kernels
# instantiated in another order number their blocks $L__BB<function>_<block> differently), sorted:
# equal multisets mean the same instructions.
instructions() { grep -E '^\s+[a-z@]' "$1" | sed -E 's/%[a-z]+[0-9]+/%R/g; s/\$L__BB[0-9]+_/$L__BB_/g' | sort; }
status=0
for f in "${files[@]}"; do
  for arch in ${archs//,/ }; do
    a="$work/base/${f//\//_}.$arch.ptx" b="$work/tree/${f//\//_}.$arch.ptx"
    sed -i -E 's/_GLOBAL__N__[0-9a-f]{8}_/_GLOBAL__N__X_/g' "$a" "$b"
    if cmp -s "$a" "$b"; then
      verdict="identical"
    elif cmp -s <(instructions "$a") <(instructions "$b"); then
      verdict="same instructions"
    else
      verdict="DIFFERENT ($(diff <(instructions "$a") <(instructions "$b") | grep -c '^[<>]') instruction lines)"
      status=1
    fi
    printf '%-34s %-8s %s\n' "$f" "sm_$arch" "$verdict"
  done
done
exit $status
