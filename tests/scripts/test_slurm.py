"""The Slurm sweeps on a real single-node Slurm (scripts/slurm_local.sh) in CPU mode with tiny
configurations: every job completes, each leaves a valid run record, and the report job, which
depends on all of them, writes its tables; the multi-rank jobs were placed with --nodes and
--ntasks-per-node. Then preemption: a training job whose batch shell gets SIGUSR1 (what
--signal=B:USR1@N does before the time limit) checkpoints, requeues itself and finishes in its
second run, continuing its record. The daemons are always stopped. A benchmark the binary does not
implement yet (a placeholder subcommand) is left out of the submission, with a note."""
import os
import re
import subprocess
import sys
import time

import h5py
import pytest

from conftest import REPO

SLURM_LOCAL = os.path.join(REPO, "scripts", "slurm_local.sh")
SUBMIT = os.path.join(REPO, "slurm", "submit_all.sh")
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}
TIMEOUT_S = 600


def slurm_missing():
    proc = subprocess.run([SLURM_LOCAL, "check"], capture_output=True, text=True)
    return proc.stderr.strip() if proc.returncode != 0 else ""


_MISSING = slurm_missing()
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"Slurm test skipped: {_MISSING}")


def binary():
    path = os.environ.get("PARATRAIN_BINARY") or os.path.join(REPO, "build", "paratrain")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no paratrain binary at {path} (build it, or run through ctest)")
    return path


# benchmark → (subcommand, result files of the CPU sweep with their table, report heading)
KINDS = {
    "model": (["bench", "model"], {"model_tiny_ctx32_fp32.h5": "model", "model_tiny_ctx64_fp32.h5": "model"},
              "Model timings per size and context"),
    "attention": (["bench", "attention"], {"attention_naive.h5": "attention", "attention_flash.h5": "attention"},
                  "Attention latency and memory"),
    "allreduce": (["bench", "allreduce"], {"allreduce_n2.h5": "allreduce"}, "Collectives by size, ranks and backend"),
    "ddp": (["bench", "ddp"], {"ddp_n2_fp32.h5": "ddp"}, "Data-parallel strategies and bucket sizes"),
    "train": (["train"], {"train_n1.h5": "train_steps"}, "Training runs"),
}
JOB_NAMES = {"model": "model", "attention": "attention", "allreduce": "allreduce_n2", "ddp": "ddp_n2",
             "train": "train_n1"}
CSV = {"model": "model_timings", "attention": "attention", "allreduce": "allreduce", "ddp": "ddp", "train": "training"}


def resumes_auto(bin_path):
    """Whether `train --resume` takes `auto` (slurm/train.sbatch passes it)."""
    text = subprocess.run([bin_path, "train", "--help"], capture_output=True, text=True, timeout=60).stdout
    # the option's help: from its line to the next option's (two spaces in) or section (no indent)
    block = re.search(r"^ {2}--resume\b.*?(?=^ {2}-|^\S|\Z)", text, re.S | re.M)
    return bool(block and "auto" in block.group(0))


def implemented(bin_path):
    """The benchmarks this binary implements (a placeholder subcommand says 'not implemented yet')."""
    kinds = []
    for kind, (sub, _, _) in KINDS.items():
        proc = subprocess.run([bin_path, *sub, "--help"], capture_output=True, text=True, timeout=60)
        if "not implemented yet" in proc.stdout + proc.stderr:
            print(f"test_slurm: {' '.join(sub)} is not implemented yet: its job is left out")
        elif kind == "train" and not resumes_auto(bin_path):
            print("test_slurm: train --resume does not take 'auto' yet (train.sbatch needs it): its job is left out")
        else:
            assert proc.returncode == 0, f"{' '.join(sub)} --help failed:\n{proc.stderr}"
            kinds.append(kind)
    return kinds


def job_fields(env, job_id):
    """{task id: {field: value}} of `scontrol show job -o` (array jobs: one entry per task)."""
    proc = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, env=env)
    jobs = {}
    for line in proc.stdout.splitlines():
        fields = dict(re.findall(r"(\S+?)=(\S*)", line))
        if "JobId" in fields:
            jobs[fields["JobId"]] = fields
    return jobs


def job_states(env, job_id):
    """{task id: state} of a job (array jobs: one entry per task); {} once Slurm forgot it."""
    return {jid: f.get("JobState") for jid, f in job_fields(env, job_id).items()}


def wait_for_jobs(env, jobs, timeout=TIMEOUT_S):
    """{name: {task id: state}} once every job of {name: id} is in a terminal state (or at the timeout)."""
    deadline = time.time() + timeout
    states = {}
    while time.time() < deadline:
        states = {name: job_states(env, jid) for name, jid in jobs.items()}
        if all(s and set(s.values()) <= TERMINAL for s in states.values()):
            break
        time.sleep(1)
    return states


SLURM_LOG_DIR = []  # the local Slurm's log directory, once the fixture started it


