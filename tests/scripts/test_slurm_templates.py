"""The Slurm scripts without Slurm (fast): how slurm/submit_all.sh --dry-run turns rank counts and
PT_GPUS_PER_NODE / PT_NODES / PT_GPU_BIND into --nodes, --ntasks-per-node and GPU options, which
layouts it refuses (one line, exit 2, nothing submitted), the srun line of slurm/common.sh, and
slurm/train.sbatch's signal handling run by bash against a stand-in srun and scontrol: SIGUSR1
reaches the job step, exit 75 requeues the job, SIGTERM never does, the resume/overwrite
arguments of a first run and of a requeued one, and that the script itself removes no checkpoint;
GPU mode's --device cuda in every job; and where a template finds common.sh and the program in an
installed tree."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import REPO

SUBMIT = os.path.join(REPO, "slurm", "submit_all.sh")
COMMON = os.path.join(REPO, "slurm", "common.sh")
TRAIN = os.path.join(REPO, "slurm", "train.sbatch")
# Settings of the caller's shell that would change the defaults under test.
PT_VARS = [k for k in os.environ if k.startswith(("PT_", "SLURM_"))]


def clean_env(**settings):
    env = {k: v for k, v in os.environ.items() if k not in PT_VARS}
    env.update({k: str(v) for k, v in settings.items()})
    return env


def dry_run(tmp_path, only, *extra, **settings):
    """submit_all.sh --dry-run: (exit code, {job name: its sbatch line}, stderr lines)."""
    proc = subprocess.run([SUBMIT, "--dry-run", "--only", only, "--bin", "/bin/true", "--out", str(tmp_path / "out"),
                           *extra], capture_output=True, text=True, env=clean_env(**settings), timeout=60)
    names = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("sbatch ")]
    assert proc.returncode != 0 or len(names) == len(lines), (proc.stdout, proc.stderr)
    return proc.returncode, dict(zip(names, lines)), proc.stderr.splitlines()


def opts(line):
    """The --name=value options of an sbatch line, as a dict (flags without value map to True)."""
    out = {}
    for word in line.split():
        m = re.fullmatch(r"--([a-z-]+)(?:=(.*))?", word)
        if m:
            assert m.group(1) not in out, f"--{m.group(1)} given twice: {line}"
            out[m.group(1)] = True if m.group(2) is None else m.group(2)
    return out


def layout(line):
    o = opts(line)
    return {k: o[k] for k in ("nodes", "ntasks-per-node", "ntasks", "gpus-per-node", "gpus-per-task", "overcommit")
            if k in o}


# ---- the layout: rank count and GPUs per node → nodes, tasks per node, GPUs --------------------

@pytest.mark.parametrize("bind, gpus", [
    ("per-node", {"gpus-per-node": "8"}),
    ("per-task", {"gpus-per-task": "1"}),
    ("none", {}),
])
def test_sixteen_ranks_are_two_nodes_of_eight_with_the_gpu_options_of_the_binding(tmp_path, bind, gpus):
    rc, jobs, err = dry_run(tmp_path, "train,allreduce,ddp", PT_TRAIN_RANKS=16, PT_ALLREDUCE_RANKS=16,
                            PT_DDP_RANKS=16, PT_GPUS_PER_NODE=8, PT_GPU_BIND=bind)
    assert rc == 0, err
    assert list(jobs) == ["train_n16", "allreduce_n16", "ddp_n16", "report"]
    for name in ("train_n16", "allreduce_n16", "ddp_n16"):
        assert layout(jobs[name]) == {"nodes": "2", "ntasks-per-node": "8", **gpus}, jobs[name]
        assert "--nodes=2 --ntasks-per-node=8" in jobs[name]
    assert opts(jobs["report"])["dependency"] == "afterok:dry1:dry2:dry3"


def test_rank_counts_up_to_a_node_stay_on_one_node_and_larger_ones_fill_whole_nodes(tmp_path):
    rc, jobs, err = dry_run(tmp_path, "allreduce", PT_ALLREDUCE_RANKS="1 2 8 16 32", PT_GPUS_PER_NODE=8)
    assert rc == 0, err
    got = {name: layout(line) for name, line in jobs.items() if name != "report"}
    assert got == {
        "allreduce_n1": {"nodes": "1", "ntasks-per-node": "1", "gpus-per-node": "1"},
        "allreduce_n2": {"nodes": "1", "ntasks-per-node": "2", "gpus-per-node": "2"},
        "allreduce_n8": {"nodes": "1", "ntasks-per-node": "8", "gpus-per-node": "8"},
        "allreduce_n16": {"nodes": "2", "ntasks-per-node": "8", "gpus-per-node": "8"},
        "allreduce_n32": {"nodes": "4", "ntasks-per-node": "8", "gpus-per-node": "8"},
    }


def test_pt_nodes_spreads_the_ranks_evenly_and_other_node_sizes_are_honoured(tmp_path):
    rc, jobs, err = dry_run(tmp_path, "train,allreduce", PT_TRAIN_RANKS=8, PT_ALLREDUCE_RANKS="2 12", PT_NODES=2)
    assert rc == 0, err
    assert layout(jobs["train_n8"]) == {"nodes": "2", "ntasks-per-node": "4", "gpus-per-node": "4"}
    assert layout(jobs["allreduce_n2"]) == {"nodes": "2", "ntasks-per-node": "1", "gpus-per-node": "1"}
    assert layout(jobs["allreduce_n12"]) == {"nodes": "2", "ntasks-per-node": "6", "gpus-per-node": "6"}
    rc, jobs, err = dry_run(tmp_path, "train", PT_TRAIN_RANKS=16, PT_GPUS_PER_NODE=4, PT_GPU_BIND="per-task")
    assert rc == 0, err
    assert layout(jobs["train_n16"]) == {"nodes": "4", "ntasks-per-node": "4", "gpus-per-task": "1"}


def test_single_gpu_arrays_ask_for_one_task_and_one_gpu(tmp_path):
    rc, jobs, err = dry_run(tmp_path, "model,attention", PT_SIZES="small xl", PT_CONTEXTS="128", PT_PRECISIONS="bf16")
    assert rc == 0, err
    for name, array in (("model", "0-1"), ("attention", "0-2")):
        assert layout(jobs[name]) == {"nodes": "1", "ntasks-per-node": "1", "gpus-per-node": "1"}, jobs[name]
        assert opts(jobs[name])["array"] == array


def test_cpu_mode_puts_the_ranks_on_one_node_with_overcommit_and_no_gpus(tmp_path):
    rc, jobs, err = dry_run(tmp_path, "model,allreduce,ddp,train", "--cpu")
    assert rc == 0, err
    assert layout(jobs["allreduce_n2"]) == {"nodes": "1", "ntasks-per-node": "2", "overcommit": True}
    assert layout(jobs["ddp_n2"]) == {"nodes": "1", "ntasks-per-node": "2", "overcommit": True}
    assert layout(jobs["train_n1"]) == {"nodes": "1", "ntasks-per-node": "1", "overcommit": True}
    assert opts(jobs["train_n1"])["cpus-per-task"] == "1"
    # PT_GPUS_PER_NODE does not limit CPU ranks; PT_NODES still spreads them
    rc, jobs, err = dry_run(tmp_path, "train", "--cpu", PT_TRAIN_RANKS=4, PT_GPUS_PER_NODE=1)
    assert rc == 0 and layout(jobs["train_n4"]) == {"nodes": "1", "ntasks-per-node": "4", "overcommit": True}, err
    rc, jobs, err = dry_run(tmp_path, "train", "--cpu", PT_TRAIN_RANKS=4, PT_NODES=2)
    assert rc == 0 and layout(jobs["train_n4"]) == {"nodes": "2", "ntasks-per-node": "2", "overcommit": True}, err


def test_only_train_gets_the_signal_lead_and_the_other_resources_pass_through(tmp_path):
    rc, jobs, err = dry_run(tmp_path, "allreduce,train", "--partition", "gpu", "--time", "04:00:00",
                            PT_SIGNAL_LEAD=300, PT_TASK_RESOURCES="--cpus-per-task=16 --mem=0")
    assert rc == 0, err
    assert opts(jobs["train_n1"])["signal"] == "B:USR1@300"
    assert "signal" not in opts(jobs["allreduce_n2"])
    for name in ("train_n1", "allreduce_n2"):
        o = opts(jobs[name])
        assert (o["cpus-per-task"], o["mem"], o["partition"], o["time"]) == ("16", "0", "gpu", "04:00:00")
    rc, jobs, err = dry_run(tmp_path, "train", "--cpu")
    assert rc == 0 and opts(jobs["train_n1"])["signal"] == "B:USR1@10", err


def test_gpu_options_of_ones_own_need_pt_gpu_bind_none(tmp_path):
    rc, jobs, err = dry_run(tmp_path, "train", PT_TRAIN_RANKS=8, PT_GPU_BIND="none",
                            PT_TASK_RESOURCES="--gres=gpu:8 --cpus-per-task=4")
    assert rc == 0, err
    assert layout(jobs["train_n8"]) == {"nodes": "1", "ntasks-per-node": "8"}
    assert opts(jobs["train_n8"])["gres"] == "gpu:8"


# ---- refusals: one line naming the problem, exit 2, nothing submitted ----------------------------

@pytest.mark.parametrize("only, settings, words", [
    ("train", {"PT_TRAIN_RANKS": 12}, ["train", "12 ranks", "PT_GPUS_PER_NODE", "multiple of 8", "16"]),
    ("ddp", {"PT_DDP_RANKS": 20, "PT_GPUS_PER_NODE": 8}, ["ddp", "20 ranks", "multiple of 8"]),
    ("allreduce", {"PT_ALLREDUCE_RANKS": "2 4 9"}, ["allreduce", "9 ranks", "multiple of 8"]),
    ("train", {"PT_TRAIN_RANKS": 16, "PT_NODES": 3}, ["16 ranks", "3 nodes", "PT_NODES"]),
    ("train", {"PT_TRAIN_RANKS": 16, "PT_NODES": 1}, ["16 ranks", "PT_NODES", "16 a node", "8 GPUs"]),
    ("allreduce", {"PT_ALLREDUCE_RANKS": "2", "PT_NODES": 4}, ["2 ranks", "4 nodes"]),
    ("train", {"PT_TRAIN_RANKS": 0}, ["train", "'0'"]),
    ("train", {"PT_GPUS_PER_NODE": "eight"}, ["PT_GPUS_PER_NODE", "'eight'"]),
    ("train", {"PT_NODES": "two"}, ["PT_NODES", "'two'"]),
    ("train", {"PT_GPU_BIND": "closest"}, ["PT_GPU_BIND", "per-node, per-task or none", "'closest'"]),
    ("train", {"PT_SRUN_MPI": "pmix --oops"}, ["PT_SRUN_MPI"]),
    ("train", {"PT_SIGNAL_LEAD": "2m"}, ["PT_SIGNAL_LEAD", "'2m'"]),
    ("train", {"PT_KEEP_LAST": "all"}, ["PT_KEEP_LAST", "'all'"]),
    ("train", {"PT_SIGNAL_LEAD": 600, "PT_TIME": "00:10:00"}, ["PT_SIGNAL_LEAD=600", "00:10:00"]),
    ("train", {"PT_TASK_RESOURCES": "--gpus-per-task=1 --cpus-per-task=8"}, ["--gpus-per-task=1", "PT_GPU_BIND=none"]),
])
def test_a_layout_that_does_not_fit_is_refused_with_one_line(tmp_path, only, settings, words):
    # the refused job comes last: nothing before it may have been submitted either
    rc, jobs, err = dry_run(tmp_path, "model," + only, **settings)
    assert rc == 2, (jobs, err)
    assert jobs == {} and not os.path.exists(tmp_path / "out" / "jobs.txt"), "refused, yet submitted"
    assert len(err) == 1 and err[0].startswith("submit_all.sh: "), err
    for w in words:
        assert w in err[0], (w, err[0])


def test_time_limits_in_every_slurm_spelling_are_checked_against_the_signal_lead(tmp_path):
    for t, ok in (("2", False), ("3", True), ("1:59", False), ("2:01", True), ("0:02:00", False), ("0:02:01", True),
                  ("1-0", True), ("1-00:00:00", True), ("UNLIMITED", True)):
        rc, _, err = dry_run(tmp_path, "train", "--time", t, PT_SIGNAL_LEAD=120)
        assert (rc == 0) == ok, (t, err)


# ---- the srun line of the jobs --------------------------------------------------------------------

@pytest.mark.parametrize("settings, expected", [
    ({}, "srun --mpi=pmix --ntasks=1"),
    ({"PT_SRUN_MPI": "pmi2"}, "srun --mpi=pmi2 --ntasks=1"),
    ({"PT_SRUN_MPI": "pmix_v4", "SLURM_NTASKS": 16, "SLURM_CPUS_PER_TASK": 8},
     "srun --mpi=pmix_v4 --ntasks=16 --cpus-per-task=8"),
    ({"PT_SRUN_MPI": "", "SLURM_NTASKS": 2}, "srun --ntasks=2"),
])
def test_srun_takes_the_mpi_plugin_and_the_cpus_per_task_again(settings, expected):
    proc = subprocess.run(["bash", "-c", f'source "{COMMON}" && echo "${{PT_SRUN[*]}}"'], capture_output=True,
                          text=True, env=clean_env(PT_REPO=REPO, **settings), timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected


def test_train_template_asks_slurm_for_the_signal_requeue_and_an_appended_log():
    head = [line for line in open(TRAIN) if line.startswith("#SBATCH")]
    assert "#SBATCH --signal=B:USR1@120\n" in head
    assert "#SBATCH --requeue\n" in head
    assert "#SBATCH --open-mode=append\n" in head


# ---- train.sbatch's signal handling, against a stand-in srun and scontrol ------------------------

FAKE_SRUN = r"""#!/bin/bash
# stand-in srun: records its arguments and the signals it gets; exits 75 on SIGUSR1 as paratrain's
# ranks do, or FAKE_RC after FAKE_RUN_S seconds
printf '%s\n' "$@" >"$FAKE_DIR/srun.args"
trap 'echo USR1 >>"$FAKE_DIR/srun.signals"; exit 75' USR1
trap 'echo TERM >>"$FAKE_DIR/srun.signals"; exit 75' TERM
touch "$FAKE_DIR/srun.started"
for (( i = 0; i < ${FAKE_RUN_S:-0} * 20; i++ )); do sleep 0.05; done
exit "${FAKE_RC:-0}"
"""
FAKE_SCONTROL = r"""#!/bin/bash
echo "$*" >>"$FAKE_DIR/scontrol.calls"
exit "${FAKE_SCONTROL_RC:-0}"
"""


def run_train_template(tmp_path, send=None, restart=None, fake_rc=0, run_s=0, scontrol_rc=0, script=TRAIN,
                       **settings):
    """Runs slurm/train.sbatch (or another template: `script`) with bash as the batch shell of job
    42; `send` (a signal) goes to that shell once the step runs. Returns (exit code, srun's
    arguments, signals srun got, scontrol calls, stderr)."""
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    out = tmp_path / "out"
    settings = {"PATH": f"{fake}:{os.environ['PATH']}", "FAKE_DIR": fake, "FAKE_RC": fake_rc, "FAKE_RUN_S": run_s,
                "FAKE_SCONTROL_RC": scontrol_rc, "PT_REPO": REPO, "PT_MODE": "cpu", "PT_BIN": "/bin/true",
                "PT_OUT": out, "SLURM_JOB_ID": 42, "SLURM_NTASKS": 2, **settings}
    env = clean_env(**{k: v for k, v in settings.items() if v is not None})  # None: left unset
    if restart is not None:
        env["SLURM_RESTART_COUNT"] = str(restart)
    proc = subprocess.Popen(["bash", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if send is not None:
        deadline = time.time() + 20
        while not (fake / "srun.started").exists():
            assert time.time() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        time.sleep(0.2)  # srun's traps are set before it says it started; this is for the shell's wait
        proc.send_signal(send)
    _, err = proc.communicate(timeout=30)

    def read(name):
        p = fake / name
        return p.read_text().split("\n")[:-1] if p.exists() else []
    return proc.returncode, read("srun.args"), read("srun.signals"), read("scontrol.calls"), err


def test_usr1_reaches_the_step_and_its_exit_75_requeues_the_job(tmp_path):
    rc, args, sigs, calls, err = run_train_template(tmp_path, send=signal.SIGUSR1, run_s=20)
    assert sigs == ["USR1"], err
    assert calls == ["requeue 42"], err
    assert rc == 0, err
    assert args[:4] == ["--mpi=pmix", "--ntasks=2", "/bin/true", "train"], args


def test_a_step_stopped_by_a_signal_sent_to_the_step_alone_requeues_too(tmp_path):
    rc, _, sigs, calls, err = run_train_template(tmp_path, fake_rc=75)
    assert (rc, sigs, calls) == (0, [], ["requeue 42"]), err


def test_sigterm_to_the_shell_never_requeues(tmp_path):
    rc, _, sigs, calls, err = run_train_template(tmp_path, send=signal.SIGTERM, run_s=2, fake_rc=75)
    assert sigs == [] and calls == [], err  # Slurm signals the step itself; the shell only waits
    assert rc == 75, err


def test_a_finished_or_failed_step_is_not_requeued_and_its_code_is_the_jobs(tmp_path):
    for code in (0, 1, 3):
        rc, _, _, calls, err = run_train_template(tmp_path, fake_rc=code)
        assert (rc, calls) == (code, []), err


def test_a_failed_requeue_leaves_exit_75_and_says_how_to_continue(tmp_path):
    rc, _, _, calls, err = run_train_template(tmp_path, fake_rc=75, scontrol_rc=1)
    assert (rc, calls) == (75, ["requeue 42"]), err
    assert "submit this script again" in err


def test_checkpoint_resume_and_overwrite_arguments_of_first_and_requeued_runs(tmp_path):
    out = tmp_path / "out"
    ckdir = out / "checkpoints" / "train_n2"

    def tail(args):
        return args[args.index("--out"):]
    common = ["--out", str(out / "train_n2.h5"), "--save-dir", str(ckdir), "--keep-last", "3", "--save-every", "50"]
    # first run: resume from `latest` when an earlier submission left one, else start
    assert tail(run_train_template(tmp_path)[1]) == common + ["--resume", "auto"]
    # PT_OVERWRITE=1 on a first run: start over, replacing the record and the checkpoints
    assert tail(run_train_template(tmp_path, PT_OVERWRITE=1)[1]) == common + ["--overwrite"]
    # requeued before any checkpoint (no `latest`): start over over its own first attempt's record
    assert tail(run_train_template(tmp_path, restart=1, PT_OVERWRITE=1)[1]) == common + ["--resume", "auto",
                                                                                        "--overwrite"]
    # requeued with `latest`: resume from it and continue the record, never --overwrite
    ckdir.mkdir(parents=True)
    (ckdir / "latest").write_text("step_000100.h5\nrun r1\n")
    for overwrite in (0, 1):
        args = run_train_template(tmp_path, restart=2, PT_OVERWRITE=overwrite)[1]
        assert tail(args) == common + ["--resume", "auto"], args
    args = run_train_template(tmp_path, restart=2, PT_KEEP_LAST=0)[1]
    assert args[args.index("--keep-last") + 1] == "0", args


def old_run(ckdir, outside):
    """A checkpoint directory left by an earlier sweep: its pointer and step checkpoints (one a
    symbolic link to a file elsewhere), and files of other names. Returns what is in it."""
    ckdir.mkdir(parents=True, exist_ok=True)
    for name in ("latest", "step_000100.h5", "step_1000000.h5", "latest.lock", "notes.txt", "step_best.h5",
                 "step_00100.h5"):
        (ckdir / name).write_text(name)
    outside.write_text("kept")
    if not (ckdir / "step_000300.h5").is_symlink():
        (ckdir / "step_000300.h5").symlink_to(outside)
    return sorted(os.listdir(ckdir))


def test_a_fresh_overwriting_run_leaves_the_clearing_to_paratrain(tmp_path):
    ckdir, outside = tmp_path / "out" / "checkpoints" / "train_n2", tmp_path / "mine.h5"
    # The script removes nothing, on any run: paratrain's --overwrite clears the old run's pointer
    # and step checkpoints once it holds the directory's lock, so a second job submitted with
    # PT_OVERWRITE=1 while the first runs fails on that lock and takes nothing of the first's.
    for settings in ({}, {"restart": 1, "PT_OVERWRITE": 1}, {"PT_OVERWRITE": 1}):
        before = old_run(ckdir, outside)
        rc, args, _, _, err = run_train_template(tmp_path, **settings)
        assert rc == 0 and sorted(os.listdir(ckdir)) == before, (settings, err)
        assert ("--overwrite" in args) == (settings == {"PT_OVERWRITE": 1}), (settings, args)
    assert outside.read_text() == "kept"


# ---- GPU mode never falls back to the CPU ---------------------------------------------------------

@pytest.mark.parametrize("name", ["model", "attention", "allreduce", "ddp", "train"])
def test_every_gpu_job_asks_paratrain_for_cuda_so_a_node_without_a_gpu_fails_at_once(tmp_path, name):
    script = os.path.join(REPO, "slurm", f"{name}.sbatch")
    rc, args, _, _, err = run_train_template(tmp_path, script=script, PT_MODE="gpu")
    assert rc == 0, err
    assert args[args.index("/bin/true") + 1] in ("bench", "train"), args
    i = args.index("--device")
    assert args[i + 1] == "cuda", args
    assert args.count("--device") == 1, args
    # the CPU test sweep keeps its CPU
    _, args, _, _, err = run_train_template(tmp_path, script=script, PT_MODE="cpu")
    assert args[args.index("--device") + 1] == "cpu", (args, err)


# ---- where a template finds common.sh and the program ---------------------------------------------

def installed_tree(tmp_path):
    """A stand-in installed tree P: P/bin/paratrain (a script) and P/share/paratrain/slurm (the
    repository's templates). Returns P."""
    prefix = tmp_path / "prefix"
    shutil.copytree(os.path.join(REPO, "slurm"), prefix / "share" / "paratrain" / "slurm")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "paratrain").write_text("#!/bin/sh\n")
    (prefix / "bin" / "paratrain").chmod(0o755)
    return prefix


