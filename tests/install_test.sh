#!/bin/bash
# The installed tree is complete and relocatable: install the build into a temporary prefix,
# move the whole tree elsewhere, and run it from there (no build or source tree involved).
#   tests/install_test.sh BUILD_DIR           the program, its library, the data and the report
#   tests/install_test.sh BUILD_DIR slurm     the installed Slurm scripts on a real local Slurm
#                                             (tests/install_slurm.sh; exit 77 without Slurm)
set -euo pipefail
build=${1:?usage: install_test.sh BUILD_DIR [slurm]}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/first" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install failed"; }
mv "$work/first" "$work/moved"
p=$work/moved
# A Python with the report's packages: the project's .venv, else Debian's (as run_pytest.sh picks)
py=""
for candidate in "$src/.venv/bin/python" /usr/bin/python3; do
  if [ -x "$candidate" ] && "$candidate" -c 'import h5py, pandas, matplotlib' 2>/dev/null; then py=$candidate; break; fi
done
if [ "${2:-}" = slurm ]; then
  # shellcheck source=tests/install_slurm.sh
  source "$src/tests/install_slurm.sh"
  exit 0
fi
for f in bin/paratrain bin/paratrain-report bin/paratrain-prepare share/paratrain/scripts/prepare_data.py share/paratrain/scripts/sample.py share/paratrain/scripts/llama_numpy.py lib/libparatrain.so share/paratrain/scripts/report \
         share/paratrain/scripts/paratrain_report/__init__.py share/paratrain/scripts/paratrain_report/accelerators.tsv \
         share/paratrain/slurm/train.sbatch share/paratrain/configs/tiny.ini share/paratrain/configs/xl.ini \
         share/paratrain/data/sample_tokens.npy share/doc/paratrain/LICENSE share/doc/paratrain/README.md \
         share/doc/paratrain/ARCHITECTURE.md; do
  [ -e "$p/$f" ] || fail "missing from the installed tree: $f"
done
# RUNPATH: the library through $ORIGIN, nothing from the build or source tree.
runpath=$(readelf -d "$p/bin/paratrain" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
case "$runpath" in *'$ORIGIN/../lib'*) ;; *) fail "bin/paratrain's RUNPATH lacks \$ORIGIN/../lib: '$runpath'" ;; esac
for f in bin/paratrain lib/libparatrain.so; do
  rp=$(readelf -d "$p/$f" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
  case "$rp" in *"$(cd "$build" && pwd)"*|*"$src"*) fail "$f's RUNPATH points into the build or source tree: $rp" ;; esac
done
# Run from a directory with no data/ of its own: the default data is the installed sample.
cd "$work"
"$p/bin/paratrain" --version | tee "$work/version.txt"
grep -q "^paratrain [0-9]" "$work/version.txt" || fail "--version printed no version line"
grep -q "cuda architectures" "$work/version.txt" || fail "--version does not name the CUDA architectures"
"$p/bin/paratrain" train --model tiny --steps 2 --device cpu --out "$work/run.h5" >"$work/train.log" 2>&1 ||
  { cat "$work/train.log"; fail "train from the moved tree failed"; }
[ -s "$work/run.h5" ] || fail "train wrote no record"
grep -q "share/paratrain/data/sample_tokens.npy" "$work/train.log" "$work/run.h5" ||
  fail "train did not use the installed sample data"
"$p/bin/paratrain" train --config "$p/share/paratrain/configs/small.ini" --print-config >"$work/small.ini" ||
  fail "the installed configs/small.ini does not parse"
grep -q "^model = small" "$work/small.ini" || fail "--print-config of configs/small.ini names no model"
# The installed report, found on PATH, finds its package through the bin/ link (with a Python
# that has h5py and pandas first on PATH: its interpreter is `env python3`).
if [ -n "$py" ]; then
  PATH="$p/bin:$(dirname "$py"):$PATH" paratrain-report "$work/run.h5" --out "$work/report" >"$work/report.log" 2>&1 ||
    { cat "$work/report.log"; fail "the installed paratrain-report failed on the moved tree's record"; }
  ls "$work/report" | grep -q . || fail "the installed paratrain-report wrote nothing"
fi
echo "install_test: the moved tree at $p runs (--version, train, report)"
