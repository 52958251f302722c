"""The Slurm sweeps on a real single-node Slurm (scripts/slurm_local.sh) in CPU mode with tiny
configurations: every job completes, each leaves a valid run record, and the report job, which
depends on all of them, writes its tables; the multi-rank jobs were placed with --nodes and
--ntasks-per-node. Then preemption: a training job whose batch shell gets SIGUSR1 (what
--signal=B:USR1@N does before the time limit) checkpoints, requeues itself and continues from the
checkpoint `latest` names; stopped again with that newest checkpoint torn, it continues from the
one before, and finishes, continuing its record and keeping its newest PT_KEEP_LAST checkpoints.
The daemons are always stopped. A benchmark the binary does not implement yet (a placeholder
subcommand) is left out of the submission, with a note."""
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
    if "train" in kinds:  # one checkpoint, at the end (PT_SAVE_EVERY is past the CPU sweep's steps)
        ckdir = os.path.join(out, "checkpoints", "train_n1")
        assert checkpoint_dir(ckdir)[:2] == ("step_000005.h5", ["step_000005.h5"]), checkpoint_dir(ckdir)

    report = os.path.join(out, "report")
    md = open(os.path.join(report, "report.md")).read()
    for k in kinds:
        assert f"## {KINDS[k][2]}" in md, f"report.md lacks '{KINDS[k][2]}'"
    for k in kinds:
        assert os.path.getsize(os.path.join(report, "csv", f"{CSV[k]}.csv")) > 0
    assert os.path.exists(os.path.join(report, "report.tex"))
    assert os.listdir(os.path.join(report, "plots"))


# Preemption: tiny steps (~40 ms on one CPU), so the run would take ~12 s; it is stopped after a
# few steps and again after its step-100 checkpoint, and the job's third run does the rest.
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


def checkpoint_dir(path):
    """(the checkpoint `latest` names, the step checkpoints there, the run id `latest` gives) of a
    train --save-dir directory."""
    name, run = open(os.path.join(path, "latest")).read().splitlines()
    assert run.startswith("run "), run
    return name, sorted(n for n in os.listdir(path) if re.fullmatch(r"step_\d{6,}\.h5", n)), run[4:]


