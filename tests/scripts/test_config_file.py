"""`--config FILE` and `--print-config` (issue 48): a file's values are used as the same flags would
be, flags override the file, the printed configuration reads back to the same configuration, the
record and the checkpoint hold a file's values as they hold flags, --resume still adopts and still
refuses, and every example under configs/ parses (the tiny one trains a few steps on the CPU).
Refusals of bad files: test_hostile_inputs.py's config-* cases."""
import glob
import os
import subprocess

import h5py
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SAMPLE = os.path.join(REPO, "data", "sample_tokens.npy")
BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
EXAMPLES = sorted(glob.glob(os.path.join(REPO, "configs", "*.ini")))
TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")

TINY_INI = f"""# a tiny CPU run
model = tiny
d-model = 32
num-layers = 1
num-heads = 2
d-ff = 64
context-length = 16
batch-size = 4
device = cpu
steps = 2
lr = 0.002   # the peak
data = {SAMPLE}
"""


def run(*args, cwd, check=True):
    proc = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd)
    if check:
        assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stderr}"
    return proc


def values(printed):
    """The options a printed configuration sets ({name: [values]}), its defaults left out."""
    out = {}
    for line in printed.splitlines():
        if line.strip() and not line.startswith("#"):
            name, value = (w.strip() for w in line.split("=", 1))
            out.setdefault(name, []).append(value)
    return out


def defaults(printed):
    return {line[2:].split(" = ")[0] for line in printed.splitlines() if line.endswith("# default")}


def attrs(path, prefix):
    with h5py.File(path, "r") as f:
        return {k[len(prefix):]: (v.decode() if isinstance(v, bytes) else str(v))
                for k, v in f.attrs.items() if k.startswith(prefix)}


@pytest.fixture
def ini(tmp_path):
    path = tmp_path / "run.ini"
    path.write_text(TINY_INI)
    return path


def test_file_values_are_used_and_stored_as_flags_are(ini, tmp_path):
    printed = run("train", "--config", ini, "--print-config", cwd=tmp_path).stdout
    v = values(printed)
    assert v["lr"] == ["0.002"] and v["d-model"] == ["32"] and v["steps"] == ["2"], printed
    assert "lr" not in defaults(printed) and "seed" in defaults(printed)
    assert not list(tmp_path.glob("*.h5")), "--print-config must not train"

    run("train", "--config", ini, "--save", "ck.h5", "--out", "r.h5", cwd=tmp_path)
    run("train", *[w for kv in (("--" + k, x) for k, vs in v.items() for x in vs) for w in kv],
        "--save", "ck_flags.h5", "--out", "r_flags.h5", cwd=tmp_path)
    rec, rec_flags = attrs(tmp_path / "r.h5", "option."), attrs(tmp_path / "r_flags.h5", "option.")
    assert rec["lr"] == "0.002" and rec["d-model"] == "32" and rec["config"] == str(ini)
    # The file's values are stored exactly as the same flags are (the output names aside).
    skip = {"config", "out", "save"}
    assert {k: x for k, x in rec.items() if k not in skip} == {k: x for k, x in rec_flags.items() if k not in skip}
    ck, ck_flags = attrs(tmp_path / "ck.h5", "config."), attrs(tmp_path / "ck_flags.h5", "config.")
    assert ck["lr"] == "0.002" and ck == ck_flags
    assert "config" not in ck, "the file's path is no option of the run: a resumed run must not need the file"


def test_flags_override_the_file(ini, tmp_path):
    printed = run("train", "--config", ini, "--lr", "0.005", "--steps", "1", "--print-config", cwd=tmp_path).stdout
    assert values(printed)["lr"] == ["0.005"] and values(printed)["steps"] == ["1"]
    assert values(printed)["d-model"] == ["32"]
    run("train", "--config", ini, "--lr", "0.005", "--out", "r.h5", cwd=tmp_path)
    assert attrs(tmp_path / "r.h5", "option.")["lr"] == "0.005"
    # The option the flag overrides is not checked against the file's value either way.
    bad = tmp_path / "bad.ini"
    bad.write_text(TINY_INI + "seed = 7\n")
    assert values(run("train", "--config", bad, "--seed", "9", "--print-config", cwd=tmp_path).stdout)["seed"] == ["9"]


