"""Shared helpers for the script tests: paths, running scripts/report, reading its CSV output."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SCRIPTS = os.path.join(REPO, "scripts")
sys.path[:0] = [SCRIPTS, HERE]
os.environ.setdefault("MPLBACKEND", "Agg")
# Multi-rank runs: `MPIEXEC -n N …` with the build's mpiexec (ctest sets PARATRAIN_MPIEXEC), Open
# MPI's root and oversubscription permissions through its variables (other MPIs ignore them).
MPIEXEC = os.environ.get("PARATRAIN_MPIEXEC", "mpiexec")
for _name in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OMPI_MCA_rmaps_base_oversubscribe"):
    os.environ.setdefault(_name, "1")


def run_without_torch(script, args, tmp_path):
    """Runs scripts/<script> with a `torch` that cannot be imported: --help, argument errors and
    file writing must not need it."""
    fake = tmp_path / "no_torch"
    fake.mkdir(exist_ok=True)
    (fake / "torch.py").write_text("raise ImportError('torch must not be imported for this')\n")
    env = dict(os.environ, PYTHONPATH=str(fake))
    return subprocess.run([sys.executable, os.path.join(SCRIPTS, script), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=60)


def run_report(files, out, *extra, check=True):
    """scripts/report as a user runs it (a subprocess, this interpreter)."""
    cmd = [sys.executable, os.path.join(SCRIPTS, "report"), *map(str, files), "--out", str(out),
           "--format", "md,tex,csv", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"report failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def read_csv(out, key):
    import pandas as pd
    return pd.read_csv(os.path.join(str(out), "csv", f"{key}.csv"))


def png_size(path):
    """(width, height) from a PNG's IHDR chunk; fails unless the file is a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@pytest.fixture
def out_dir(tmp_path):
    return tmp_path / "report"
