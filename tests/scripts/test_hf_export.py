"""`paratrain export`: a tiny trained checkpoint exported as a Hugging Face Llama folder, its
logits recomputed by an independent NumPy implementation of LlamaForCausalLM's forward (rotate-
half RoPE, RMSNorm, SwiGLU, causal attention) from config.json and model.safetensors alone, and
compared with paratrain's own forward (`export --format logits`). Also the folder's other files,
bf16 weights and the refusals. scripts/hf_check.py runs the same comparison with `transformers`."""
import json
import os
import subprocess

import numpy as np
import pytest
from conftest import REPO, run_without_torch
from hf_check import default_tokens, max_rel_error, paratrain_logits
from llama_numpy import load, logits

BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
SAMPLE = os.path.join(REPO, "data", "sample_tokens.npy")
TOKENIZER = os.path.join(REPO, "data", "sample_tokenizer.json")
MODEL = ["--model", "tiny", "--d-model", "32", "--num-layers", "2", "--num-heads", "2", "--d-ff", "64",
         "--context-length", "16", "--batch-size", "4", "--device", "cpu", "--data", SAMPLE, "--log-every", "100"]


def paratrain(*args, check_rc=0):
    proc = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == check_rc, f"{args}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("hf")
    ck = d / "ck.h5"
    # Trained a few steps: the weights are no longer the initialisation's (norms of ones).
    paratrain("train", *MODEL, "--steps", "10", "--save", ck, "--out", d / "run.h5")
    return ck


