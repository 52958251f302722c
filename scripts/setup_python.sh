#!/usr/bin/env bash
# Creates .venv with the pinned packages of scripts/requirements.txt (the report and plot
# scripts and their tests run in it). Idempotent: does nothing when the pins are installed.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
want=$(sha256sum scripts/requirements.txt | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
"$py" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r scripts/requirements.txt
echo "$want" > "$stamp"
