#!/usr/bin/env python3
"""Regenerate data/sample_tokens.npy and data/sample_tokenizer.json (provenance of the sample data).

The text is the King James Version of the Bible (public domain; see data/README.md) from
Debian's bible-kjv-text package, dumped one verse per line by the package's own `bible`
program. A byte-level BPE with a 10000-token vocabulary is trained on it with HuggingFace
`tokenizers`, and the whole text is encoded to uint16 ids.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install tokenizers==0.23.3 numpy==2.4.6
    /tmp/venv/bin/python scripts/make_sample_data.py            # downloads with apt-get
    /tmp/venv/bin/python scripts/make_sample_data.py --text kjv.txt   # or any UTF-8 text

The committed files are what `paratrain train` reads; this script records how they were made.
"""
import argparse
import hashlib
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB_SIZE = 10000
END_OF_TEXT = "<|endoftext|>"
REPO = pathlib.Path(__file__).resolve().parent.parent


def kjv_from_debian(workdir: pathlib.Path) -> str:
    """Downloads bible-kjv-text and bible-kjv (no install) and prints every verse."""
    subprocess.run(["apt-get", "download", "bible-kjv-text", "bible-kjv"], cwd=workdir, check=True)
    root = workdir / "root"
    for deb in sorted(workdir.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    # -f turns pretty-printing off: one verse per line, "Ge1:1 In the beginning ...".
    out = subprocess.run([str(root / "usr/bin/bible"), "-p", str(root / "usr/lib"), "-f", "gen1:1-rev22:21"],
                         check=True, capture_output=True, text=True).stdout
    return out


def clean(raw: str) -> str:
    """Drops the verse references, keeping one verse per line."""
    verses = [re.sub(r"^\S+\d+:\d+ ", "", line) for line in raw.splitlines() if line.strip()]
    return "\n".join(verses) + "\n"


def train_tokenizer(text: str) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[END_OF_TEXT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text.splitlines(keepends=True), trainer=trainer)
    return tok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--text", type=pathlib.Path, help="UTF-8 text to use instead of the Debian KJV")
    ap.add_argument("--out-dir", type=pathlib.Path, default=REPO / "data")
    args = ap.parse_args()

    if args.text:
        text = args.text.read_text(encoding="utf-8")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            text = clean(kjv_from_debian(pathlib.Path(tmp)))
    tok = train_tokenizer(text)
    assert tok.get_vocab_size() <= VOCAB_SIZE, tok.get_vocab_size()
    ids = tok.encode(text).ids + [tok.token_to_id(END_OF_TEXT)]
    tokens = np.asarray(ids, dtype=np.uint16)
    assert tokens.max() < VOCAB_SIZE
    assert tok.decode(ids[:-1]) == text, "byte-level BPE must round-trip the text exactly"

    args.out_dir.mkdir(parents=True, exist_ok=True)
    np.save(args.out_dir / "sample_tokens.npy", tokens)
    tok.save(str(args.out_dir / "sample_tokenizer.json"))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    print(f"text: {len(text.encode('utf-8'))} bytes, sha256 {digest}")
    print(f"tokens: {tokens.size} (uint16, max id {tokens.max()}), vocabulary {tok.get_vocab_size()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
