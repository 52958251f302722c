# shellcheck shell=bash
# find_tool CHOSEN NAME...: the lint scripts' way to find their tool. CHOSEN (the user's setting,
# e.g. $CLANG_FORMAT) when it is set, else the first NAME on PATH; prints the command, or returns 1
# when it is not found.
find_tool() {
  local chosen=$1 c
  shift
  [ -z "$chosen" ] || set -- "$chosen"
  for c in "$@"; do
    if command -v "$c" >/dev/null; then
      echo "$c"
      return 0
    fi
  done
  return 1
}
