"""Checkpoint history (issue 48): `train --save-dir D --keep-last K` keeps exactly this run's
newest K step checkpoints and never touches a file it did not write (a foreign file, names of
another form, another run's checkpoint); the pointer D/latest names a whole checkpoint even when
the process dies between a checkpoint and its pointer (PARATRAIN_FAULT=pause-before-pointer, then
SIGKILL); `--resume auto` skips a truncated newest checkpoint with a warning naming it and resumes
from the one before, bit for bit the run that was never damaged; a fresh `--overwrite` run clears
the old run's pointer and step checkpoints (a link unlinked, not followed), and only once it holds
D's lock (a second run finding it held removes nothing), while a resumed one removes nothing."""
import hashlib
import os
import shutil
import signal
import subprocess

import h5py
import numpy as np
import pytest

from test_faults import finish, start, wait_for_line

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SAMPLE = os.path.join(REPO, "data", "sample_tokens.npy")
BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
TIMEOUT_S = 120
TRAIN = [BIN, "train", "--model", "tiny", "--d-model", "32", "--num-layers", "2", "--num-heads", "2", "--d-ff", "64",
         "--context-length", "16", "--batch-size", "4", "--device", "cpu", "--data", SAMPLE, "--warmup-steps", "2",
         "--cosine-steps", "12", "--log-every", "100"]

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")


