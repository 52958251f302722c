#!/bin/bash
# Runs pytest with the project's Python: .venv (scripts/setup_python.sh) when it has the
# packages, else /usr/bin/python3 (Debian's h5py/pandas/matplotlib/pytest). Arguments go to pytest.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=""
for candidate in "$repo/.venv/bin/python" /usr/bin/python3; do
  if [[ -x $candidate ]] && "$candidate" -c 'import numpy, h5py, pandas, matplotlib, pytest' 2>/dev/null; then
    python=$candidate
    break
  fi
done
if [[ -z $python ]]; then
  echo "run_pytest: no Python with numpy, h5py, pandas, matplotlib and pytest (run scripts/setup_python.sh)" >&2
  exit 1
fi
export MPLBACKEND=Agg
cd "$repo/tests/scripts"
exec "$python" -m pytest -p no:cacheprovider -q -rs "$@"