def test_exported_logits_match_paratrain(checkpoint, tmp_path):
    out = tmp_path / "hf"
    paratrain("export", "--checkpoint", checkpoint, "--format", "hf", "--out", out)
    cfg, w = load(str(out))
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["torch_dtype"] == "float32"
    assert (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"],
            cfg["vocab_size"], cfg["max_position_embeddings"]) == (32, 64, 2, 2, 10000, 16)
    assert len(w) == 2 * 9 + 3 and all(v.dtype == np.float64 for v in w.values())
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["hf"]  # no temporary folder left beside it
    tokens = default_tokens(cfg["vocab_size"], cfg["max_position_embeddings"])
    want = paratrain_logits(BIN, str(checkpoint), tokens)
    assert want.shape == (16, 10000)
    assert max_rel_error(logits(cfg, w, tokens), want) <= 1e-4

    # Without the RoPE row permutation of q and k (undone here), the logits differ: the check
    # above sees it.
    D = cfg["hidden_size"] // cfg["num_attention_heads"]
    undo = np.empty(D, dtype=np.int64)  # paratrain's row 2i was row i of the export, 2i+1 row i + D/2
    undo[0::2], undo[1::2] = np.arange(D // 2), np.arange(D // 2) + D // 2
    heads = [h * D + undo for h in range(cfg["num_attention_heads"])]
    for name in list(w):
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            w[name] = w[name][np.concatenate(heads)]
    assert max_rel_error(logits(cfg, w, tokens), want) > 1e-2


def test_bf16_export_and_tokenizer(checkpoint, tmp_path):
    fp32, bf16 = tmp_path / "fp32", tmp_path / "bf16"
    paratrain("export", "--checkpoint", checkpoint, "--out", fp32)
    paratrain("export", "--checkpoint", checkpoint, "--out", bf16, "--dtype", "bf16", "--tokenizer", TOKENIZER)
    cfg, w32 = load(str(fp32))
    with open(bf16 / "config.json") as f:
        cfg16 = json.load(f)
    assert cfg16["torch_dtype"] == "bfloat16" and cfg16["bos_token_id"] == cfg16["eos_token_id"] == 0
    assert cfg["bos_token_id"] is None
    # NumPy has no bf16 (safetensors' loader refuses it): the file parsed here, each value the top
    # half of an fp32.
    with open(bf16 / "model.safetensors", "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header, data = json.loads(f.read(n)), f.read()
    assert (8 + n) % 8 == 0 and header.pop("__metadata__") == {"format": "pt"}
    assert sum(e - b for b, e in (v["data_offsets"] for v in header.values())) == len(data)
    for name, v in w32.items():  # each weight the fp32 one rounded to the nearest bf16, ties to even
        h = header[name]
        assert h["dtype"] == "BF16" and tuple(h["shape"]) == v.shape
        b, e = h["data_offsets"]
        bits = v.astype(np.float32).view(np.uint32).astype(np.uint64)
        want = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        assert np.array_equal(np.frombuffer(data[b:e], dtype="<u2").reshape(v.shape), want), name
    with open(bf16 / "tokenizer.json", "rb") as a, open(TOKENIZER, "rb") as b:
        assert a.read() == b.read()
    with open(bf16 / "tokenizer_config.json") as f:
        assert json.load(f)["eos_token"] == "<|endoftext|>"


def test_refusals(checkpoint, tmp_path):
    out = tmp_path / "hf"
    paratrain("export", "--checkpoint", checkpoint, "--out", out)
    stamp = (out / "config.json").stat().st_mtime_ns
    cases = [
        (["--checkpoint", tmp_path / "none.h5", "--out", tmp_path / "x"], 1, "none.h5"),
        (["--checkpoint", TOKENIZER, "--out", tmp_path / "x"], 1, "sample_tokenizer.json"),
        (["--checkpoint", checkpoint, "--out", out], 1, "exists (--overwrite replaces it)"),
        (["--checkpoint", checkpoint, "--out", tmp_path / "x", "--format", "gguf"], 1, "--format must be hf"),
        (["--checkpoint", checkpoint, "--out", tmp_path / "x", "--dtype", "fp16"], 1, "--dtype must be fp32 or bf16"),
        (["--checkpoint", checkpoint, "--out", tmp_path / "x", "--tokenizer", tmp_path / "no.json"], 1, "no.json"),
        (["--checkpoint", checkpoint, "--out", tmp_path / "x.npy", "--format", "logits", "--tokens", "1,99999"], 1,
         "outside the vocabulary"),
        (["--checkpoint", checkpoint], 2, "'--out' is required"),
    ]
    for args, rc, words in cases:
        proc = paratrain("export", *args, check_rc=rc)
        assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (out / "config.json").stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # nothing else written, no temporary folder
    paratrain("export", "--checkpoint", checkpoint, "--out", out, "--overwrite", "--dtype", "bf16")
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_greedy_sample_follows_paratrain_logits(checkpoint, tmp_path):
    """scripts/sample.py without torch (its NumPy backend), greedy: each new token is the argmax
    of paratrain's own logits for the text so far."""
    from tokenizers import Tokenizer

    out = tmp_path / "hf"
    paratrain("export", "--checkpoint", checkpoint, "--out", out, "--tokenizer", TOKENIZER)
    tok = Tokenizer.from_file(TOKENIZER)
    prompt = "Once upon a time"
    ids = tok.encode(prompt).ids
    n_prompt = len(ids)
    for _ in range(4):
        ids.append(int(np.argmax(paratrain_logits(BIN, str(checkpoint), ids)[-1])))
    proc = run_without_torch("sample.py", [out, "--prompt", prompt, "--max-new-tokens", 4, "--temperature", 0],
                             tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (prompt + tok.decode(ids[n_prompt:], skip_special_tokens=True)).strip()
    # A folder without tokenizer.json: one line, exit 1.
    bare = tmp_path / "bare"
    paratrain("export", "--checkpoint", checkpoint, "--out", bare)
    proc = run_without_torch("sample.py", [bare, "--prompt", prompt], tmp_path)
    assert proc.returncode == 1 and "tokenizer.json" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("script", ["hf_check.py", "sample.py"])
def test_scripts_help_without_torch(script, tmp_path):
    assert run_without_torch(script, ["--help"], tmp_path).returncode == 0
    proc = run_without_torch(script, [tmp_path], tmp_path)  # a required option missing
    assert proc.returncode == 2 and "required" in proc.stderr
