#!/bin/sh
# Runs a 2-rank job that must fail: passes when it ends non-zero, without hanging, and its
# output names what failed.
# usage: expect_abort.sh <mpiexec> <program> <mode> <backend> <expected output pattern>
mpiexec=$1 program=$2 mode=$3 backend=$4 pattern=$5
out=$(PARATRAIN_COMM_TIMEOUT_S=${PARATRAIN_COMM_TIMEOUT_S:-2} timeout 120 \
      "$mpiexec" -n 2 "$program" "$mode" "$backend" 2>&1)
rc=$?
echo "$out"
echo "exit code: $rc"
if [ "$rc" -eq 77 ]; then echo "SKIPPED"; exit 77; fi
if [ "$rc" -eq 0 ]; then echo "FAIL: the job exited 0"; exit 1; fi
if [ "$rc" -eq 124 ]; then echo "FAIL: the job hung (killed after 120 s)"; exit 1; fi
if ! printf '%s\n' "$out" | grep -q -- "$pattern"; then
  echo "FAIL: the output does not contain '$pattern'"; exit 1
fi
echo "PASS"
