"""The GPU step scripts without a GPU: scripts/gpu_checks.sh and dev/experiments/*.sh through their
shared runner (scripts/gpu_steps.sh). Every step is listed by exactly one script and documented in
its --help; a step asked of the wrong script is refused before anything runs, naming the script
that has it; and a step runs with its log, summary line and packed results, the commands it calls
being stand-ins on PATH that record their arguments."""
import glob
import os
import re
import subprocess
import tarfile

import pytest

from conftest import REPO

SCRIPTS = ["scripts/gpu_checks.sh"] + sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "dev", "experiments", "*.sh")))


def run(script, *args, env=None, cwd=REPO):
    return subprocess.run([os.path.join(REPO, script), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=60)


def steps(script):
    proc = run(script, "--list")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_every_family_exists():
    assert {os.path.basename(s) for s in SCRIPTS} >= {"gpu_checks.sh", "ab.sh", "trace.sh", "ncu.sh", "probes.sh"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_step_is_documented_in_its_scripts_help(script):
    proc = run(script, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "STEP[:SECONDS]" in proc.stdout
    documented = set(re.findall(r"^  ([a-z0-9][A-Za-z0-9.-]*)\b", proc.stdout, re.M))
    listed = steps(script)
    assert listed
    missing = [s for s in listed if re.sub(r"^(torch-compile)-.*", r"\1-S", s) not in documented]
    assert not missing, f"{script} --help does not describe {missing}"


def test_no_step_is_in_two_scripts():
    seen = {}
    for script in SCRIPTS:
        for s in steps(script):
            assert s not in seen, f"{s} is in both {seen[s]} and {script}"
            seen[s] = script


def test_a_step_of_another_script_is_refused_with_its_place_and_nothing_runs(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), RESULTS=str(tmp_path / "results"))
    proc = run("scripts/gpu_checks.sh", "gpu-tests", "ab-flash:600", env=env)
    assert proc.returncode == 2
    assert "unknown step 'ab-flash' (it is in dev/experiments/flash.sh)" in proc.stderr
    proc = run("dev/experiments/ab.sh", "no-such-step", env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "ab.sh: unknown step 'no-such-step'"
    proc = run("dev/experiments/trace.sh", "kernel-trace:ten", env=env)
    assert proc.returncode == 2 and "time limit" in proc.stderr
    for bad in ([], ["--bogus"]):
        proc = run("scripts/gpu_checks.sh", *bad, env=env)
        assert proc.returncode == 2 and "usage:" in proc.stderr
    assert not out.exists()


def stand_ins(tmp_path, names):
    """Commands that append their name, arguments and GPU to a log instead of running."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for name in names:
        path = bin_dir / name
        path.write_text(f'#!/bin/bash\necho "{name} $* gpu=${{CUDA_VISIBLE_DEVICES:-}}" >> {log}\n')
        path.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", OUT=str(tmp_path / "out"),
               RESULTS=str(tmp_path / "results"))
    return env, log


def test_a_step_runs_logs_and_packs_its_results(tmp_path):
    env, log = stand_ins(tmp_path, ["paratrain", "paratrain_tests_gpu", "nvidia-smi"])
    proc = run("scripts/gpu_checks.sh", "gpu-tests:30", "model-xl", env=env)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "paratrain_tests_gpu --gtest_color=no gpu="
    assert calls[1].startswith("paratrain bench model --model xl --context-length 512 --precision fp32 --attention naive")
    assert f"--out {tmp_path}/results/model_xl_fp32.h5 --overwrite" in calls[1]
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert [line.split()[:2] for line in summary[:2]] == [["gpu-tests", "rc=0"], ["model-xl", "rc=0"]]
    with tarfile.open(tmp_path / "out" / "results.tgz") as tgz:
        assert {"./gpu-tests.log", "./model-xl.log"} <= set(tgz.getnames())


def test_a_plus_b_runs_each_step_on_its_own_gpu(tmp_path):
    env, log = stand_ins(tmp_path, ["paratrain_tests_gpu", "compute-sanitizer", "nvidia-smi"])
    proc = run("scripts/gpu_checks.sh", "gpu-tests+sanitizer-rmsnorm:30", env=env)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert "paratrain_tests_gpu --gtest_color=no gpu=0" in calls
    assert sum(c.startswith("compute-sanitizer") and c.endswith("gpu=1") for c in calls) == 3


def test_an_experiment_runs_from_its_family_script(tmp_path):
    env, log = stand_ins(tmp_path, ["paratrain", "nvidia-smi"])
    env["UPDATE_SMS"] = "0 24"
    proc = run("dev/experiments/ab.sh", "ab-update-sms:30", env=env)
    assert proc.returncode == 0, proc.stderr
    calls = [c for c in log.read_text().splitlines() if c.startswith("paratrain")]
    assert len(calls) == 2 * 2 + 3 * 2  # XL twice over UPDATE_SMS, then three sizes with 0 and 32
    assert "--update-sms 24" in calls[1] and "update_sms_xl_24_1.h5" in calls[1]
