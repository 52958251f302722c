#!/usr/bin/env bash
# The C++ lint: clang-tidy with the checks of .clang-tidy on every .cpp file under src/ (or the
# files named, which get the same checks) and the src/ headers they include; cuda/ and tests/ are
# left out. Lists what it finds and exits 1. ctest runs it (test `clang-tidy`, labels scripts and
# lint). It reads the compile commands of a configured build (BUILD/compile_commands.json) and
# needs the headers the build generates. clang-tidy 14 (Debian 12's package clang-tidy, which
# scripts/setup.sh installs), or $CLANG_TIDY.
#
#   scripts/check_tidy.sh [--build DIR] [-j N] [FILE…]     (defaults: build, nproc)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build"
jobs="$(nproc)"
files=()
while (($#)); do
  case "$1" in
    --build) build="${2:?check_tidy.sh: --build needs a directory}"; shift 2 ;;
    -j) jobs="${2:?check_tidy.sh: -j needs a number}"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "check_tidy.sh: unknown option '$1'" >&2; exit 2 ;;
    *) [ -f "$1" ] || { echo "check_tidy.sh: $1: no such file" >&2; exit 2; }
       files+=("$(realpath "$1")"); shift ;;
  esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "check_tidy.sh: -j '$jobs' is not a positive number" >&2; exit 2; }

# shellcheck source=scripts/find_tool.sh
source "$root/scripts/find_tool.sh"
tidy=$(find_tool "${CLANG_TIDY:-}" clang-tidy-14 clang-tidy) || {
  echo "check_tidy.sh: clang-tidy not found (scripts/setup.sh installs the Debian package clang-tidy)" >&2
  exit 2
}
build="$(realpath -m "$build")"
if [ ! -f "$build/compile_commands.json" ]; then
  echo "check_tidy.sh: $build/compile_commands.json: no such file (configure the build first: cmake --preset release)" >&2
  exit 2
fi
if ((${#files[@]} == 0)); then
  mapfile -t files < <(grep -o "\"file\": *\"$root/src/[^\"]*\\.cpp\"" "$build/compile_commands.json" |
                       sed 's/.*: *"\(.*\)"/\1/' | sort -u)
  if ((${#files[@]} == 0)); then
    echo "check_tidy.sh: $build/compile_commands.json lists no file under $root/src" >&2
    exit 2
  fi
fi

# The headers of src/: found through src/ itself or through a layer's include root
# (BUILD/layers/LAYER/DIR, a link to src/DIR or to cuda/), so the layer folders are named.
esc() { printf '%s' "$1" | sed 's/[][\.*^$+?(){}|/]/\\&/g'; }
dirs=$(cd "$root/src" && find . -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | paste -sd'|')
filter="^($(esc "$root")/src/|$(esc "$build")/layers/[^/]+/($dirs)/)"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
rc=0
printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$jobs" "$tidy" -p "$build" --config-file="$root/.clang-tidy" --quiet --header-filter="$filter" \
    >"$log" 2>/dev/null || rc=$?
secs=$(($(date +%s) - start))
if ((rc == 0)); then
  echo "clang-tidy: ${#files[@]} files clean in ${secs}s ($("$tidy" --version | sed -n 's/.*version \([0-9.]*\).*/\1/p'))"
  exit 0
fi
# A header's finding comes once per file that includes it, through each layer's path: once here.
sed "s#$build/layers/[^/]*/#$root/src/#" "$log" | awk '/: (warning|error): / {keep = !seen[$0]++} keep' |
  sed "s#$root/##"
echo "clang-tidy: the findings above break the checks of .clang-tidy (${#files[@]} files, ${secs}s)" >&2
exit 1
