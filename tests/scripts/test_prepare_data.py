"""scripts/prepare_data.py: text and JSONL to llm.c shards, a validation split and a manifest.
Round trip (decoding the shards gives the documents back, each followed by the end-of-text token),
the shard headers, a deterministic and disjoint split, the manifest's checksums, and hostile input
refused with one line. Offline: the tokenizer is data/sample_tokenizer.json or one trained here."""
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, SCRIPTS

tokenizers = pytest.importorskip("tokenizers")

SAMPLE_TOK = os.path.join(REPO, "data", "sample_tokenizer.json")
EOT = "<|endoftext|>"
DOCS = ["In the beginning was the word.\nAnd the word was text.\n",
        "Ünïcode, emoji 🚀 and tabs\tstay as they are.",
        "A literal <|endoftext|> inside a document is read as the token.",
        "short"]


def run(*args, check=True):
    proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, "prepare_data.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"prepare_data failed ({proc.returncode}): {proc.stderr}")
    return proc


def refused(*args, contains):
    proc = run(*args, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("prepare_data: error: "), proc.stderr
    for part in contains:
        assert part in lines[0], lines[0]
    return lines[0]


def read_shard(path):
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    dtype = {1: "<u2", 7: "<u4"}[int(header[1])]
    tokens = np.frombuffer(raw[1024:], dtype=dtype)
    return header, tokens


def split_tokens(out, split):
    manifest = json.load(open(out / "manifest.json"))
    parts = [read_shard(out / s["file"])[1] for s in manifest[split]]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint16)


def interleave(train, val, block, fraction):
    """The stream back from the two splits, by the block rule of --val-fraction."""
    out, ti, vi, b = [], 0, 0, 0
    while ti < len(train) or vi < len(val):
        to_val = int((b + 1) * fraction) > int(b * fraction)
        src, i = (val, vi) if to_val else (train, ti)
        piece = src[i:i + block]
        out.append(piece)
        if to_val:
            vi += len(piece)
        else:
            ti += len(piece)
        b += 1
    return np.concatenate(out)


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "corpus"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text(DOCS[0] * 40, encoding="utf-8")
    (d / "sub" / "b.txt").write_text(DOCS[1] * 30, encoding="utf-8")
    with open(d / "c.jsonl", "w", encoding="utf-8") as f:
        for text in DOCS[2:] * 25:
            f.write(json.dumps({"text": text, "id": 1}) + "\n")
    # In name order: a.txt, c.jsonl, sub/b.txt
    texts = [DOCS[0] * 40] + DOCS[2:] * 25 + [DOCS[1] * 30]
    return d, texts


def test_round_trip_headers_split_and_checksums(corpus, tmp_path):
    src, texts = corpus
    out = tmp_path / "out"
    run(src, "--out", out, "--tokenizer", SAMPLE_TOK, "--val-fraction", "0.25", "--val-block", "64",
        "--shard-tokens", "500", "--quiet")
    manifest = json.load(open(out / "manifest.json"))
    tok = tokenizers.Tokenizer.from_file(SAMPLE_TOK)
    assert manifest["vocab_size"] == 10000 and manifest["eot_id"] == tok.token_to_id(EOT)
    assert manifest["documents"] == len(texts) and manifest["token_dtype"] == "uint16"
    # Headers: llm.c's gpt-2 magic and version, a count that is the file's.
    for entry in manifest["train"] + manifest["val"]:
        path = out / entry["file"]
        header, tokens = read_shard(path)
        assert (header[0], header[1], header[2]) == (20240520, 1, entry["tokens"]) == (20240520, 1, len(tokens))
        assert os.path.getsize(path) == 1024 + 2 * entry["tokens"]
        assert not header[3:].any()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    assert [e["tokens"] for e in manifest["train"][:-1]] == [500] * (len(manifest["train"]) - 1)
    assert len(manifest["train"]) > 1
    # The tokenizer ships beside the shards, its checksum listed.
    assert (out / "tokenizer.json").read_bytes() == open(SAMPLE_TOK, "rb").read()
    assert manifest["tokenizer"]["sha256"] == hashlib.sha256(open(SAMPLE_TOK, "rb").read()).hexdigest()
    # Round trip: the two splits put back together decode to the documents, each then EOT.
    train, val = split_tokens(out, "train"), split_tokens(out, "val")
    stream = interleave(train, val, 64, 0.25)
    assert tok.decode(stream.tolist(), skip_special_tokens=False) == "".join(t + EOT for t in texts)
    assert abs(len(val) / len(stream) - 0.25) < 0.05
    # Deterministic: a second run writes the same bytes.
    out2 = tmp_path / "out2"
    run(src, "--out", out2, "--tokenizer", SAMPLE_TOK, "--val-fraction", "0.25", "--val-block", "64",
        "--shard-tokens", "500", "--quiet")
    assert json.load(open(out2 / "manifest.json"))["train"] == manifest["train"]


