"""The hostile-input suite's cases that need more than one command (issue 47): faults under the
files a run writes or reads while it works, and files that belong to someone else. Each runs the
real binary in a fresh directory and asserts the exit code, the one error line, and what is on
disk afterwards: the files the run must not touch unchanged, no temporary file left.

- A full disk under a checkpoint, record or --log-file: PARATRAIN_FAULT=disk-full:PATH (any
  machine: the file's writes fail with ENOSPC), and a real full tmpfs where this runs as root.
- A token file truncated by another process between two steps (PARATRAIN_FAULT=signal:N:SIGSTOP
  holds the run after step N while the test truncates the file).
- Two runs started with the same --out or --save: the second fails at start (the first is held
  after a step the same way).
- What --resume may replace: its own checkpoint and record (refusals of other files are rows of
  test_hostile_inputs.py's CASES).
"""
import hashlib
import os
import shutil
import signal
import subprocess
import time

import h5py
import pytest

from test_hostile_inputs import BIN, SAMPLE, TIMEOUT_S, TINY

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")

TRAIN = [BIN, "train", *TINY, "--data", SAMPLE]


def run(args, tmp, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp,
                          env=dict(os.environ, **(env or {})))


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def error_line(proc):
    """The one error line (asserted to be the whole of stderr) of a failed run."""
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 1, f"exit {proc.returncode}\n{proc.stderr}"
    assert len(lines) == 1, f"expected one line on stderr:\n{proc.stderr}"
    return lines[0]


def status(path):
    with h5py.File(path, "r") as f:
        s = f.attrs["status"]
        return (s.decode() if isinstance(s, bytes) else str(s)), [int(x) for x in f["train_steps"]["step"]]


def no_temporary_files(*dirs):
    for d in dirs:
        left = [n for n in os.listdir(d) if ".tmp." in n]
        assert not left, f"temporary files left in {d}: {left}"


def seed_checkpoint(tmp, path):
    """A whole checkpoint at step 2 of a schedule of 8 (so resumed runs print no schedule note)."""
    proc = run([*TRAIN, "--steps", "2", "--cosine-steps", "8", "--save", path, "--out", tmp / "seed.h5"], tmp)
    assert proc.returncode == 0, proc.stderr
    os.remove(tmp / "seed.h5")


# ---- A full disk ----------------------------------------------------------------------------------
def test_injected_full_disk_under_the_checkpoint_keeps_the_last_one_and_the_record(tmp_path):
    ck, rec = tmp_path / "ck.h5", tmp_path / "r.h5"
    seed_checkpoint(tmp_path, ck)
    before = sha(ck)
    proc = run([*TRAIN, "--resume", ck, "--steps", "4", "--save", ck, "--save-every", "1", "--out", rec], tmp_path,
               env={"PARATRAIN_FAULT": f"disk-full:{ck}"})
    line = error_line(proc)
    assert str(ck) in line and "No space left on device" in line, line
    assert sha(ck) == before  # the last good checkpoint, untouched
    s, steps = status(rec)
    assert s.startswith("failed") and "No space left on device" in s and steps == [3], (s, steps)  # step 3 ran, its checkpoint failed
    no_temporary_files(tmp_path)


def test_injected_full_disk_under_the_record_is_one_line_and_the_checkpoint_is_written(tmp_path):
    ck, rec = tmp_path / "ck.h5", tmp_path / "r.h5"
    proc = run([*TRAIN, "--steps", "2", "--save", ck, "--out", rec], tmp_path, env={"PARATRAIN_FAULT": f"disk-full:{rec}"})
    line = error_line(proc)
    assert f"results file '{rec}'" in line and "No space left on device" in line, line
    assert not rec.exists() and ck.exists()
    no_temporary_files(tmp_path)