def test_an_installed_template_finds_common_sh_and_the_program_through_the_paratrain_on_path(tmp_path):
    prefix = installed_tree(tmp_path)
    submit_dir = tmp_path / "submitted_here"
    submit_dir.mkdir()
    fake = tmp_path / "fake"  # run_train_template's stand-in srun goes first on PATH
    rc, args, _, _, err = run_train_template(
        tmp_path, script=str(prefix / "share" / "paratrain" / "slurm" / "train.sbatch"), PT_REPO=None, PT_BIN=None,
        PT_OUT=None, SLURM_SUBMIT_DIR=submit_dir, PATH=f"{fake}:{prefix / 'bin'}:{os.environ['PATH']}")
    assert rc == 0, err
    assert str(prefix / "bin" / "paratrain") in args, args
    assert args[args.index("--out") + 1] == str(submit_dir / "results" / "train_n2.h5"), args


def test_a_template_that_finds_no_common_sh_says_where_it_looked_in_one_line(tmp_path):
    prefix = installed_tree(tmp_path)
    rc, args, _, _, err = run_train_template(
        tmp_path, script=str(prefix / "share" / "paratrain" / "slurm" / "train.sbatch"), PT_REPO=None, PT_BIN=None,
        SLURM_SUBMIT_DIR=tmp_path, PATH=f"{tmp_path / 'fake'}:/usr/bin:/bin")  # no paratrain anywhere
    assert rc != 0 and args == [], err
    assert len(err.splitlines()) == 1 and "slurm/common.sh" in err and "PATH" in err, err
