#!/bin/bash
# The installed tree is complete and relocatable: install the build into a temporary prefix,
# move the whole tree elsewhere, and run it from there (no build or source tree involved).
#   tests/install_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: install_test.sh BUILD_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/first" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install failed"; }
mv "$work/first" "$work/moved"
p=$work/moved
for f in bin/paratrain bin/paratrain-report bin/paratrain-prepare share/paratrain/scripts/prepare_data.py lib/libparatrain.so share/paratrain/scripts/report \
         share/paratrain/scripts/paratrain_report/__init__.py share/paratrain/scripts/paratrain_report/accelerators.tsv \
         share/paratrain/slurm/train.sbatch share/paratrain/configs/tiny.ini share/paratrain/configs/xl.ini \
         share/paratrain/data/sample_tokens.npy share/doc/paratrain/LICENSE share/doc/paratrain/README.md \
         share/doc/paratrain/ARCHITECTURE.md; do
  [ -e "$p/$f" ] || fail "missing from the installed tree: $f"
done
# RUNPATH: the library through $ORIGIN, nothing from the build or source tree.
runpath=$(readelf -d "$p/bin/paratrain" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
case "$runpath" in *'$ORIGIN/../lib'*) ;; *) fail "bin/paratrain's RUNPATH lacks \$ORIGIN/../lib: '$runpath'" ;; esac
src=$(cd "$(dirname "$0")/.." && pwd)
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
# The installed report finds its package through the bin/ link (with the project's Python
# environment, which has h5py and pandas).
py="$src/.venv/bin/python"
if [ -x "$py" ]; then
  "$py" "$p/bin/paratrain-report" "$work/run.h5" --out "$work/report" >"$work/report.log" 2>&1 ||
    { cat "$work/report.log"; fail "the installed paratrain-report failed on the moved tree's record"; }
  ls "$work/report" | grep -q . || fail "the installed paratrain-report wrote nothing"
fi
echo "install_test: the moved tree at $p runs (--version, train, report)"
