"""The lint scripts on files of their own making: scripts/check_python.sh (ruff with ruff.toml)
passes a clean file, names a file that breaks a rule and exits 1, and refuses bad arguments with
exit 2. (The tree itself is checked by the ctest test `ruff`.) Skipped without the tool."""
import os
import shutil
import subprocess

import pytest

from conftest import REPO, SCRIPTS


def run(script, *args, env=None):
    return subprocess.run([os.path.join(SCRIPTS, script), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def has_ruff():
    return os.access(os.path.join(REPO, ".venv", "bin", "ruff"), os.X_OK) or shutil.which("ruff")


needs_ruff = pytest.mark.skipif(not has_ruff(), reason="ruff is not installed (scripts/setup_python.sh installs it)")


@needs_ruff
def test_ruff_passes_a_clean_file_and_names_a_broken_one(tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("import os\n\nprint(os.sep)\n")
    bad.write_text("import os\n\n\ndef f(x=[]):\n    return undefined_name\n")
    proc = run("check_python.sh", good)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run("check_python.sh", good, bad)
    assert proc.returncode == 1
    for rule in ("F401", "B006", "F821"):  # unused import, mutable default, undefined name
        assert "bad.py" in proc.stdout and rule in proc.stdout, proc.stdout
    assert "good.py" not in proc.stdout


def test_ruff_refusals(tmp_path):
    assert run("check_python.sh", "--fix").returncode == 2
    proc = run("check_python.sh", env=dict(os.environ, RUFF=str(tmp_path / "no-ruff")))
    assert proc.returncode == 2 and "ruff not found" in proc.stderr
