"""Exact resume and progress logs (issue 14): a run interrupted by a signal that reaches one rank
and then resumed with `--resume auto` alone gives the losses, weights and record of the run that
was never interrupted, bit for bit, under every optimizer sharding (CPU, 2 ranks); another rank
count resumes too; every option that would change the run is refused, all conflicts in one error;
the JSON lines of --log-format jsonl and --log-file parse and match the HDF5 record.

Interrupts are injected with PARATRAIN_FAULT=signal:STEP:NAME (src/core/fault_injection.h): rank
0 alone raises the signal during step STEP, so the ranks must agree to stop after it."""
import hashlib
import json
import os
import shutil
import subprocess

import h5py
import numpy as np
import pytest

from conftest import MPIEXEC

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SAMPLE = os.path.join(REPO, "data", "sample_tokens.npy")
BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
MPI = [MPIEXEC, "-np"]
TIMEOUT_S = 120
EXIT_STOPPED = 75
STEPS = 8

# A small model with several buckets (--bucket-mb 0.01), so ZeRO-1 and the broadcast scheme
# really split the optimizer state between the ranks.
MODEL = ["--model", "tiny", "--d-model", "32", "--num-layers", "2", "--num-heads", "2", "--d-ff", "64",
         "--context-length", "16", "--batch-size", "4", "--device", "cpu", "--data", SAMPLE,
         "--warmup-steps", "2", "--ddp", "bucketed", "--bucket-mb", "0.01"]
QUIET = ["--log-every", "100"]

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")


def run(ranks, args, env=None, check_rc=0):
    cmd = ([*MPI, str(ranks)] if ranks > 1 else []) + [BIN, "train", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ, **(env or {})))
    if check_rc is not None:
        assert proc.returncode == check_rc, f"{' '.join(cmd)}\nrc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def steps(path):
    with h5py.File(path, "r") as f:
        t = f["train_steps"][()]
        return t["step"], t["loss"], t["grad_norm"]


def weights(path):
    with h5py.File(path, "r") as f:
        return {n: f[n][()] for n in f.attrs["parameter_names"]}


def attr(path, key):
    with h5py.File(path, "r") as f:
        v = f.attrs[key]
        return v.decode() if isinstance(v, bytes) else v


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("shard,accum", [("none", 1), ("broadcast", 1), ("zero1", 1), ("zero1", 2)])
def test_interrupted_then_resumed_equals_uninterrupted(shard, accum, tmp_path):
    flags = [*MODEL, *QUIET, "--shard-optimizer", shard, "--grad-accum", str(accum), "--steps", str(STEPS)]
    full_rec, full_ck = str(tmp_path / "full.h5"), str(tmp_path / "full_ck.h5")
    run(2, [*flags, "--out", full_rec, "--save", full_ck])

    rec, ck = str(tmp_path / "r.h5"), str(tmp_path / "ck.h5")
    first = run(2, [*flags, "--out", rec, "--save", ck, "--resume", "auto"], env={"PARATRAIN_FAULT": "signal:3:SIGUSR1"},
                check_rc=EXIT_STOPPED)
    assert "stopped by SIGUSR1 after step 3" in first.stdout, first.stdout
    assert attr(rec, "status") == f"interrupted: SIGUSR1 after step 3 of {STEPS}"
    assert attr(ck, "step") == 3
    # The requeued job: the same command, or --resume auto with nothing but where things are.
    run(2, ["--resume", "auto", "--save", ck, "--out", rec])

    s_full, loss_full, gn_full = steps(full_rec)
    s, loss, gn = steps(rec)
    assert list(s) == list(range(1, STEPS + 1)), "every step exactly once"
    np.testing.assert_array_equal(loss, loss_full)  # bit for bit
    np.testing.assert_array_equal(gn, gn_full)
    w_full, w = weights(full_ck), weights(ck)
    assert w.keys() == w_full.keys()
    for name in w:
        np.testing.assert_array_equal(w[name], w_full[name], err_msg=name)
    with h5py.File(ck, "r") as f, h5py.File(full_ck, "r") as g:
        for kind in ("exp_avg", "exp_avg_sq"):  # the whole state, gathered from the shards
            np.testing.assert_array_equal(f["optimizer/" + kind][()], g["optimizer/" + kind][()], err_msg=kind)
    with h5py.File(rec, "r") as f:
        seg = f["train_segments"][()]
    assert [(int(r["first_step"]), int(r["last_step"])) for r in seg] == [(1, 3), (4, STEPS)]
    assert [r["status"].decode() for r in seg] == [f"interrupted: SIGUSR1 after step 3 of {STEPS}", "completed"]
    assert seg[1]["resumed_from"].decode() == ck
    assert attr(rec, "status") == "completed"