def train(*args, rc=0):
    proc = subprocess.run([*TRAIN, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == rc, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def step_files(d):
    return sorted(n for n in os.listdir(d) if n.startswith("step_") and len(n) == len("step_000000.h5"))


def pointer(d):
    lines = open(os.path.join(d, "latest")).read().splitlines()
    assert len(lines) == 2 and lines[1].startswith("run "), lines
    return lines[0], lines[1][4:]


def whole(path):
    """The checkpoint opens and every float dataset reads finite; its step."""
    with h5py.File(path, "r") as f:
        names = []
        f.visit(lambda n: names.append(n) if isinstance(f[n], h5py.Dataset) else None)
        for n in names:
            if f[n].dtype.kind == "f":
                assert np.isfinite(f[n][()]).all(), n
        return int(f.attrs["step"]), f.attrs["run.id"]


def weights(path):
    with h5py.File(path, "r") as f:
        return {n: f[n][()] for n in f.attrs["parameter_names"]}


def losses(record):
    with h5py.File(record, "r") as f:
        t = f["train_steps"][()]
        return dict(zip(t["step"].tolist(), t["loss"].tolist()))


def test_keep_last_keeps_this_runs_newest_k_and_never_touches_other_files(tmp_path):
    d = tmp_path / "D"
    d.mkdir()
    foreign = {"notes.txt": b"mine", "step_200.h5": b"an older naming", "step_0000004.h5": b"seven digits",
               "ckpt_000002.h5": b"another program's"}
    for name, data in foreign.items():
        (d / name).write_bytes(data)
    train("--steps", "10", "--save-every", "2", "--save-dir", str(d), "--keep-last", "3", "--out", str(tmp_path / "a.h5"))
    assert step_files(d) == ["step_000006.h5", "step_000008.h5", "step_000010.h5"]
    name, run_id = pointer(d)
    assert name == "step_000010.h5" and whole(d / name) == (10, run_id)
    # Another run's checkpoint, named like a step of this directory, older than all of them.
    train("--steps", "1", "--save-dir", str(tmp_path / "other"), "--out", str(tmp_path / "o.h5"))
    shutil.copy(tmp_path / "other" / "step_000001.h5", d / "step_000001.h5")
    before = {n: sha(d / n) for n in [*foreign, "step_000001.h5"]}
    train("--steps", "14", "--save-every", "2", "--save-dir", str(d), "--resume", "auto", "--out", str(tmp_path / "b.h5"))
    assert step_files(d) == ["step_000001.h5", "step_000010.h5", "step_000012.h5", "step_000014.h5"]
    assert {n: sha(d / n) for n in before} == before
    assert pointer(d) == ("step_000014.h5", run_id)


def test_a_fresh_run_is_refused_and_a_fresh_overwrite_run_clears_the_old_runs_history(tmp_path):
    d = tmp_path / "D"
    train("--steps", "4", "--save-every", "2", "--save-dir", str(d), "--out", str(tmp_path / "a.h5"))
    kept = sha(d / "step_000004.h5")
    err = train("--steps", "2", "--save-dir", str(d), "--out", str(tmp_path / "b.h5"), rc=1).stderr
    assert len(err.strip().splitlines()) == 1 and "--save-dir" in err and "--resume auto" in err, err
    assert sha(d / "step_000004.h5") == kept and not os.path.exists(tmp_path / "b.h5")
    # Besides the old run's steps 2 and 4 and its pointer: a step-named link (unlinked, never
    # followed), a directory named like a step, and files of other names, all left alone.
    outside = tmp_path / "mine.h5"
    outside.write_bytes(b"kept")
    (d / "step_000009.h5").symlink_to(outside)
    (d / "step_000007.h5").mkdir()
    others = {"notes.txt": b"mine", "step_200.h5": b"an older naming", "step_best.h5": b"a name"}
    for name, data in others.items():
        (d / name).write_bytes(data)
    train("--steps", "1", "--save-dir", str(d), "--overwrite", "--out", str(tmp_path / "b.h5"))
    name, run_id = pointer(d)
    assert (name, whole(d / name)[1]) == ("step_000001.h5", run_id)
    assert sorted(os.listdir(d)) == sorted(["latest", "step_000001.h5", "step_000007.h5", *others])
    assert outside.read_bytes() == b"kept" and {n: (d / n).read_bytes() for n in others} == others


def test_an_overwrite_run_finding_the_directory_taken_removes_nothing(tmp_path):
    d = str(tmp_path / "D")
    train("--steps", "2", "--save-every", "2", "--save-dir", d, "--out", str(tmp_path / "a.h5"))
    # The first run continues, and pauses before the pointer of its step 4, holding D's lock.
    first = start([*TRAIN, "--steps", "100000", "--save-every", "2", "--save-dir", d, "--resume", "auto",
                   "--out", str(tmp_path / "a.h5")], {"PARATRAIN_FAULT": "pause-before-pointer:60"}, str(tmp_path))
    try:
        wait_for_line(first, first.stderr, "pause-before-pointer")
        before = {n: sha(os.path.join(d, n)) for n in os.listdir(d) if not n.endswith(".lock")}
        assert {"latest", "step_000002.h5", "step_000004.h5"} <= set(before), before
        err = train("--steps", "2", "--save-dir", d, "--overwrite", "--out", str(tmp_path / "b.h5"), rc=1).stderr
        assert "being written by another run" in err and f"pid {first.pid}" in err, err
        assert {n: sha(os.path.join(d, n)) for n in os.listdir(d) if not n.endswith(".lock")} == before
    finally:
        first.kill()
        finish(first)


def test_resume_auto_with_overwrite_continues_the_checkpoint_and_removes_nothing(tmp_path):
    d = tmp_path / "D"
    train("--steps", "4", "--save-every", "2", "--save-dir", str(d), "--out", str(tmp_path / "a.h5"))
    _, run_id = pointer(d)
    before = {n: sha(d / n) for n in ("step_000002.h5", "step_000004.h5")}
    out = train("--steps", "6", "--save-dir", str(d), "--resume", "auto", "--overwrite",
                "--out", str(tmp_path / "a.h5")).stdout
    assert "resuming " + str(d / "step_000004.h5") in out, out
    assert {n: sha(d / n) for n in before} == before and pointer(d) == ("step_000006.h5", run_id)


def test_the_pointer_names_a_whole_checkpoint_when_the_run_dies_before_updating_it(tmp_path):
    d = str(tmp_path / "D")
    proc = start([*TRAIN, "--steps", "100000", "--save-every", "2", "--save-dir", d, "--out", str(tmp_path / "r.h5")],
                 {"PARATRAIN_FAULT": "pause-before-pointer:0.2"}, str(tmp_path))
    wait_for_line(proc, proc.stderr, "pause-before-pointer")   # step 2's, then its pointer
    wait_for_line(proc, proc.stderr, "pause-before-pointer")   # step 4 is written, its pointer not yet
    proc.send_signal(signal.SIGKILL)
    finish(proc)
    name, run_id = pointer(d)
    assert name == "step_000002.h5" and whole(os.path.join(d, name)) == (2, run_id)
    assert "step_000004.h5" in step_files(d)
    assert not [n for n in os.listdir(d) if ".tmp." in n]
    # --resume auto follows the pointer, and the run goes on to write its own step 4 and pointer.
    out = train("--steps", "4", "--save-dir", d, "--resume", "auto", "--out", str(tmp_path / "r2.h5")).stdout
    assert "resuming " + os.path.join(d, "step_000002.h5") in out, out
    assert pointer(d) == ("step_000004.h5", run_id)


def test_resume_auto_skips_a_truncated_newest_checkpoint_and_resumes_exactly(tmp_path):
    ref, d = str(tmp_path / "ref"), str(tmp_path / "D")
    train("--steps", "6", "--save-every", "2", "--save-dir", ref, "--out", str(tmp_path / "ref.h5"))
    train("--steps", "4", "--save-every", "2", "--save-dir", d, "--out", str(tmp_path / "a.h5"))
    newest = os.path.join(d, "step_000004.h5")
    with open(newest, "r+b") as f:
        f.truncate(os.path.getsize(newest) // 2)
    proc = train("--steps", "6", "--save-dir", d, "--resume", "auto", "--out", str(tmp_path / "b.h5"))
    warnings = [l for l in proc.stderr.splitlines() if "warning" in l]
    assert len(warnings) == 1 and newest in warnings[0] and "skipping" in warnings[0], proc.stderr
    assert "resuming " + os.path.join(d, "step_000002.h5") in proc.stdout, proc.stdout
    want, got = losses(str(tmp_path / "ref.h5")), losses(str(tmp_path / "b.h5"))
    assert [got[s] for s in (3, 4, 5, 6)] == [want[s] for s in (3, 4, 5, 6)]
    a, b = weights(os.path.join(ref, "step_000006.h5")), weights(os.path.join(d, "step_000006.h5"))
    assert a.keys() == b.keys() and all(np.array_equal(a[n], b[n]) for n in a)
    whole(newest)  # replaced by the resumed run's own step 4


def test_resume_auto_in_an_empty_directory_starts_afresh_and_says_so(tmp_path):
    out = train("--steps", "2", "--save-dir", str(tmp_path / "D"), "--resume", "auto",
                "--out", str(tmp_path / "r.h5")).stdout
    assert "found no checkpoint: starting afresh" in out, out
    assert pointer(str(tmp_path / "D"))[0] == "step_000002.h5"


def test_resume_auto_refuses_a_directory_whose_checkpoints_are_all_damaged(tmp_path):
    d = str(tmp_path / "D")
    train("--steps", "2", "--save-dir", d, "--out", str(tmp_path / "a.h5"))
    ck = os.path.join(d, "step_000002.h5")
    with open(ck, "r+b") as f:
        f.truncate(1000)
    before = sha(ck)
    err = train("--steps", "4", "--save-dir", d, "--resume", "auto", "--out", str(tmp_path / "b.h5"), rc=1).stderr
    assert "no checkpoint" in err and "loads" in err and sha(ck) == before, err
