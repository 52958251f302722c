"""Validation loss and sharded token data in `train` (issue 48), tiny CPU runs of the real binary:
the loss in /eval is the mean cross-entropy of the validation windows computed independently (a
NumPy fp64 Llama on the exported weights); `paratrain eval` gives the run's value for its
checkpoint, and the same on 1 and 2 ranks; evaluating leaves training bit for bit unchanged; a
set of shards trains exactly as the one file holding their concatenation, and the record lists
them with their checksums; a run with shards and evaluation, interrupted and resumed, equals
the uninterrupted one bit for bit."""
import hashlib
import json
import os
import subprocess

import h5py
import numpy as np
import pytest

from conftest import MPIEXEC, REPO

BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
SAMPLE = os.path.join(REPO, "data", "sample_tokens.npy")
TIMEOUT_S = 180
EXIT_STOPPED = 75
T, B = 16, 4
MODEL = ["--model", "tiny", "--d-model", "32", "--num-layers", "2", "--num-heads", "2", "--d-ff", "64",
         "--context-length", str(T), "--batch-size", str(B), "--device", "cpu", "--warmup-steps", "2",
         "--log-every", "100"]

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")


def paratrain(*args, ranks=1, env=None, check_rc=0):
    cmd = ([MPIEXEC, "-np", str(ranks)] if ranks > 1 else []) + [BIN, *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ, **(env or {})))
    assert proc.returncode == check_rc, f"{' '.join(cmd)}\nrc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def table(path, name):
    with h5py.File(path, "r") as f:
        return f[name][()]


def weights(path):
    with h5py.File(path, "r") as f:
        return {n: f[n][()] for n in f.attrs["parameter_names"]}


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def tokens():
    return np.load(SAMPLE)


@pytest.fixture
def val_file(tmp_path, tokens):
    """A validation set of 12 windows and a bit: 3 batches of 4 × 16 and no more."""
    path = tmp_path / "val.npy"
    np.save(path, tokens[-(3 * B * T + 5):].astype("<u2"))
    return path


def shards(tmp_path, tokens, manifest=True):
    """The sample's first 700,000 tokens cut into three shards (one shorter than a window), a
    validation shard after them, and manifest.json listing them as prepare_data.py does."""
    d = tmp_path / "set"
    d.mkdir()
    cuts = [0, 300_000, 300_777, 700_000, len(tokens)]
    train = []
    for i in range(3):
        np.save(d / f"part_{i}.npy", tokens[cuts[i]:cuts[i + 1]])
        train.append({"file": f"part_{i}.npy", "tokens": int(cuts[i + 1] - cuts[i]), "sha256": sha(d / f"part_{i}.npy")})
    np.save(d / "val_0.npy", tokens[cuts[3]:cuts[3] + 10 * B * T + 1])
    val = [{"file": "val_0.npy", "tokens": 10 * B * T + 1, "sha256": sha(d / "val_0.npy")}]
    if manifest:
        (d / "manifest.json").write_text(json.dumps({"format": "paratrain token shards", "version": 1,
                                                     "vocab_size": 10000, "train": train, "val": val}))
    return d


def cross_entropy_reference(ck, val_tokens, windows, tmp_path):
    """The mean cross-entropy of windows k < `windows` (inputs tokens [kT, kT+T), targets one
    later) under the checkpoint's weights, through an independent NumPy Llama in fp64."""
    from llama_numpy import load
    from llama_numpy import logits as llama_logits
    out = tmp_path / "hf"
    paratrain("export", "--checkpoint", ck, "--format", "hf", "--out", out)
    cfg, w = load(str(out))
    total = 0.0
    for k in range(windows):
        ids, tg = val_tokens[k * T:k * T + T].astype(np.int64), val_tokens[k * T + 1:k * T + T + 1].astype(np.int64)
        logits = llama_logits(cfg, w, ids)
        m = logits.max(-1, keepdims=True)
        logp = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
        total -= logp[np.arange(T), tg].sum()
    return total / (windows * T)


def test_the_validation_loss_is_the_mean_cross_entropy_of_its_windows(tmp_path, val_file):
    rec, ck = tmp_path / "r.h5", tmp_path / "ck.h5"
    proc = paratrain("train", *MODEL, "--data", SAMPLE, "--steps", "6", "--val-data", val_file, "--eval-every", "4",
                     "--eval-tokens", str(2 * B * T), "--out", rec, "--save", ck)
    ev = table(rec, "eval")
    assert list(ev["step"]) == [4, 6] and list(ev["tokens"]) == [2 * B * T] * 2, ev  # every 4 steps and the last
    assert "eval      4/6 | val loss" in proc.stdout, proc.stdout
    ref = cross_entropy_reference(ck, np.load(val_file), 2 * B, tmp_path)
    assert abs(ev["val_loss"][-1] - ref) <= 1e-5 * ref, (ev["val_loss"][-1], ref)

    # paratrain eval on the checkpoint: the run's batches and budget (from the checkpoint), so the
    # run's last value exactly; the whole set when asked for more than it holds.
    out = tmp_path / "e.h5"
    proc = paratrain("eval", "--checkpoint", ck, "--data", val_file, "--device", "cpu", "--out", out)
    assert f"val loss {ev['val_loss'][-1]:.6f}" in proc.stdout, proc.stdout
    assert table(out, "eval")["val_loss"][0] == ev["val_loss"][-1]
    assert table(out, "eval")["step"][0] == 6
    whole = paratrain("eval", "--checkpoint", ck, "--data", val_file, "--device", "cpu", "--eval-tokens", "1000000")
    assert f"over {3 * B * T} tokens (3 batches" in whole.stdout, whole.stdout
    # Nothing written without --out.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.h5", "e.h5", "hf", "r.h5", "val.npy"]