def test_resume_on_another_rank_count(tmp_path):
    flags = [*MODEL, *QUIET, "--shard-optimizer", "zero1", "--steps", str(STEPS)]
    full = str(tmp_path / "full.h5")
    run(2, [*flags, "--out", full])
    rec, ck = str(tmp_path / "r.h5"), str(tmp_path / "ck.h5")
    run(2, [*flags, "--out", rec, "--save", ck], env={"PARATRAIN_FAULT": "signal:4:SIGTERM"}, check_rc=EXIT_STOPPED)
    one = run(1, ["--resume", ck, "--out", rec])  # a 2-rank ZeRO-1 state continued by one process
    assert "resuming on 1 ranks a run saved by 2" in one.stdout, one.stdout
    _, loss_full, _ = steps(full)
    s, loss, _ = steps(rec)
    assert list(s) == list(range(1, STEPS + 1))
    np.testing.assert_allclose(loss, loss_full, rtol=1e-5)


def _checkpoint(tmp_path):
    ck = str(tmp_path / "ck.h5")
    run(1, [*MODEL, "--steps", "2", "--save", ck, "--out", str(tmp_path / "r.h5")])
    return ck


# (flags given again with other values, words the one error must hold)
CONFLICTS = [
    (["--num-heads", "4"], ["--num-heads 4", "checkpoint's is 2"]),
    (["--d-model", "64"], ["--d-model 64"]),
    (["--batch-size", "8"], ["--batch-size 8", "checkpoint's is 4"]),
    (["--context-length", "32"], ["--context-length 32"]),
    (["--optimizer", "sgd"], ["--optimizer sgd", "adamw"]),
    (["--lr", "0.001"], ["--lr 0.001"]),
    (["--seed", "7"], ["--seed 7", "1337"]),
    (["--sampling", "sequential"], ["--sampling sequential", "random"]),
    (["--shard-optimizer", "zero1"], ["--shard-optimizer zero1", "none"]),
    (["--precision", "tf32"], ["--precision tf32", "fp32"]),
    (["--warmup-steps", "5"], ["--warmup-steps 5"]),
    (["--grad-dtype", "bf16"], ["--grad-dtype bf16", "fp32"]),
    (["--residual-dtype", "bf16"], ["--residual-dtype bf16", "fp32"]),
    (["--num-heads", "4", "--seed", "7", "--lr", "0.001"], ["3 options differ", "--num-heads 4", "--seed 7", "--lr 0.001"]),
]


@pytest.mark.parametrize("given,words", CONFLICTS, ids=[" ".join(c[0]) for c in CONFLICTS])
def test_conflicting_options_are_refused(given, words, tmp_path):
    ck = _checkpoint(tmp_path)
    before = sha(ck)
    proc = run(1, ["--resume", ck, "--steps", "4", "--out", str(tmp_path / "r2.h5"), *given], check_rc=1)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert "--init-from" in lines[0]  # what to do instead
    assert sha(ck) == before and not os.path.exists(tmp_path / "r2.h5")


def test_options_that_may_change_and_the_same_values_are_accepted(tmp_path):
    ck = _checkpoint(tmp_path)
    run(1, ["--resume", ck, *MODEL, "--steps", "3", "--out", str(tmp_path / "r3.h5"),
            "--save", str(tmp_path / "ck3.h5"), "--save-every", "1", "--comm-timeout", "60"])
    assert attr(str(tmp_path / "ck3.h5"), "step") == 3


def test_the_data_file_is_compared_by_content_not_path(tmp_path):
    ck = _checkpoint(tmp_path)
    copy = str(tmp_path / "moved.npy")
    shutil.copy(SAMPLE, copy)
    run(1, ["--resume", ck, "--steps", "3", "--data", copy, "--out", str(tmp_path / "a.h5")])
    other = str(tmp_path / "other.npy")
    tokens = np.load(SAMPLE)
    tokens[:10] = (tokens[:10] + 1) % 1000
    np.save(other, tokens)
    proc = run(1, ["--resume", ck, "--steps", "3", "--data", other, "--out", str(tmp_path / "b.h5")], check_rc=1)
    assert "not the one the run was trained on" in proc.stderr and "other.npy" in proc.stderr, proc.stderr