def checkpoint_step(path):
    with h5py.File(path, "r") as f:
        return int(f.attrs["step"])


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
                         env=dict(env, PT_TRAIN_FLAGS=PREEMPT_FLAGS, PT_SAVE_EVERY="100", PT_KEEP_LAST="2"))
    assert sub.returncode == 0, f"submit_all failed:\n{sub.stdout}\n{sub.stderr}"
    jobs = dict(line.split() for line in sub.stdout.splitlines() if line.strip())
    job = jobs["train_n1"]
    rec, ckdir = os.path.join(out, "train_n1.h5"), os.path.join(out, "checkpoints", "train_n1")

    def log():
        path = os.path.join(out, "logs", f"pt-train-{job}.out")
        return open(path, errors="replace").read() if os.path.exists(path) else ""

    def fields():
        return job_fields(env, job).get(job, {})

    def run_log(restart):  # the part of the log of one run of the job (--open-mode=append)
        parts = log().split(f"job {job} restart {restart} ")
        return parts[1].split(f"job {job} restart {restart + 1} ")[0] if len(parts) > 1 else ""

    def stop_and_requeue(restart, after_step, checkpoint=None):
        """SIGUSR1 to the batch shell alone (what --signal=B:USR1@N does near the limit) once run
        `restart` logged `after_step` steps (and `latest` names `checkpoint`); the run stops at a
        step boundary, exit 75, and the job goes back to the queue. Returns the step it stopped after."""
        def ready():
            if fields().get("JobState") in TERMINAL:
                return True
            steps = [int(m) for m in re.findall(r"^step +(\d+)/", run_log(restart), re.M)]
            return steps and max(steps) >= after_step and (
                checkpoint is None or os.path.exists(os.path.join(ckdir, "latest")) and
                checkpoint_dir(ckdir)[0] == checkpoint)
        wait_until(f"step {after_step} of run {restart} in the log", ready, 60, log)
        assert fields().get("JobState") == "RUNNING", f"{fields().get('JobState')} before the signal:\n{log()}"
        signalled = subprocess.run(["scancel", "--batch", "--signal=USR1", job], capture_output=True, text=True,
                                   env=env)
        assert signalled.returncode == 0, signalled.stderr

        def requeued_or_ended():
            f = fields()
            pending_again = f.get("Restarts") == str(restart + 1) and f.get("JobState") == "PENDING"
            return f if pending_again or f.get("JobState") in TERMINAL else None
        state = wait_until("the job to be requeued", requeued_or_ended, 60, log).get("JobState")
        assert state == "PENDING", f"not requeued: {state}\n{log()}"
        status, steps, _ = record(rec)
        m = re.fullmatch(rf"interrupted: SIGUSR1 after step (\d+) of {PREEMPT_STEPS}", status)
        assert m, f"run {restart}'s record status: {status!r}\n{log()}"
        stopped = int(m.group(1))
        assert stopped < PREEMPT_STEPS - 50, f"the run got too far before the signal:\n{log()}"
        assert steps == list(range(1, stopped + 1)), f"run {restart}'s rows {steps[:3]}..{steps[-3:]}, stopped at {stopped}"
        assert "requeueing job" in run_log(restart), log()
        return stopped

    def pending_reason():
        reason = fields().get("Reason")
        return reason if reason not in (None, "None") else None

    def release():
        # Slurm holds a requeued job for its credential lifetime (AuthInfo cred_expire, 120 s by
        # default): Reason=BeginTime. Let it start now.
        reason = wait_until("the scheduler to give the pending job a reason", pending_reason, 30)
        assert reason == "BeginTime", f"requeued job pending for {reason} (expected BeginTime)"
        # slurmd revoked the last run's credential when the job was requeued, and compares times in
        # whole seconds: a new credential issued within the same second counts as revoked, and the
        # relaunch fails ("already killed, do not launch batch job"; the job ends FAILED with no
        # output). cred_expire keeps real jobs far from this; here, let a second pass first.
        time.sleep(2)
        released = subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], capture_output=True,
                                  text=True, env=env)
        assert released.returncode == 0, released.stderr

    def step_name(k):
        return f"step_{k:06d}.h5"

    # Run 0 stops after a few steps: its checkpoint at the stop is the one `latest` names.
    first = stop_and_requeue(0, 3)
    assert first < 100, f"run 0 got to its step-100 checkpoint before the signal:\n{log()}"
    name, saved, run_id = checkpoint_dir(ckdir)
    assert (name, saved) == (step_name(first), [step_name(first)]), (name, saved)
    assert checkpoint_step(os.path.join(ckdir, name)) == first, "the checkpoint is not the one of the stopping step"
    release()

    # Run 1 continues from `latest`, saves step 100 and is stopped again a few steps later: the
    # newest 2 of the run's checkpoints stay (PT_KEEP_LAST=2).
    second = stop_and_requeue(1, 105, step_name(100))
    assert f"resuming {os.path.join(ckdir, step_name(first))} after step {first}" in run_log(1), run_log(1)
    name, saved, second_id = checkpoint_dir(ckdir)
    assert (name, saved, second_id) == (step_name(second), [step_name(100), step_name(second)], run_id), \
        (name, saved, second_id)
    # Its newest checkpoint is torn (a node lost before the file server wrote it all): the
    # requeued run skips it with a warning and continues from the one before.
    torn = os.path.join(ckdir, step_name(second))
    os.truncate(torn, os.path.getsize(torn) // 2)
    release()

    # Run 2 finishes; the report waited for it (afterok).
    states = wait_for_jobs(env, jobs, timeout=180)
    assert states == {"train_n1": {job: "COMPLETED"}, "report": {jobs["report"]: "COMPLETED"}}, \
        f"job states {states}\n{logs(out)}"
    assert fields().get("Restarts") == "2"
    text = run_log(2)
    assert "skipping a checkpoint that does not load" in text and torn in text, text
    assert f"resuming {os.path.join(ckdir, step_name(100))} after step 100" in text, text
    status, steps, attrs = record(rec)
    assert status == "completed", status
    assert steps == list(range(1, PREEMPT_STEPS + 1)), f"rows {steps[:3]}..{steps[-3:]} ({len(steps)})"
    assert attrs.get("slurm_job_id") == job
    assert attrs.get("slurm_restart_count", "2") == "2", attrs.get("slurm_restart_count")
    assert attrs.get("run_id") == run_id, (attrs.get("run_id"), run_id)
    # The run's newest 2 checkpoints; the torn one stays (it cannot be read, so it is not known
    # to be the run's own; paratrain removes only those).
    name, saved, last_id = checkpoint_dir(ckdir)
    assert (name, last_id) == (step_name(PREEMPT_STEPS), run_id), (name, last_id)
    assert saved == sorted([step_name(200), step_name(300), step_name(second)]), saved
    assert checkpoint_step(os.path.join(ckdir, name)) == PREEMPT_STEPS