def test_injected_full_disk_under_both_names_both_in_one_line(tmp_path):
    ck, rec = tmp_path / "ck.h5", tmp_path / "r.h5"
    proc = run([*TRAIN, "--steps", "2", "--save", ck, "--out", rec], tmp_path,
               env={"PARATRAIN_FAULT": f"disk-full:{ck};disk-full:{rec}"})
    line = error_line(proc)
    assert f"checkpoint '{ck}' not written: No space left on device" in line, line
    assert f"results file '{rec}' not written: No space left on device" in line, line
    assert not ck.exists() and not rec.exists()
    no_temporary_files(tmp_path)


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs at tmp_path/small (root only: CI runs as root), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (the injected-fault tests cover the same paths)")
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt, kib):
    with open(mnt / "filler", "wb") as f:
        f.write(b"\0" * (kib * 1024))


# Free space left on the 2 MiB disk, KiB: from room for a small record down to nothing at all.
FREE_KIB = [1024, 48, 16, 8, 4, 0]


@pytest.mark.parametrize("free_kib", FREE_KIB)
def test_real_full_disk_under_the_checkpoint(free_kib, small_disk, tmp_path):
    fill(small_disk, 2048 - free_kib)
    ck, rec = small_disk / "ck.h5", tmp_path / "r.h5"
    proc = run([*TRAIN, "--steps", "2", "--save", ck, "--out", rec], tmp_path)
    line = error_line(proc)  # never a segfault at exit (rc 139), never HDF5's stack
    assert f"checkpoint '{ck}' not written: No space left on device" == line.split("error: ", 1)[1], line
    assert status(rec)[0].startswith("failed: final checkpoint")
    assert sorted(os.listdir(small_disk)) == ["filler"]


@pytest.mark.parametrize("free_kib", FREE_KIB)
def test_real_full_disk_under_the_record(free_kib, small_disk, tmp_path):
    fill(small_disk, 2048 - free_kib)
    ck, rec = tmp_path / "ck.h5", small_disk / "r.h5"
    proc = run([*TRAIN, "--steps", "2", "--save", ck, "--out", rec], tmp_path)
    if proc.returncode == 0:  # it fitted
        assert status(rec)[0] == "completed"
    else:
        line = error_line(proc)
        assert f"results file '{rec}' not written: No space left on device" in line, line
        assert not rec.exists()
    assert ck.exists()
    no_temporary_files(small_disk, tmp_path)


def test_injected_full_disk_under_the_log_file_is_an_error_not_a_silent_exit_0(tmp_path):
    log, rec = tmp_path / "log.jsonl", tmp_path / "r.h5"
    proc = run([*TRAIN, "--steps", "2", "--log-file", log, "--out", rec], tmp_path,
               env={"PARATRAIN_FAULT": f"disk-full:{log}"})
    line = error_line(proc)
    assert f"--log-file '{log}'" in line and "No space left on device" in line, line


def test_real_full_disk_under_the_log_file_ends_the_run_with_its_record(small_disk, tmp_path):
    fill(small_disk, 2044)  # room for a few lines of the log
    log, rec = small_disk / "log.jsonl", tmp_path / "r.h5"
    proc = run([*TRAIN, "--steps", "200", "--log-file", log, "--out", rec], tmp_path)
    line = error_line(proc)
    assert f"--log-file '{log}'" in line and "No space left on device" in line, line
    s, steps = status(rec)
    assert s.startswith("failed") and "--log-file" in s and 0 < len(steps) < 200, (s, steps)


