"""scripts/check_format.sh on files of its own making: one formatted as .clang-format says passes,
a misformatted one is named and fails (exit 1) until --fix rewrites it, and an unknown option is
refused. (The tree itself is checked by the ctest test `format`.) Skipped without clang-format."""
import shutil
import subprocess

import pytest

from conftest import SCRIPTS

CHECK = f"{SCRIPTS}/check_format.sh"

pytestmark = pytest.mark.skipif(not (shutil.which("clang-format-14") or shutil.which("clang-format")),
                                reason="clang-format is not installed (scripts/setup.sh installs it)")

FORMATTED = """namespace pt {

int twice(int x) { return 2 * x; }

}  // namespace pt
"""


def check(*args):
    return subprocess.run([CHECK, *map(str, args)], capture_output=True, text=True, timeout=120)


def test_a_formatted_file_passes(tmp_path):
    f = tmp_path / "good.cpp"
    f.write_text(FORMATTED)
    proc = check(f)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 files formatted" in proc.stdout


def test_a_misformatted_file_is_named_and_fails_until_fixed(tmp_path):
    good, bad = tmp_path / "good.cpp", tmp_path / "bad.cu"
    good.write_text(FORMATTED)
    bad.write_text(FORMATTED.replace("{ return 2 * x; }", "{\n    return 2*x;\n}"))
    proc = check(good, bad)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert str(bad) in proc.stdout and str(good) not in proc.stdout
    assert "--fix" in proc.stderr
    proc = check("--fix", good, bad)
    assert proc.returncode == 0 and str(bad) in proc.stdout, proc.stdout + proc.stderr
    assert bad.read_text() == FORMATTED
    assert check(good, bad).returncode == 0


def test_an_unknown_option_is_refused():
    proc = check("--check")
    assert proc.returncode == 2 and "unknown option '--check'" in proc.stderr
