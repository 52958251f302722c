#!/usr/bin/env python3
"""Check a Hugging Face export of a paratrain checkpoint with `transformers` itself: load DIR
with LlamaForCausalLM (fp32, CPU), run it on a fixed token sequence and compare its logits with
paratrain's own forward on the same tokens (`paratrain export --format logits`, fp32 on the CPU).

    python3 scripts/hf_check.py DIR --checkpoint ck.h5 [--paratrain build/paratrain] [--tokens 1,2,3]

Prints the largest relative error, max |hf - paratrain| / max |paratrain|, and exits 1 above
--tolerance (1e-4), 2 on bad arguments. Needs torch and transformers (imported only to run).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def default_tokens(vocab_size, context_length):
    """A fixed sequence that fills the context and spreads over the vocabulary."""
    n = min(context_length, 16)
    return [(7 + 1543 * i) % vocab_size for i in range(n)]


def paratrain_logits(binary, checkpoint, tokens):
    """paratrain's fp32 logits (T, V) on `tokens`, computed on the CPU by the binary."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        proc = subprocess.run([binary, "export", "--checkpoint", checkpoint, "--format", "logits",
                               "--tokens", ",".join(map(str, tokens)), "--out", out],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"paratrain export --format logits failed ({proc.returncode}): {proc.stderr.strip()}")
        return np.load(out)


def max_rel_error(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want)) / np.max(np.abs(want)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="the folder `paratrain export --format hf` wrote")
    p.add_argument("--checkpoint", required=True, help="the checkpoint it was exported from")
    p.add_argument("--paratrain", default=os.path.join(REPO, "build", "paratrain"), help="the paratrain binary")
    p.add_argument("--tokens", help="comma-separated token ids (default: a fixed sequence)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="the largest relative error accepted")
    args = p.parse_args(argv)
    import json

    import torch
    from transformers import LlamaForCausalLM

    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    tokens = ([int(t) for t in args.tokens.split(",")] if args.tokens
              else default_tokens(cfg["vocab_size"], cfg["max_position_embeddings"]))
    want = paratrain_logits(args.paratrain, args.checkpoint, tokens)
    model = LlamaForCausalLM.from_pretrained(args.dir, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        got = model(torch.tensor([tokens])).logits[0].numpy()
    err = max_rel_error(got, want)
    ok = err <= args.tolerance
    print(f"hf_check: {len(tokens)} tokens, max relative logit error {err:.3e} "
          f"({'within' if ok else 'ABOVE'} {args.tolerance:g}), transformers vs paratrain")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