# ---- A token file changed under a run -------------------------------------------------------------
def wait_until_stopped(proc):
    """Until the process is stopped (SIGSTOP): its state in /proc/PID/stat is 'T'."""
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline:
        assert proc.poll() is None, f"exited {proc.returncode} before stopping:\n{proc.communicate()[1]}"
        with open(f"/proc/{proc.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.02)
    raise AssertionError("the run never stopped itself")


@pytest.mark.parametrize("change", ["truncated", "rewritten"])
def test_a_token_file_changed_between_two_steps_is_one_line_and_the_record_is_kept(change, tmp_path):
    data, rec = tmp_path / "tokens.npy", tmp_path / "r.h5"
    shutil.copy(SAMPLE, data)
    # The run stops itself after step 2 (SIGSTOP); the file changes; SIGCONT lets it read step 3.
    proc = subprocess.Popen([BIN, "train", *TINY, "--data", str(data), "--steps", "5", "--out", str(rec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=dict(os.environ, PARATRAIN_FAULT="signal:2:SIGSTOP"))
    try:
        wait_until_stopped(proc)
        if change == "truncated":
            os.truncate(data, os.path.getsize(data) // 2)
        else:  # the same size, other tokens: only the modification time tells
            with open(data, "r+b") as f:
                f.seek(-64, os.SEEK_END)
                f.write(bytes(64))
            st = os.stat(data)
            os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    fake = subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
    line = error_line(fake)  # not SIGBUS (rc 135)
    assert f"token file '{data}' changed while training" in line, line
    s, steps = status(rec)
    assert s.startswith("failed") and steps == [1, 2], (s, steps)


# ---- Outputs taken when a run starts -------------------------------------------------------------
def hold_after_step(args, tmp, step=1, env=None):
    """A run started with `args`, held (SIGSTOP) after step `step` with its outputs taken."""
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp, env=dict(os.environ, PARATRAIN_FAULT=f"signal:{step}:SIGSTOP", **(env or {})))
    wait_until_stopped(proc)
    return proc


def finish(proc):
    proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_second_run_with_the_same_outputs_fails_at_start_and_the_first_finishes(tmp_path):
    ck, rec = tmp_path / "ck.h5", tmp_path / "r.h5"
    first = hold_after_step([*TRAIN, "--steps", "3", "--save", ck, "--out", rec], tmp_path)
    try:
        for save, out, taken in [(tmp_path / "ck2.h5", rec, f"results file '{rec}'"),
                                 (ck, tmp_path / "r2.h5", f"checkpoint (--save) '{ck}'")]:
            second = run([*TRAIN, "--steps", "3", "--save", save, "--out", out], tmp_path)
            line = error_line(second)
            assert taken in line and "being written by another run" in line and f"pid {first.pid}" in line, line
            assert "step" not in second.stdout, second.stdout  # refused before any work
        assert not (tmp_path / "ck2.h5").exists() and not (tmp_path / "r2.h5").exists()
    finally:
        done = finish(first)
    assert done.returncode == 0, done.stderr
    assert status(rec) == ("completed", [1, 2, 3])
    assert sorted(os.listdir(tmp_path)) == ["ck.h5", "r.h5"]  # no lock file left


def test_an_earlier_run_of_the_same_slurm_job_does_not_hold_its_outputs(tmp_path):
    rec = tmp_path / "r.h5"
    first = hold_after_step([*TRAIN, "--steps", "3", "--out", rec], tmp_path,
                            env={"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "0"})
    try:
        # Another step of the same run of the job: refused; the job's next run (a requeue): goes on.
        same = run([*TRAIN, "--steps", "2", "--out", rec], tmp_path, env={"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "0"})
        assert "being written by another run" in error_line(same)
        requeued = run([*TRAIN, "--steps", "2", "--out", rec, "--overwrite"], tmp_path,
                       env={"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "1"})
        assert requeued.returncode == 0, requeued.stderr
    finally:
        first.kill()
        first.communicate(timeout=TIMEOUT_S)


# ---- Files that belong to this run, or to another ----
def test_a_resumed_run_replaces_its_own_checkpoint_and_continues_its_own_record(tmp_path):
    ck, rec, backup = tmp_path / "ck.h5", tmp_path / "r.h5", tmp_path / "backup.h5"
    assert run([*TRAIN, "--steps", "2", "--save", ck, "--out", rec], tmp_path).returncode == 0
    shutil.copy(ck, backup)
    again = run([BIN, "train", "--resume", ck, "--steps", "4", "--save", ck, "--out", rec], tmp_path)
    assert again.returncode == 0, again.stderr
    # From an older copy of the same run: the run's checkpoint and record are still its own.
    older = run([BIN, "train", "--resume", backup, "--steps", "5", "--save", ck, "--out", rec], tmp_path)
    assert older.returncode == 0, older.stderr
    assert status(rec) == ("completed", [1, 2, 3, 4, 5])
    with h5py.File(rec, "r") as f:
        run_id = f.attrs["run_id"]
        assert len(f["train_segments"]) == 3
    with h5py.File(ck, "r") as f:
        assert f.attrs["run.id"] == run_id and int(f.attrs["step"]) == 5
