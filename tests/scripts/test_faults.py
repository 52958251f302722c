"""Faults during a run (issue 15's fault tests, issue 14's time limits, issue 47's signals and
standard output): signals during start-up, a checkpoint write and between steps, SIGKILL, a closed
standard output, and a NaN injected into one gradient. Faults are injected with PARATRAIN_FAULT
(src/core/fault_injection.h): `pause-in-checkpoint:SEC` holds a checkpoint write half-way, and
`pause-in-start-up:SEC` train's start-up, after saying so on stderr, so a signal lands inside
them for sure.

What must hold: the checkpoint at --save is always a whole one (the previous one, or the new one
when the write was allowed to finish), no temporary file is left that a later run trips over,
the run record is written whenever the process had the chance, and the exit code says what
happened (src/core/exit_codes.h).
"""
import hashlib
import os
import selectors
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import MPIEXEC

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SAMPLE = os.path.join(REPO, "data", "sample_tokens.npy")
BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
MPI = [MPIEXEC]
TIMEOUT_S = 60
EXIT_STOPPED = 75  # kExitStopped

TRAIN = [BIN, "train", "--model", "tiny", "--d-model", "32", "--num-layers", "1", "--num-heads", "2",
         "--d-ff", "64", "--context-length", "16", "--batch-size", "4", "--device", "cpu", "--data", SAMPLE]
PARAM = "layers.0.ffn.w1.weight"  # a trainable parameter of that model

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def temp_files(d):
    return sorted(n for n in os.listdir(d) if ".tmp." in n)


def checkpoint_step_and_finite(path):
    with h5py.File(path, "r") as f:
        finite = all(np.isfinite(f[n][()]).all() for n in f.attrs["parameter_names"])
        return int(f.attrs["step"]), finite


def record_status(path):
    with h5py.File(path, "r") as f:
        status = f.attrs["status"]
        rows = len(f["train_steps"]["step"]) if "train_steps" in f else 0
        return (status.decode() if isinstance(status, bytes) else str(status)), rows


def seed_checkpoint(tmp):
    """A whole checkpoint at step 2, made without faults: the 'previous' one."""
    ck = os.path.join(tmp, "ck.h5")
    subprocess.run([*TRAIN, "--steps", "2", "--save", ck, "--out", os.path.join(tmp, "seed.h5")], check=True,
                   capture_output=True, timeout=TIMEOUT_S)
    return ck


def start(cmd, env_extra, tmp):
    env = dict(os.environ, **env_extra)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)


def wait_for_line(proc, pipe, words, timeout=TIMEOUT_S):
    """Reads `pipe` of proc until a line holding `words`; returns everything read."""
    sel = selectors.DefaultSelector()
    sel.register(pipe, selectors.EVENT_READ)
    seen, deadline = "", time.time() + timeout
    while time.time() < deadline:
        if sel.select(timeout=0.5):
            line = pipe.readline()
            if not line and proc.poll() is not None:
                break
            seen += line
            if words in line:
                return seen
    proc.kill()
    raise AssertionError(f"never saw '{words}'; output so far:\n{seen}")


def finish(proc):
    out, err = proc.communicate(timeout=TIMEOUT_S)
    return proc.returncode, out, err


def train_with_nan_gradient(tmp_path, step, *args):
    """Trains with a NaN in PARAM's gradient at `step`, saving ck.h5 and recording r.h5 in tmp_path."""
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    proc = subprocess.run([*TRAIN, *args, "--save", ck, "--out", rec], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=dict(os.environ, PARATRAIN_FAULT=f"nan-grad:{step}:{PARAM}"))
    return proc, ck, rec


def test_nan_gradient_stops_at_that_step_naming_it_and_the_checkpoint_stays_finite(tmp_path):
    proc, ck, rec = train_with_nan_gradient(tmp_path, 5, "--steps", "8", "--save-every", "2")
    assert proc.returncode == 1, proc.stderr
    assert "step 5" in proc.stderr and PARAM in proc.stderr, proc.stderr
    assert "not applied" in proc.stderr, proc.stderr
    step, finite = checkpoint_step_and_finite(ck)
    assert (step, finite) == (4, True), "the last checkpoint is the one before the NaN, and finite"
    status, rows = record_status(rec)
    assert status.startswith("failed") and "step 5" in status and rows == 5, (status, rows)
    assert temp_files(tmp_path) == []


