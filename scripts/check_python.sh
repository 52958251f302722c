#!/usr/bin/env bash
# The Python lint: ruff on scripts/, tests/scripts/ and dev/ (or the files named) with the rules of
# ruff.toml. Lists what it finds and exits 1. ctest runs it (test `ruff`, labels scripts and lint).
# ruff comes from .venv (pinned in scripts/requirements.txt, installed by scripts/setup_python.sh,
# which scripts/setup.sh runs), else from PATH or $RUFF.
#
#   scripts/check_python.sh            check the tree
#   scripts/check_python.sh FILE…      only these files
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
files=()
for a in "$@"; do
  case "$a" in
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "check_python.sh: unknown option '$a'" >&2; exit 2 ;;
    *) [ -e "$a" ] || { echo "check_python.sh: $a: no such file" >&2; exit 2; }
       files+=("$(realpath "$a")") ;;
  esac
done

# shellcheck source=scripts/find_tool.sh
source "$root/scripts/find_tool.sh"
ruff=$(find_tool "${RUFF:-}" "$root/.venv/bin/ruff" ruff) || {
  echo "check_python.sh: ruff not found (scripts/setup_python.sh installs it into .venv)" >&2
  exit 2
}
[[ $ruff != */* ]] || ruff="$(realpath "$ruff")"
((${#files[@]})) || files=(scripts tests/scripts dev)
cd "$root"  # ruff.toml's file patterns are relative to where ruff runs when --config names it
if "$ruff" check --no-cache --config "$root/ruff.toml" --output-format concise "${files[@]}"; then
  echo "ruff: clean ($("$ruff" --version))"
  exit 0
fi
echo "ruff: the findings above break the rules of ruff.toml" >&2
exit 1