def test_resume_auto_starts_afresh_then_finishes_and_a_requeue_after_the_end_does_nothing(tmp_path):
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    run(1, [*MODEL, "--steps", "3", "--save", ck, "--out", rec, "--resume", "auto"])
    assert attr(ck, "step") == 3
    again = run(1, ["--resume", "auto", "--save", ck, "--out", rec, "--steps", "3"])
    assert "the run is complete" in again.stdout, again.stdout
    assert list(steps(rec)[0]) == [1, 2, 3]
    # By hand, asking to resume a finished run is a mistake.
    proc = run(1, ["--resume", ck, "--out", str(tmp_path / "x.h5"), "--steps", "3"], check_rc=1)
    assert "nothing left to do" in proc.stderr


def test_a_resumed_run_never_continues_a_record_of_another_kind(tmp_path):
    ck = _checkpoint(tmp_path)
    other = str(tmp_path / "bench.h5")
    subprocess.run([BIN, "bench", "model", "--model", "tiny", "--context-length", "16", "--precision", "fp32", "--attention",
                    "naive", "--warmup", "0", "--steps", "1", "--batch-size", "1", "--device", "cpu", "--out", other],
                   check=True, capture_output=True, timeout=TIMEOUT_S)
    before = sha(other)
    proc = run(1, ["--resume", ck, "--steps", "3", "--out", other], check_rc=1)
    assert "not the record of a train run" in proc.stderr, proc.stderr
    assert sha(other) == before


