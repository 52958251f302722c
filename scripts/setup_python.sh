#!/bin/bash
# Creates .venv (repository root) with the pinned packages of scripts/requirements.txt, for
# scripts/report and the script tests. Idempotent: an up-to-date .venv is left as it is.
# Without PyPI it falls back to a venv that sees the system's packages (Debian: python3-h5py,
# python3-pandas, python3-matplotlib, python3-pytest), and says so.
#   scripts/setup_python.sh [PYTHON]     (or $PYTHON; default /usr/bin/python3, else python3)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$repo/.venv
req=$repo/scripts/requirements.txt
python=${1:-${PYTHON:-}}
if [[ -z "$python" ]]; then
  if [[ -x /usr/bin/python3 ]]; then python=/usr/bin/python3; else python=python3; fi
fi
stamp=$venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)

if [[ -x $venv/bin/python && -f $stamp && $(<"$stamp") == "$want" ]]; then
  echo "setup_python: $venv is up to date"
  exit 0
fi

check_imports() { "$venv/bin/python" -c 'import numpy, h5py, pandas, matplotlib, pytest' 2>/dev/null; }

rm -rf "$venv"
"$python" -m venv "$venv"
if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"; then
  echo "$want" >"$stamp"
  echo "setup_python: $venv ready ($("$venv/bin/python" --version), packages from $req)"
  exit 0
fi

echo "setup_python: pip could not install $req; using the system's packages instead" >&2
rm -rf "$venv"
"$python" -m venv --system-site-packages "$venv"
if check_imports; then
  echo "setup_python: $venv ready with system packages (versions not pinned)" >&2
  exit 0
fi
echo "setup_python: error: neither PyPI nor the system provides numpy, h5py, pandas, matplotlib and pytest" \
     "(Debian: apt-get install python3-h5py python3-pandas python3-matplotlib python3-pytest)" >&2
exit 1
