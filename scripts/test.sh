#!/usr/bin/env bash
# One command that builds everything and runs every test: C++ (CPU, GPU — skipped without a
# device —, and MPI suites) and the Python script tests. Exit status is non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-train
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
