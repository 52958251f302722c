"""The path README gives a new user, end to end on the CPU with the real binary and scripts: a
folder of text files → shards, a validation split and a trained BPE (prepare_data.py) → a tiny
model trained with a validation loss every few steps → the same loss from `paratrain eval` → the
report's loss plot → a Hugging Face folder → a sampled paragraph (sample.py, NumPy backend).
The corpus is this repository's own docs/*.md."""
import glob
import os
import re
import shutil
import subprocess
import sys

import h5py
import pytest
from conftest import REPO, SCRIPTS, png_size

BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
TIMEOUT_S = 300
VOCAB = 512
MODEL = ["--model", "tiny", "--d-model", "32", "--num-layers", "2", "--num-heads", "2", "--d-ff", "64",
         "--context-length", "32", "--batch-size", "8", "--device", "cpu", "--log-every", "10"]

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")


def run(cmd, cwd):
    proc = subprocess.run(list(map(str, cmd)), cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{cmd}\nrc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_from_text_files_to_a_sampled_paragraph(tmp_path):
    texts = tmp_path / "my_texts"
    texts.mkdir()
    for path in sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))):
        shutil.copy(path, texts / os.path.basename(path).replace(".md", ".txt"))
    py = sys.executable
    run([py, os.path.join(SCRIPTS, "prepare_data.py"), texts, "--out", "my_data", "--train-bpe", VOCAB], tmp_path)
    run([BIN, "train", "--data", "my_data", "--vocab-size", VOCAB, "--eval-every", 20, "--steps", 60, *MODEL,
         "--save", "ck.h5", "--out", "run.h5"], tmp_path)
    with h5py.File(tmp_path / "run.h5", "r") as f:
        ev = f["eval"][()]
    assert list(ev["step"]) == [20, 40, 60]
    assert ev["val_loss"][-1] < ev["val_loss"][0] < 7.0  # it learns; ln 512 = 6.24 at the start

    # The checkpoint alone gives the run's last validation loss.
    proc = run([BIN, "eval", "--checkpoint", "ck.h5", "--data", "my_data"], tmp_path)
    loss = float(re.search(r"val loss ([0-9.]+)", proc.stdout).group(1))
    assert abs(loss - ev["val_loss"][-1]) <= 1e-5 * loss, proc.stdout

    run([py, os.path.join(SCRIPTS, "report"), "run.h5", "--out", "report", "--plots"], tmp_path)
    plots = glob.glob(str(tmp_path / "report" / "**" / "training_loss.png"), recursive=True)
    assert plots and png_size(plots[0])[0] > 100

    # The tokenizer comes from the run's data manifest.
    run([BIN, "export", "--checkpoint", "ck.h5", "--out", "my_hf"], tmp_path)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(os.listdir(tmp_path / "my_hf"))
    assert (tmp_path / "my_hf" / "tokenizer.json").read_bytes() == (tmp_path / "my_data" / "tokenizer.json").read_bytes()
    proc = run([py, os.path.join(SCRIPTS, "sample.py"), "my_hf", "--prompt", "The data", "--max-new-tokens", 40,
                "--backend", "numpy"], tmp_path)
    text = proc.stdout.strip()
    assert text.startswith("The data") and len(text.split()) > 5, text