def test_nan_gradient_with_skip_goes_on_and_saves_finite_weights(tmp_path):
    proc, ck, _ = train_with_nan_gradient(tmp_path, 3, "--steps", "6", "--on-nonfinite", "skip")
    assert proc.returncode == 0, proc.stderr
    assert "step 3" in proc.stdout and PARAM in proc.stdout, proc.stdout
    assert checkpoint_step_and_finite(ck) == (6, True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_during_a_checkpoint_write_finishes_it_then_stops_there_with_the_record(sig, tmp_path):
    # The run stops on the checkpoint being written (step 3), not after one more step and a
    # second write; SIGHUP (a closed terminal) is one of the stop signals.
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    proc = start([*TRAIN, "--steps", "100000", "--save", ck, "--save-every", "3", "--out", rec],
                 {"PARATRAIN_FAULT": "pause-in-checkpoint:1.5"}, tmp_path)
    wait_for_line(proc, proc.stderr, "pause-in-checkpoint")
    proc.send_signal(sig)
    rc, out, err = finish(proc)
    name = signal.Signals(sig).name
    assert rc == EXIT_STOPPED, f"{rc}\n{out}\n{err}"
    assert "stopping at the end of this step" in err, err
    assert f"stopped by {name} after step 3" in out and "--resume " + ck in out, out
    step, finite = checkpoint_step_and_finite(ck)
    assert (step, finite) == (3, True), "the checkpoint written is whole, at the step the run stopped"
    status, rows = record_status(rec)
    assert status == f"interrupted: {name} after step 3 of 100000" and rows == 3, (status, rows)
    assert out.count("checkpoint") <= 2 and temp_files(tmp_path) == []


def held_in_a_checkpoint_write(tmp_path):
    """A run over a whole checkpoint (seed_checkpoint's) held half-way through its next write of
    it (for 30 s): (the checkpoint, its hash before, the process)."""
    ck = seed_checkpoint(str(tmp_path))
    before = sha(ck)
    proc = start([*TRAIN, "--steps", "100000", "--save", ck, "--save-every", "2", "--overwrite",
                  "--out", str(tmp_path / "r.h5")], {"PARATRAIN_FAULT": "pause-in-checkpoint:30"}, tmp_path)
    wait_for_line(proc, proc.stderr, "pause-in-checkpoint")
    return ck, before, proc


def test_second_sigint_during_a_checkpoint_write_keeps_the_previous_one(tmp_path):
    ck, before, proc = held_in_a_checkpoint_write(tmp_path)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    rc, _, err = finish(proc)
    assert rc == 128 + signal.SIGINT, f"{rc}\n{err}"
    assert "stopped at once" in err, err
    assert sha(ck) == before, "the previous checkpoint was changed"
    assert temp_files(tmp_path) == [], "the interrupted write left its temporary file"


def test_sigkill_during_a_checkpoint_write_keeps_the_previous_one_and_the_next_run_cleans_up(tmp_path):
    ck, before, proc = held_in_a_checkpoint_write(tmp_path)
    proc.send_signal(signal.SIGKILL)
    finish(proc)
    assert sha(ck) == before, "the previous checkpoint was changed"
    left = temp_files(tmp_path)
    assert len(left) == 1 and left[0].startswith("ck.h5.tmp."), left
    # The next run that writes the same checkpoint removes it, saying so.
    nxt = subprocess.run([*TRAIN, "--steps", "2", "--save", ck, "--overwrite", "--out", str(tmp_path / "r2.h5")],
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert nxt.returncode == 0, nxt.stderr
    assert "removed" in nxt.stderr and left[0] in nxt.stderr, nxt.stderr
    assert temp_files(tmp_path) == []
    assert checkpoint_step_and_finite(ck) == (2, True)


def test_sigterm_between_steps_writes_the_record_and_the_checkpoint(tmp_path):
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    proc = start([*TRAIN, "--steps", "100000", "--save", ck, "--out", rec], {}, tmp_path)
    wait_for_line(proc, proc.stdout, "step      3/")
    proc.send_signal(signal.SIGTERM)
    rc, out, err = finish(proc)
    assert rc == EXIT_STOPPED, f"{rc}\n{out}\n{err}"
    status, rows = record_status(rec)
    assert status.startswith("interrupted: SIGTERM after step ") and rows >= 3, status
    step, finite = checkpoint_step_and_finite(ck)
    assert step == rows and finite
    # And the run continues from there.
    nxt = subprocess.run([*TRAIN, "--steps", str(rows + 2), "--resume", ck, "--save", ck, "--out", str(tmp_path / "r2.h5")],
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert nxt.returncode == 0, nxt.stderr
    assert checkpoint_step_and_finite(ck) == (rows + 2, True)


def test_sigusr1_to_mpirun_stops_every_rank_at_the_same_step(tmp_path):
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    proc = start([*MPI, "-np", "2", *TRAIN, "--steps", "100000", "--save", ck, "--out", rec], {}, tmp_path)
    wait_for_line(proc, proc.stdout, "step      3/")
    proc.send_signal(signal.SIGUSR1)  # mpirun forwards SIGUSR1 to every rank
    rc, out, err = finish(proc)
    assert rc == EXIT_STOPPED, f"{rc}\n{out}\n{err}"
    status, rows = record_status(rec)
    assert status.startswith("interrupted: SIGUSR1 after step "), status
    assert checkpoint_step_and_finite(ck) == (rows, True)
    assert temp_files(tmp_path) == []


def test_a_signal_outside_training_ends_at_once_without_leftovers(tmp_path):
    # bench has no step boundary to stop at: the first signal ends it, exit 128 + signal.
    proc = start([BIN, "bench", "model", "--model", "tiny", "--precision", "fp32", "--attention", "naive",
                  "--steps", "100000", "--warmup", "0", "--device", "cpu", "--out", str(tmp_path / "b.h5")], {}, tmp_path)
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    rc, _, err = finish(proc)
    assert rc == 128 + signal.SIGTERM, f"{rc}\n{err}"
    assert not os.path.exists(tmp_path / "b.h5") and temp_files(tmp_path) == []


# ---- start-up: a signal ends the process at once, writing nothing ------------------------------
# Start-up (options, checkpoint, data, building the model) has nothing to save and may be blocked,
# so it is never waited for (README, "When something goes wrong"). pause-in-start-up holds it
# long enough that the signal lands inside it for sure.
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP])
def test_a_signal_during_start_up_ends_the_run_at_once_writing_nothing(sig, tmp_path):
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    proc = start([*TRAIN, "--steps", "3", "--save", ck, "--out", rec], {"PARATRAIN_FAULT": "pause-in-start-up:30"},
                 tmp_path)
    wait_for_line(proc, proc.stderr, "fault injection: pause-in-start-up")
    t0 = time.time()
    proc.send_signal(sig)
    rc, out, err = finish(proc)
    assert time.time() - t0 < 10, "waited for the start-up instead of ending at once"
    assert rc == 128 + sig, f"{rc}\n{out}\n{err}"
    assert "stopped at once" in err, err
    assert sorted(os.listdir(tmp_path)) == [], "a run stopped in its start-up writes nothing"


def test_a_signal_during_a_resumed_start_up_leaves_checkpoint_and_record_as_they_were(tmp_path):
    ck = seed_checkpoint(str(tmp_path))
    rec = str(tmp_path / "seed.h5")
    before = sha(ck), sha(rec)
    proc = start([*TRAIN, "--steps", "6", "--resume", ck, "--save", ck, "--out", rec],
                 {"PARATRAIN_FAULT": "pause-in-start-up:30"}, tmp_path)
    wait_for_line(proc, proc.stderr, "fault injection: pause-in-start-up")
    proc.send_signal(signal.SIGTERM)
    rc, _, err = finish(proc)
    assert rc == 128 + signal.SIGTERM, f"{rc}\n{err}"
    assert (sha(ck), sha(rec)) == before and temp_files(tmp_path) == []


def test_a_signal_during_start_up_on_one_rank_ends_the_job_and_a_rerun_completes(tmp_path):
    # SIGUSR1 reaching rank 0 of 2 during start-up (a Slurm --signal that comes early): rank 0
    # ends at once, so does the job (not 75: nothing was saved), and the same command then runs.
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    cmd = [*MPI, "-np", "2", *TRAIN, "--steps", "3", "--save", ck, "--out", rec, "--resume", "auto"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env=dict(os.environ, PARATRAIN_FAULT="signal:0:SIGUSR1"))
    assert proc.returncode not in (0, EXIT_STOPPED), f"{proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert not os.path.exists(ck) and not os.path.exists(rec) and temp_files(tmp_path) == []
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert again.returncode == 0, again.stderr
    assert record_status(rec) == ("completed", 3)
    assert temp_files(tmp_path) == []


def test_sighup_between_steps_stops_like_sigterm(tmp_path):
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    proc = subprocess.run([*TRAIN, "--steps", "10", "--save", ck, "--out", rec], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=dict(os.environ, PARATRAIN_FAULT="signal:3:SIGHUP"))
    assert proc.returncode == EXIT_STOPPED, f"{proc.returncode}\n{proc.stderr}"
    assert record_status(rec) == ("interrupted: SIGHUP after step 3 of 10", 3)
    assert checkpoint_step_and_finite(ck) == (3, True)


def test_sighup_stays_ignored_under_nohup(tmp_path):
    # nohup starts the process with SIGHUP ignored: closing the terminal must not stop the run.
    rec = str(tmp_path / "r.h5")
    proc = subprocess.run([*TRAIN, "--steps", "5", "--out", rec], capture_output=True, text=True, timeout=TIMEOUT_S,
                          env=dict(os.environ, PARATRAIN_FAULT="signal:3:SIGHUP"),
                          preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    assert proc.returncode == 0, f"{proc.returncode}\n{proc.stderr}"
    assert record_status(rec) == ("completed", 5)


def test_a_signal_during_the_final_checkpoint_write_lets_the_run_finish(tmp_path):
    # After the last step nothing is left to stop: the checkpoint is finished, the run completed.
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    proc = start([*TRAIN, "--steps", "3", "--save", ck, "--out", rec], {"PARATRAIN_FAULT": "pause-in-checkpoint:1.5"},
                 tmp_path)
    wait_for_line(proc, proc.stderr, "pause-in-checkpoint")
    proc.send_signal(signal.SIGTERM)
    rc, out, err = finish(proc)
    assert rc == 0, f"{rc}\n{out}\n{err}"
    assert record_status(rec) == ("completed", 3)
    assert checkpoint_step_and_finite(ck) == (3, True) and temp_files(tmp_path) == []


# ---- standard output closed: train stops as on a signal, others go on --------------------------
def read_lines_then_close_stdout(proc, count):
    """Reads `count` lines of proc's stdout, then closes it: the reader has gone (`| head`)."""
    lines = [proc.stdout.readline() for _ in range(count)]
    proc.stdout.close()
    return lines


@pytest.mark.parametrize("log_format", ["text", "jsonl"])
def test_a_closed_stdout_stops_train_with_its_record_and_checkpoint(log_format, tmp_path):
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    proc = start([*TRAIN, "--steps", "100000", "--save", ck, "--out", rec, "--log-format", log_format], {}, tmp_path)
    read_lines_then_close_stdout(proc, 3)  # a JSON consumer that stops, or | head -3
    err = proc.stderr.read()
    proc.wait(timeout=TIMEOUT_S)
    assert proc.returncode == EXIT_STOPPED, f"{proc.returncode}\n{err}"
    status, rows = record_status(rec)
    assert status.startswith("interrupted: a write error on standard output (Broken pipe) after step "), status
    assert status == f"interrupted: a write error on standard output (Broken pipe) after step {rows} of 100000"
    assert checkpoint_step_and_finite(ck) == (rows, True)
    # The summary, which had nowhere to go on stdout, is on stderr.
    assert "continue with: --resume " + ck in err and "results: " + rec in err, err
    assert temp_files(tmp_path) == []


def test_train_piped_into_head_exits_75_not_141(tmp_path):
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    cmd = " ".join([*TRAIN, "--steps", "100000", "--save", ck, "--out", rec]) + " | head -2"
    proc = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd=tmp_path)
    assert proc.returncode == EXIT_STOPPED, f"{proc.returncode}\n{proc.stderr}"
    assert len(proc.stdout.splitlines()) == 2
    status, rows = record_status(rec)
    assert status.startswith("interrupted: a write error on standard output") and rows >= 1, status
    assert checkpoint_step_and_finite(ck) == (rows, True)


def test_a_bench_whose_stdout_closes_goes_on_and_writes_its_record(tmp_path):
    out = str(tmp_path / "b.h5")
    cmd = " ".join([BIN, "bench", "model", "--model", "tiny", "--context-length", "16,32,64", "--precision", "fp32",
                    "--attention", "naive", "--steps", "1", "--warmup", "0", "--device", "cpu", "--out", out])
    proc = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd + " | head -1"], capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd=tmp_path)
    assert proc.returncode == 0, f"{proc.returncode}\n{proc.stderr}"
    assert os.path.exists(out) and temp_files(tmp_path) == []
