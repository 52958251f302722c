"""scripts/compare_runs.py on runs of the real binary (CPU, a tiny model): a run against its own
repetition differs by nothing, against a run with another learning rate by a measured amount in
the losses and weights, and files of different models or lengths are refused (exit 1)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, SCRIPTS

SAMPLE = os.path.join(REPO, "data", "sample_tokens.npy")
BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
MODEL = ["--model", "tiny", "--d-model", "32", "--num-layers", "1", "--num-heads", "2", "--d-ff", "64",
         "--context-length", "16", "--batch-size", "4", "--device", "cpu", "--data", SAMPLE, "--log-every", "100"]

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")


def train(tmp_path, name, *extra, steps=6, d_ff="64"):
    rec, ckpt = tmp_path / f"{name}.h5", tmp_path / f"{name}_ckpt.h5"
    model = [d_ff if MODEL[i - 1] == "--d-ff" else w for i, w in enumerate(MODEL)]
    subprocess.run([BIN, "train", *model, "--steps", str(steps), "--out", str(rec), "--save", str(ckpt), *extra],
                   check=True, capture_output=True, timeout=120)
    return rec, ckpt


def compare(*args):
    return subprocess.run([sys.executable, os.path.join(SCRIPTS, "compare_runs.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def test_a_run_against_itself_and_against_another_learning_rate(tmp_path):
    a = train(tmp_path, "a")
    same = train(tmp_path, "same")
    other = train(tmp_path, "other", "--lr", "1e-3")
    proc = compare("--records", a[0], same[0], "--checkpoints", a[1], same[1], "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["loss"]["steps"] == 6 and r["loss"]["max_abs_diff"] == 0.0
    assert r["weights"]["model_rel_diff"] == 0.0 and r["weights"]["max_elem_diff"] == 0.0
    proc = compare("--records", a[0], other[0], "--checkpoints", a[1], other[1], "--json")
    r = json.loads(proc.stdout)
    assert r["loss"]["first"][0] == r["loss"]["first"][1]  # the same weights and batch at step 1
    assert r["loss"]["max_abs_diff"] > 0 and r["loss"]["max_abs_diff_step"] > 1
    assert 0 < r["weights"]["model_rel_diff"] <= r["weights"]["max_rel_diff"]
    text = compare("--records", a[0], other[0], "--checkpoints", a[1], other[1])
    assert text.returncode == 0 and "loss over 6 steps" in text.stdout and "whole model" in text.stdout


def test_different_models_or_lengths_are_refused(tmp_path):
    a = train(tmp_path, "a")
    short = train(tmp_path, "short", steps=4)
    wide = train(tmp_path, "wide", d_ff="96")
    proc = compare("--records", a[0], short[0])
    assert proc.returncode == 1 and "different steps" in proc.stderr
    proc = compare("--checkpoints", a[1], wide[1])
    assert proc.returncode == 1 and "shapes" in proc.stderr
    proc = compare("--records", a[1], a[1])
    assert proc.returncode == 1 and "train_steps" in proc.stderr
    assert compare().returncode == 2