def logs(out):
    """The jobs' logs, then the daemons' last lines (why a job failed before its script ran)."""
    paths = [os.path.join(out, "logs", name) for name in sorted(os.listdir(os.path.join(out, "logs")))]
    paths += [os.path.join(d, name) for d in SLURM_LOG_DIR for name in ("slurmctld.log", "slurmd.log")]
    text = []
    for path in paths:
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                text.append(f"--- {os.path.basename(path)}\n{f.read()[-3000:]}")
    return "\n".join(text)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A local Slurm for this module's tests: the environment its clients need. Always stopped."""
    state_dir = str(tmp_path_factory.mktemp("slurm"))
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin", PT_PYTHON=sys.executable)
    env.pop("SLURM_CONF", None)
    for k in [k for k in env if k.startswith("PT_") and k != "PT_PYTHON"]:
        env.pop(k)  # the caller's sweep settings would change what is submitted
    started = subprocess.run([SLURM_LOCAL, "start", state_dir], capture_output=True, text=True, env=env, timeout=120)
    try:
        assert started.returncode == 0, f"slurm_local start failed:\n{started.stdout}\n{started.stderr}"
        env["SLURM_CONF"] = re.search(r"export SLURM_CONF=(\S+)", started.stdout).group(1)
        SLURM_LOG_DIR[:] = [os.path.join(state_dir, "log")]
        yield env
    finally:
        stopped = subprocess.run([SLURM_LOCAL, "stop", state_dir], capture_output=True, text=True, env=env,
                                 timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        for name in ("slurmctld", "slurmd", "munged"):
            assert not os.path.exists(os.path.join(state_dir, "pids", name)), f"{name} was not stopped"


def test_sweeps_on_local_slurm(slurm, tmp_path):
    from paratrain_report import records

    env, bin_path = slurm, binary()
    out = str(tmp_path / "results")
    kinds = implemented(bin_path)
    assert kinds, "the binary implements none of the benchmarks"
    sub = subprocess.run([SUBMIT, "--cpu", "--out", out, "--bin", bin_path, "--time", "00:10:00",
                          "--only", ",".join(kinds)], capture_output=True, text=True, env=env, timeout=120)
    assert sub.returncode == 0, f"submit_all failed:\n{sub.stdout}\n{sub.stderr}"
    jobs = dict(line.split() for line in sub.stdout.splitlines() if line.strip())
    assert list(jobs) == [JOB_NAMES[k] for k in kinds] + ["report"]

    states = wait_for_jobs(env, jobs)
    summary = {name: sorted(set(s.values())) for name, s in states.items()}
    assert all(v == ["COMPLETED"] for v in summary.values()), f"job states {summary}\n{logs(out)}"
    # the multi-rank jobs were placed per node: one node, 2 tasks on it
    for name in ("allreduce_n2", "ddp_n2"):
        if name in jobs:
            fields = next(iter(job_fields(env, jobs[name]).values()))
            assert (fields["NumNodes"], fields["NumTasks"], fields["NtasksPerN:B:S:C"].split(":")[0]) == \
                ("1", "2", "2"), f"{name}: {fields}"
    if "model" in kinds:
        assert len(states["model"]) == 2  # array tasks: tiny × {32, 64} × fp32
    if "attention" in kinds:
        assert len(states["attention"]) == 2  # array tasks: the naive and flash studies

    expected = {f: t for k in kinds for f, t in KINDS[k][1].items()}
    assert sorted(f for f in os.listdir(out) if f.endswith(".h5")) == sorted(expected)
    for name, table in expected.items():
        run = records.load_file(os.path.join(out, name))  # raises on a malformed file
        assert len(run.tables[table]) > 0, f"{name}: empty /{table}"
        if name.startswith(("allreduce_n2", "ddp_n2")):
            assert run.attrs["world_size"] == 2, f"{name}: not run on 2 ranks"
            assert run.attrs.get("slurm_ntasks_per_node") == "2", f"{name}: not placed with --ntasks-per-node=2"
    if "train" in kinds:
        assert os.path.isfile(os.path.join(out, "checkpoints", "train_n1.h5")), "train wrote no checkpoint"

    report = os.path.join(out, "report")
    md = open(os.path.join(report, "report.md")).read()
    for k in kinds:
        assert f"## {KINDS[k][2]}" in md, f"report.md lacks '{KINDS[k][2]}'"
    for k in kinds:
        assert os.path.getsize(os.path.join(report, "csv", f"{CSV[k]}.csv")) > 0
    assert os.path.exists(os.path.join(report, "report.tex"))
    assert os.listdir(os.path.join(report, "plots"))


# Preemption: tiny steps (~40 ms on one CPU), so the run would take ~12 s; it is stopped after a
# few, and the requeued run does the rest.
PREEMPT_STEPS = 300
PREEMPT_FLAGS = f"--model tiny --context-length 32 --batch-size 2 --steps {PREEMPT_STEPS}"


def wait_until(what, predicate, timeout, on_fail=lambda: ""):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n{on_fail()}")


def record(path):
    """(status attribute, steps of /train_steps, every attribute) of a train record."""
    with h5py.File(path, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        return str(attrs.get("status")), [int(x) for x in f["train_steps"]["step"][()]], attrs


def test_a_train_job_told_to_stop_checkpoints_requeues_itself_and_finishes(slurm, tmp_path):
    env, bin_path = slurm, binary()
    if not resumes_auto(bin_path):
        pytest.skip("train --resume does not take 'auto' yet: train.sbatch's requeue cannot resume")
    out = str(tmp_path / "results")
    sub = subprocess.run([SUBMIT, "--cpu", "--out", out, "--bin", bin_path, "--time", "00:10:00", "--only", "train"],
                         capture_output=True, text=True, timeout=120,
                         env=dict(env, PT_TRAIN_FLAGS=PREEMPT_FLAGS, PT_SAVE_EVERY="100"))
    assert sub.returncode == 0, f"submit_all failed:\n{sub.stdout}\n{sub.stderr}"
    jobs = dict(line.split() for line in sub.stdout.splitlines() if line.strip())
    job = jobs["train_n1"]
    rec, ck = os.path.join(out, "train_n1.h5"), os.path.join(out, "checkpoints", "train_n1.h5")

    def log():
        path = os.path.join(out, "logs", f"pt-train-{job}.out")
        return open(path, errors="replace").read() if os.path.exists(path) else ""

    def fields():
        return job_fields(env, job).get(job, {})

    def steps_logged():
        return [int(m) for m in re.findall(r"^step +(\d+)/", log(), re.M)]

    def requeued_or_ended():
        f = fields()
        pending_again = f.get("Restarts") == "1" and f.get("JobState") == "PENDING"
        return f if pending_again or f.get("JobState") in TERMINAL else None

    def pending_reason():
        reason = fields().get("Reason")
        return reason if reason not in (None, "None") else None

    # A few steps, then SIGUSR1 to the batch shell alone: what --signal=B:USR1@N does near the limit.
    wait_until("3 steps in the log", lambda: len(steps_logged()) >= 3 or fields().get("JobState") in TERMINAL, 60, log)
    assert fields().get("JobState") == "RUNNING", f"{fields().get('JobState')} before the signal:\n{log()}"
    assert max(steps_logged()) < PREEMPT_STEPS - 50, f"the run got too far before the signal:\n{log()}"
    signalled = subprocess.run(["scancel", "--batch", "--signal=USR1", job], capture_output=True, text=True, env=env)
    assert signalled.returncode == 0, signalled.stderr

    # The first run stops at a step boundary, exit 75, and the job goes back to the queue.
    first = wait_until("the job to be requeued", requeued_or_ended, 60, log)
    assert first.get("JobState") == "PENDING", f"not requeued: {first.get('JobState')}\n{log()}"
    status, steps, _ = record(rec)
    m = re.fullmatch(rf"interrupted: SIGUSR1 after step (\d+) of {PREEMPT_STEPS}", status)
    assert m, f"first run's record status: {status!r}\n{log()}"
    stopped = int(m.group(1))
    assert steps == list(range(1, stopped + 1)), f"first run's rows {steps[:3]}..{steps[-3:]}, stopped at {stopped}"
    with h5py.File(ck, "r") as f:
        assert int(f.attrs["step"]) == stopped, "the checkpoint is not the one of the stopping step"
    assert "requeueing job" in log(), log()
    # Slurm holds a requeued job for its credential lifetime (AuthInfo cred_expire, 120 s by
    # default): Reason=BeginTime. Let it start now.
    reason = wait_until("the scheduler to give the pending job a reason", pending_reason, 30)
    assert reason == "BeginTime", f"requeued job pending for {reason} (expected BeginTime)"
    # slurmd revoked the first run's credential when the job was requeued, and compares times in
    # whole seconds: a new credential issued within the same second counts as revoked, and the
    # relaunch fails ("already killed, do not launch batch job"; the job ends FAILED with no
    # output). cred_expire keeps real jobs far from this; here, let a second pass first.
    time.sleep(2)
    released = subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], capture_output=True,
                              text=True, env=env)
    assert released.returncode == 0, released.stderr

    # The second run resumes from the checkpoint and finishes; the report waited for it (afterok).
    states = wait_for_jobs(env, jobs, timeout=180)
    assert states == {"train_n1": {job: "COMPLETED"}, "report": {jobs["report"]: "COMPLETED"}}, \
        f"job states {states}\n{logs(out)}"
    assert fields().get("Restarts") == "1"
    status, steps, attrs = record(rec)
    assert status == "completed", status
    assert steps == list(range(1, PREEMPT_STEPS + 1)), f"rows {steps[:3]}..{steps[-3:]} ({len(steps)})"
    assert attrs.get("slurm_job_id") == job
    assert attrs.get("slurm_restart_count", "1") == "1", attrs.get("slurm_restart_count")
    with h5py.File(ck, "r") as f:
        assert int(f.attrs["step"]) == PREEMPT_STEPS
    text = log()  # one log for both runs (--open-mode=append)
    assert f"job {job} restart 0 " in text and f"job {job} restart 1 " in text, text
    assert f"after step {stopped}" in text.split(f"job {job} restart 1 ")[1], "the second run did not resume"
