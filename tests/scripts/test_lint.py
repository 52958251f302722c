"""The lint scripts on files of their own making: scripts/check_python.sh (ruff with ruff.toml) and
scripts/check_tidy.sh (clang-tidy with .clang-tidy, through a compile database) pass a clean file,
name a file that breaks a rule and exit 1, and refuse bad arguments with exit 2. (The tree itself
is checked by the ctest tests `ruff` and `clang-tidy`.) Each part is skipped without its tool."""
import json
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
needs_tidy = pytest.mark.skipif(not (shutil.which("clang-tidy-14") or shutil.which("clang-tidy")),
                                reason="clang-tidy is not installed (scripts/setup.sh installs it)")


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


def compile_db(tmp_path, sources):
    """A compile database for SOURCES (name -> text) in tmp_path/build, as CMake writes one."""
    build = tmp_path / "build"
    build.mkdir()
    entries = []
    for name, text in sources.items():
        path = tmp_path / name
        path.write_text(text)
        entries.append({"directory": str(build), "file": str(path),
                        "command": f"c++ -std=gnu++17 -O2 -c {path} -o {name}.o"})
    (build / "compile_commands.json").write_text(json.dumps(entries))
    return build


CLEAN = """#include <string>
#include <utility>

std::string joined(std::string a, const std::string& b) {
  std::string out = std::move(a);
  out += b;
  return out;
}
"""
# A moved-from string read again (bugprone-use-after-move) and size() == 0 for empty()
# (readability-container-size-empty).
BROKEN = """#include <string>
#include <utility>

std::string twice(std::string a) {
  std::string b = std::move(a);
  if (b.size() == 0) return b;
  return a + b;
}
"""


@needs_tidy
def test_clang_tidy_passes_a_clean_file_and_names_a_broken_one(tmp_path):
    build = compile_db(tmp_path, {"clean.cpp": CLEAN, "broken.cpp": BROKEN})
    proc = run("check_tidy.sh", "--build", build, "-j", 2, tmp_path / "clean.cpp")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 files clean" in proc.stdout
    proc = run("check_tidy.sh", "--build", build, "-j", 2, tmp_path / "clean.cpp", tmp_path / "broken.cpp")
    assert proc.returncode == 1
    assert "broken.cpp:7:" in proc.stdout and "bugprone-use-after-move" in proc.stdout, proc.stdout
    assert "readability-container-size-empty" in proc.stdout
    assert "clean.cpp" not in proc.stdout


@needs_tidy
def test_clang_tidy_refusals(tmp_path):
    (tmp_path / "a.cpp").write_text(CLEAN)
    proc = run("check_tidy.sh", "--build", tmp_path / "nowhere", tmp_path / "a.cpp")
    assert proc.returncode == 2 and "compile_commands.json" in proc.stderr
    assert run("check_tidy.sh", tmp_path / "missing.cpp").returncode == 2
    assert run("check_tidy.sh", "-j", "0").returncode == 2
    assert run("check_tidy.sh", "--fix").returncode == 2
    proc = run("check_tidy.sh", env=dict(os.environ, CLANG_TIDY=str(tmp_path / "no-tidy")))
    assert proc.returncode == 2 and "clang-tidy not found" in proc.stderr
