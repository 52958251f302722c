"""docs/HDF5_SCHEMA.md's table section against the run records the real binary writes (ctest
fixture scripts_test_data): every table and field the program writes is documented with its
type and meaning, and nothing documented is gone."""
import os
import subprocess
import sys

import pytest

from conftest import REPO, SCRIPTS

DATA = os.environ.get("PARATRAIN_TEST_DATA", "")
DOC = os.path.join(REPO, "docs", "HDF5_SCHEMA.md")
sys.path.insert(0, SCRIPTS)
import hdf5_schema  # noqa: E402


def records():
    if not DATA or not os.path.isdir(DATA):
        pytest.skip("PARATRAIN_TEST_DATA is not set: run through ctest (fixture scripts_test_data)")
    files = sorted(os.path.join(DATA, f) for f in os.listdir(DATA) if f.endswith(".h5"))
    assert files, f"no run records in {DATA}"
    return files


def test_doc_matches_the_records():
    proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, "hdf5_schema.py"), *records(), "--check", DOC],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_every_field_has_a_type_and_a_meaning():
    tables = {}
    for path in records():
        tables.update(hdf5_schema.tables_of(path))
    expected = {"/model", "/model_breakdown", "/model_roofline", "/model_memory", "/attention", "/allreduce", "/ddp", "/ddp_events",
                "/train_steps", "/accumulation"}
    assert expected <= {name for _, name in tables}
    for (sub, name), (_, fields) in tables.items():
        for field, type_name, meaning in fields:
            assert type_name in ("int64", "float64", "string"), (name, field, type_name)
            assert meaning.strip(), f"{name}.{field} ({sub}) has no description"


def test_check_fails_on_a_stale_doc(tmp_path):
    stale = tmp_path / "doc.md"
    stale.write_text(f"intro\n{hdf5_schema.BEGIN}\n#### `/gone`\n{hdf5_schema.END}\nend\n")
    assert hdf5_schema.main([*records(), "--check", str(stale)]) == 1
    assert hdf5_schema.main([*records(), "--write", str(stale)]) == 0
    text = stale.read_text()
    assert text.startswith("intro\n") and text.endswith("\nend\n") and "`/gone`" not in text
    assert hdf5_schema.main([*records(), "--check", str(stale)]) == 0
