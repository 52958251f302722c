#!/usr/bin/env bash
# The C++/CUDA format check: every source and header under src/, cuda/, tests/ and dev/ (or the
# files named) against the repository's .clang-format. Lists the files that differ and exits 1;
# --fix rewrites them instead. ctest runs the check (test `format`, label scripts), so
# scripts/test.sh does. The style is clang-format 14's (Debian 12's package `clang-format`,
# which scripts/setup.sh installs); another version may format a few constructs differently.
#
#   scripts/check_format.sh                 check the tree
#   scripts/check_format.sh --fix           rewrite what differs
#   scripts/check_format.sh [--fix] FILE…   only these files
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fix=0
files=()
for a in "$@"; do
  case "$a" in
    --fix) fix=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "check_format.sh: unknown option '$a'" >&2; exit 2 ;;
    *) files+=("$a") ;;
  esac
done

# shellcheck source=scripts/find_tool.sh
source "$root/scripts/find_tool.sh"
clang_format=$(find_tool "${CLANG_FORMAT:-}" clang-format-14 clang-format) || {
  echo "check_format.sh: clang-format not found (scripts/setup.sh installs the Debian package clang-format)" >&2
  exit 2
}
version="$("$clang_format" --version | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p')"
style="--style=file:$root/.clang-format"

if ((${#files[@]} == 0)); then
  cd "$root"
  dirs=(src cuda tests dev)
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Tracked files and new ones git does not ignore, as they are in the working tree.
    mapfile -t files < <(git ls-files --cached --others --exclude-standard -- "${dirs[@]}" |
                         grep -E '\.(cpp|cc|h|hpp|cu|cuh)$' | sort -u | while read -r f; do
                           [ -f "$f" ] && echo "$f"; done)
  else
    mapfile -t files < <(find "${dirs[@]}" -type f \( -name '*.cpp' -o -name '*.cc' -o -name '*.h' \
                         -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) | sort)
  fi
fi

differ=()
for f in "${files[@]}"; do
  if ! "$clang_format" "$style" "$f" | cmp -s - "$f"; then differ+=("$f"); fi
done

if ((${#differ[@]} == 0)); then
  echo "format: ${#files[@]} files formatted as .clang-format says ($clang_format $version)"
  exit 0
fi
if ((fix)); then
  "$clang_format" "$style" -i "${differ[@]}"
  printf 'format: rewrote %s\n' "${differ[@]}"
  exit 0
fi
echo "format: these files differ from .clang-format:"
printf '  %s\n' "${differ[@]}"
note=""
[ "$version" = 14 ] || note=" (this is clang-format $version; the style is checked with 14)"
echo "format: ${#differ[@]} of ${#files[@]} files differ; scripts/check_format.sh --fix rewrites them$note" >&2
exit 1