def test_jsonl_lines_parse_and_match_the_record(tmp_path):
    rec, log = str(tmp_path / "r.h5"), str(tmp_path / "log.jsonl")
    proc = run(1, [*MODEL, "--steps", "5", "--log-every", "1", "--log-format", "jsonl", "--log-file", log,
                   "--save", str(tmp_path / "ck.h5"), "--save-every", "2", "--out", rec])
    stdout_events = [json.loads(l) for l in proc.stdout.splitlines()]  # every stdout line is JSON
    file_events = [json.loads(l) for l in open(log)]
    assert [e["event"] for e in file_events] == [e["event"] for e in stdout_events]
    kinds = [e["event"] for e in file_events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("step") == 5 and kinds.count("checkpoint") == 3
    for e in file_events:
        assert {"time", "elapsed_s"} <= e.keys()
    s, loss, gn = steps(rec)
    step_events = [e for e in file_events if e["event"] == "step"]
    assert [e["step"] for e in step_events] == list(s)
    assert [e["loss"] for e in step_events] == list(loss)  # %.17g: the same doubles
    assert [e["grad_norm"] for e in step_events] == list(gn)
    assert step_events[-1]["eta_s"] == 0
    end = file_events[-1]
    assert end["status"] == attr(rec, "status") == "completed" and end["last_step"] == 5 and end["exit_code"] == 0
    # A resumed run appends to the same log.
    run(1, ["--resume", str(tmp_path / "ck.h5"), "--steps", "6", "--log-file", log, "--out", rec])
    again = [json.loads(l) for l in open(log)]
    assert len(again) > len(file_events) and again[len(file_events)]["event"] == "start"
    assert again[len(file_events)]["start_step"] == 5


def test_benchmarks_report_configuration_k_of_n_and_json_lines_that_match_the_record(tmp_path):
    out = str(tmp_path / "bm.h5")
    text = subprocess.run([BIN, "bench", "model", "--model", "tiny", "--context-length", "16,32", "--precision", "fp32",
                           "--attention", "naive", "--warmup", "0,1", "--steps", "1", "--batch-size", "1", "--device", "cpu",
                           "--out", out], capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout
    lines = [l for l in text.splitlines() if l.startswith("[")]
    assert [l.split("]")[0] for l in lines] == ["[1/4", "[2/4", "[3/4", "[4/4"], text
    assert all("elapsed " in l and "eta " in l for l in lines)
    # JSON lines from 2 MPI ranks: rank 0 alone writes them.
    log, rec = str(tmp_path / "ar.jsonl"), str(tmp_path / "ar.h5")
    proc = subprocess.run([*MPI, "2", BIN, "bench", "allreduce", "--backend", "mpi", "--bytes", "64K,1M", "--collective",
                           "all_reduce,broadcast", "--steps", "2", "--warmup", "1", "--out", rec, "--log-format", "jsonl",
                           "--log-file", log], capture_output=True, text=True, timeout=TIMEOUT_S, check=True)
    events = [json.loads(l) for l in proc.stdout.splitlines()]
    assert events == [json.loads(l) for l in open(log)]
    configs = [e for e in events if e["event"] == "config"]
    assert [(e["index"], e["of"]) for e in configs] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    with h5py.File(rec, "r") as f:
        table = f["allreduce"][()]
    assert [e["busbw_GBps"] for e in configs] == list(table["busbw_GBps"])
    assert events[0]["event"] == "start" and events[-1] == {**events[-1], "event": "end", "configurations": 4}


# ---- the learning-rate schedule keeps its length across resumes (issue 47 I) -------------------
SCHEDULE = [*MODEL, *QUIET, "--lr", "0.003"]  # --warmup-steps 2; --min-lr: lr/10


def lrs(path):
    with h5py.File(path, "r") as f:
        t = f["train_steps"][()]
        return dict(zip(t["step"].tolist(), t["lr"].tolist()))


def test_a_longer_resumed_run_keeps_the_schedule_and_says_so(tmp_path):
    # --steps 10, then --resume --steps 20: the decay still ends at step 10 (no jump back up at
    # step 11); steps 11-20 run at the final learning rate, and a note says how to stretch it.
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    run(1, [*SCHEDULE, "--steps", "10", "--save", ck, "--out", rec])
    proc = run(1, ["--resume", ck, "--steps", "20", "--save", ck, "--out", rec])
    notes = [l for l in proc.stderr.splitlines() if "schedule" in l]
    assert len(notes) == 1 and "note: --steps 20" in notes[0] and "--cosine-steps 20" in notes[0], proc.stderr
    lr = lrs(rec)
    assert sorted(lr) == list(range(1, 21))
    assert all(lr[s] == pytest.approx(3e-4) for s in range(10, 21)), lr
    assert all(lr[s] >= lr[s + 1] for s in range(2, 20)), "the learning rate never rises after warm-up"
    # And the checkpoint keeps that length for the next resume: no note, no change.
    again = run(1, ["--resume", ck, "--steps", "22", "--out", rec])
    assert lrs(rec)[22] == pytest.approx(3e-4) and "warning" not in again.stderr


def test_cosine_steps_given_again_changes_the_schedule_with_one_warning(tmp_path):
    full = str(tmp_path / "full.h5")
    run(1, [*SCHEDULE, "--steps", "20", "--out", full])  # the schedule of 20 steps from the start
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    run(1, [*SCHEDULE, "--steps", "10", "--save", ck, "--out", rec])
    proc = run(1, ["--resume", ck, "--steps", "20", "--cosine-steps", "20", "--out", rec])
    warnings = [l for l in proc.stderr.splitlines() if "warning" in l]
    assert len(warnings) == 1, proc.stderr
    assert "--cosine-steps 20 changes the learning-rate schedule" in warnings[0] and "ended at step 10" in warnings[0]
    lr, lr_full = lrs(rec), lrs(full)
    for s in range(11, 21):
        assert lr[s] == pytest.approx(lr_full[s]), s  # the new schedule from step 11 on


def test_a_checkpoint_from_before_the_schedule_was_saved_keeps_its_runs_length(tmp_path):
    # Checkpoints written before this change stored config.cosine-steps as given (0: --steps);
    # their schedule's length is the --steps of the run that saved them.
    ck, rec = str(tmp_path / "ck.h5"), str(tmp_path / "r.h5")
    run(1, [*SCHEDULE, "--steps", "6", "--save", ck, "--out", rec])
    with h5py.File(ck, "r+") as f:
        f.attrs["config.cosine-steps"] = "0"
    run(1, ["--resume", ck, "--steps", "12", "--out", rec])
    lr = lrs(rec)
    assert all(lr[s] == pytest.approx(3e-4) for s in range(6, 13)), lr