def test_val_tokens_takes_the_streams_first_tokens(corpus, tmp_path):
    src, texts = corpus
    out = tmp_path / "out"
    run(src, "--out", out, "--tokenizer", SAMPLE_TOK, "--val-tokens", "123", "--quiet")
    tok = tokenizers.Tokenizer.from_file(SAMPLE_TOK)
    eot = tok.token_to_id(EOT)
    expected = np.array([i for t in texts for i in tok.encode(t, add_special_tokens=False).ids + [eot]])
    val, train = split_tokens(out, "val"), split_tokens(out, "train")
    assert len(val) == 123
    assert np.array_equal(np.concatenate([val, train]), expected)


def test_trains_a_byte_level_bpe_and_ships_it(corpus, tmp_path):
    src, texts = corpus
    out = tmp_path / "out"
    run(src, "--out", out, "--train-bpe", "300", "--val-tokens", "10", "--quiet")
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    manifest = json.load(open(out / "manifest.json"))
    assert manifest["vocab_size"] == tok.get_vocab_size() <= 300
    stream = np.concatenate([split_tokens(out, "val"), split_tokens(out, "train")])
    assert tok.decode(stream.tolist(), skip_special_tokens=False) == "".join(t + EOT for t in texts)


def test_a_vocabulary_above_65536_writes_uint32_shards(tmp_path):
    words = [f"w{i}" for i in range(70000)]
    vocab = {EOT: 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token=EOT))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok.save(str(tmp_path / "big.json"))
    (tmp_path / "t.txt").write_text("w1 w69999 w65536 w3 " * 50)
    out = tmp_path / "out"
    run(tmp_path / "t.txt", "--out", out, "--tokenizer", tmp_path / "big.json", "--val-tokens", "4", "--quiet")
    manifest = json.load(open(out / "manifest.json"))
    assert (manifest["llmc_magic"], manifest["llmc_version"], manifest["token_dtype"]) == (20240801, 7, "uint32")
    header, tokens = read_shard(out / manifest["train"][0]["file"])
    assert (header[0], header[1]) == (20240801, 7)
    assert tokens.max() == 70000 and 65537 in tokens


def test_outputs_are_refused_unless_overwrite_and_stale_shards_go(corpus, tmp_path):
    src, _ = corpus
    out = tmp_path / "out"
    run(src, "--out", out, "--tokenizer", SAMPLE_TOK, "--val-tokens", "50", "--shard-tokens", "200", "--quiet")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert len([n for n in before if n.startswith("data_train_")]) > 2
    refused(src, "--out", out, "--tokenizer", SAMPLE_TOK, contains=["--overwrite", str(out)])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    run(src, "--out", out, "--tokenizer", SAMPLE_TOK, "--val-tokens", "50", "--overwrite", "--quiet")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["data_train_000000.bin", "data_val_000000.bin", "manifest.json", "tokenizer.json"]
    assert not any(".tmp." in n for n in names)