@pytest.mark.parametrize("argv", [
    ["train", "--model", "small", "--lr", "6e-4", "--min-lr", "6e-5", "--precision", "bf16", "--overwrite",
     "--data", "x.bin", "--cosine-steps", "50", "--beta2", "0.95", "--seed", "18446744073709551615"],
    ["train"],
    ["bench", "model", "--model", "tiny,small", "--context-length", "16,32", "--device", "cpu", "--steps", "3"],
    ["bench", "ddp", "--model", "tiny", "--shard-optimizer", "none,zero1"],
    ["bench", "attention", "--context-length", "64,128"],
], ids=["train", "train-defaults", "bench-model", "bench-ddp", "bench-attention"])
def test_print_config_round_trips(argv, tmp_path):
    first = run(*argv, "--print-config", cwd=tmp_path).stdout
    (tmp_path / "printed.ini").write_text(first)
    subcommand = argv[:1] if argv[0] == "train" else argv[:2]
    again = run(*subcommand, "--config", "printed.ini", "--print-config", cwd=tmp_path).stdout
    assert again == first
    given = [a[2:] for a in argv if a.startswith("--")]
    assert set(values(first)) == set(given), "every option given is printed as set, every other one as a default"


def test_resume_adopts_and_refuses_with_a_config_file(ini, tmp_path):
    run("train", "--config", ini, "--save", "ck.h5", "--out", "r.h5", cwd=tmp_path)
    # The file agrees with the checkpoint: the run continues (the flag overrides the file's steps).
    run("train", "--config", ini, "--resume", "ck.h5", "--steps", "3", "--out", "r2.h5", cwd=tmp_path)
    assert attrs(tmp_path / "r2.h5", "option.")["lr"] == "0.002"
    # --print-config with --resume shows what the checkpoint gives, and reads back the same.
    printed = run("train", "--resume", "ck.h5", "--print-config", cwd=tmp_path).stdout
    assert values(printed)["lr"] == ["0.002"] and values(printed)["d-model"] == ["32"]
    (tmp_path / "resumed.ini").write_text(printed)
    assert run("train", "--config", "resumed.ini", "--print-config", cwd=tmp_path).stdout == printed
    # A file value that differs from the checkpoint's is refused like the flag, naming its line.
    (tmp_path / "other.ini").write_text(TINY_INI.replace("lr = 0.002", "lr = 0.003"))
    proc = run("train", "--config", "other.ini", "--resume", "ck.h5", "--steps", "3", "--out", "r3.h5",
               cwd=tmp_path, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "other.ini' line 11" in proc.stderr and "--lr 0.003 (the checkpoint's is 0.002)" in proc.stderr
    assert not (tmp_path / "r3.h5").exists()


def test_every_example_parses_and_names_its_size():
    names = {os.path.basename(p)[:-4] for p in EXAMPLES}
    assert names >= {"tiny", "small", "medium", "large", "xl", "2.7b"}, names
    for path in EXAMPLES:
        proc = subprocess.run([BIN, "train", "--config", path, "--print-config"], capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        assert proc.returncode == 0, f"{path}: {proc.stderr}"
        assert values(proc.stdout)["model"] == [os.path.basename(path)[:-4]], path


def test_the_tiny_example_trains_on_the_cpu(tmp_path):
    tiny = os.path.join(REPO, "configs", "tiny.ini")
    run("train", "--config", tiny, "--steps", "2", "--device", "cpu", "--save", "ck.h5", "--out", "r.h5",
        cwd=tmp_path)
    rec = attrs(tmp_path / "r.h5", "option.")
    assert rec["model"] == "tiny" and rec["batch-size"] == "8" and rec["steps"] == "2"
    with h5py.File(tmp_path / "r.h5", "r") as f:
        assert len(f["train_steps"]) == 2