def test_the_same_loss_on_one_and_two_ranks(tmp_path, val_file):
    ck = tmp_path / "ck.h5"
    paratrain("train", *MODEL, "--data", SAMPLE, "--steps", "3", "--save", ck, "--out", tmp_path / "r.h5")
    losses = []
    for ranks in (1, 2):
        out = tmp_path / f"e{ranks}.h5"
        paratrain("eval", "--checkpoint", ck, "--data", val_file, "--device", "cpu", "--out", out, ranks=ranks)
        ev = table(out, "eval")
        assert ev["tokens"][0] == 3 * B * T  # the same windows, whatever the rank count
        losses.append(ev["val_loss"][0])
    assert abs(losses[0] - losses[1]) <= 1e-6 * losses[0], losses


@pytest.mark.parametrize("ranks", [1, 2])
def test_evaluation_leaves_training_unchanged(tmp_path, val_file, ranks):
    flags = [*MODEL, "--data", SAMPLE, "--steps", "6", "--shard-optimizer", "zero1" if ranks > 1 else "none"]
    paratrain("train", *flags, "--out", tmp_path / "plain.h5", "--save", tmp_path / "plain_ck.h5", ranks=ranks)
    paratrain("train", *flags, "--val-data", val_file, "--eval-every", "1", "--out", tmp_path / "eval.h5",
              "--save", tmp_path / "eval_ck.h5", ranks=ranks)
    plain, evald = table(tmp_path / "plain.h5", "train_steps"), table(tmp_path / "eval.h5", "train_steps")
    assert len(table(tmp_path / "eval.h5", "eval")) == 6
    np.testing.assert_array_equal(plain["loss"], evald["loss"])
    np.testing.assert_array_equal(plain["grad_norm"], evald["grad_norm"])
    a, b = weights(tmp_path / "plain_ck.h5"), weights(tmp_path / "eval_ck.h5")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_shards_train_as_their_concatenation_and_the_record_lists_them(tmp_path, tokens):
    d = shards(tmp_path, tokens, manifest=False)
    flags = [*MODEL, "--steps", "4"]
    whole = tmp_path / "whole.npy"  # what the three shards hold, in one file
    np.save(whole, tokens[:700_000])
    paratrain("train", *flags, "--data", whole, "--out", tmp_path / "one.h5")
    parts = [str(d / f"part_{i}.npy") for i in range(3)]
    for name, spec in (("glob", str(d / "part_*.npy")), ("list", ",".join(parts))):
        rec = tmp_path / f"{name}.h5"
        paratrain("train", *flags, "--data", spec, "--out", rec)
        np.testing.assert_array_equal(table(tmp_path / "one.h5", "train_steps")["loss"], table(rec, "train_steps")["loss"])
        listed = table(rec, "data_shards")
        assert [p.decode() for p in listed["path"]] == parts
        assert [s.decode() for s in listed["sha256"]] == [sha(p) for p in parts]
        assert list(listed["tokens"]) == [300_000, 777, 399_223]
        assert {s.decode() for s in listed["split"]} == {"train"}
    # The one file is listed too, with its own checksum.
    one = table(tmp_path / "one.h5", "data_shards")
    assert len(one) == 1 and one["sha256"][0].decode() == sha(whole)


def test_resume_with_a_manifest_and_evaluation_is_exact(tmp_path, tokens):
    """The manifest's val list is the validation set (--eval-every alone); the run stops right
    after a step due for evaluation, which its resume makes up: records and weights bit for bit."""
    d = shards(tmp_path, tokens)
    flags = [*MODEL, "--data", d, "--eval-every", "2", "--steps", "8", "--shard-optimizer", "zero1"]
    paratrain("train", *flags, "--out", tmp_path / "full.h5", "--save", tmp_path / "full_ck.h5", ranks=2)
    rec, ck = tmp_path / "r.h5", tmp_path / "ck.h5"
    first = paratrain("train", *flags, "--out", rec, "--save", ck, "--resume", "auto", ranks=2,
                      env={"PARATRAIN_FAULT": "signal:4:SIGUSR1"}, check_rc=EXIT_STOPPED)
    assert "stopped by SIGUSR1 after step 4" in first.stdout, first.stdout
    assert list(table(rec, "eval")["step"]) == [2]  # step 4's evaluation did not run
    paratrain("train", "--resume", "auto", "--save", ck, "--out", rec, ranks=2)
    for name in ("train_steps", "eval"):
        full, resumed = table(tmp_path / "full.h5", name), table(rec, name)
        assert list(full["step"]) == list(resumed["step"]), name
        for field in ("loss", "grad_norm", "val_loss", "tokens"):
            if field in full.dtype.names:
                np.testing.assert_array_equal(full[field], resumed[field], err_msg=f"{name}.{field}")
    assert list(table(rec, "eval")["step"]) == [2, 4, 6, 8]
    a, b = weights(tmp_path / "full_ck.h5"), weights(ck)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    listed = table(rec, "data_shards")
    assert [s.decode() for s in listed["split"]] == ["train"] * 3 + ["val"]
    # Continued past its end, whose evaluation the record already holds: only rank 0 reads the
    # record, and every rank must take its word (a rank evaluating alone would hang the others).
    paratrain("train", "--resume", "auto", "--save", ck, "--out", rec, "--steps", "10", ranks=2,
              env={"PARATRAIN_COMM_TIMEOUT_S": "30"})
    assert list(table(rec, "eval")["step"]) == [2, 4, 6, 8, 10]