def test_hostile_inputs_are_one_line_each(tmp_path):
    out = tmp_path / "out"
    tok = ["--tokenizer", SAMPLE_TOK]
    (tmp_path / "empty.txt").write_text("")
    refused(tmp_path / "empty.txt", "--out", out, *tok, contains=["no text"])
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    refused(tmp_path / "latin1.txt", "--out", out, *tok, contains=["latin1.txt", "not UTF-8"])
    (tmp_path / "notext.jsonl").write_text('{"text": "ok"}\n{"body": "no text field"}\n')
    refused(tmp_path / "notext.jsonl", "--out", out, *tok, contains=["notext.jsonl", "line 2", '"text"'])
    (tmp_path / "broken.jsonl").write_text('{"text": "ok"}\n{"text": \n')
    refused(tmp_path / "broken.jsonl", "--out", out, *tok, contains=["broken.jsonl", "line 2", "not JSON"])
    (tmp_path / "num.jsonl").write_text('{"text": 5}\n')
    refused(tmp_path / "num.jsonl", "--out", out, *tok, contains=["num.jsonl", "not a string"])
    refused(tmp_path / "missing_*.txt", "--out", out, *tok, contains=["missing_*.txt", "no such file"])
    os.mkfifo(tmp_path / "fifo.txt")
    refused(tmp_path / "fifo.txt", "--out", out, *tok, contains=["fifo.txt", "not a regular file"])
    (tmp_path / "ok.txt").write_text("some text " * 10)
    refused(tmp_path / "ok.txt", "--out", out, "--tokenizer", tmp_path / "ok.txt", contains=["ok.txt", "tokenizers JSON"])
    refused(tmp_path / "ok.txt", "--out", out, "--tokenizer", SAMPLE_TOK, "--eot", "<eos>", contains=["<eos>"])
    refused(tmp_path / "ok.txt", "--out", out, *tok, "--val-tokens", "100000", contains=["training split is empty"])
    refused(tmp_path / "ok.txt", "--out", out, *tok, "--val-fraction", "0.01", contains=["validation split is empty"])
    (tmp_path / "file").write_text("x")
    refused(tmp_path / "ok.txt", "--out", tmp_path / "file", *tok, contains=["is not a directory"])
    # Nothing of a refused run stays behind.
    assert not out.exists() or not any(p.suffix == ".bin" for p in out.iterdir())


def test_tiktoken_without_its_files_is_one_clear_line(tmp_path):
    pytest.importorskip("tiktoken")
    (tmp_path / "ok.txt").write_text("some text")
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, "prepare_data.py"), str(tmp_path / "ok.txt"),
                           "--out", str(tmp_path / "out"), "--tiktoken", "gpt2", "--val-tokens", "1"],
                          capture_output=True, text=True, timeout=300, env=env)
    if proc.returncode == 0:  # the encoding could be downloaded: GPT-2's vocabulary, uint16 shards
        assert json.load(open(tmp_path / "out" / "manifest.json"))["vocab_size"] == 50257
        return
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "--tiktoken gpt2" in lines[0] and "TIKTOKEN_CACHE_DIR" in lines[0]


def test_paratrain_trains_on_a_shard_it_writes(corpus, tmp_path):
    binary = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
    if not os.path.exists(binary):
        pytest.skip(f"no paratrain binary at {binary}")
    src, _ = corpus
    out = tmp_path / "out"
    run(src, "--out", out, "--tokenizer", SAMPLE_TOK, "--val-tokens", "100", "--quiet")
    proc = subprocess.run([binary, "train", "--model", "tiny", "--d-model", "32", "--num-layers", "1", "--num-heads",
                           "2", "--d-ff", "64", "--context-length", "16", "--batch-size", "2", "--device", "cpu",
                           "--steps", "2", "--data", str(out / "data_train_000000.bin"), "--out",
                           str(tmp_path / "run.h5")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
