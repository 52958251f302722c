#!/usr/bin/env python3
"""A token file (.npy) in llm.c's data format, for the llmc-xl step of scripts/gpu_checks.sh: the
first nine tenths to DIR/sample_train_000000.bin, the rest to DIR/sample_val_000000.bin, each a
256 x int32 header (magic 20240520, version 1, token count) then the tokens as uint16 (the sample's
ids are below 10 000, inside GPT-2's vocabulary).

    scripts/llmc_tokens.py TOKENS.npy DIR
"""
import sys

import numpy as np


def main():
    if len(sys.argv) != 3:
        print("usage: llmc_tokens.py TOKENS.npy DIR", file=sys.stderr)
        sys.exit(2)
    toks = np.load(sys.argv[1]).astype(np.uint16)
    cut = len(toks) * 9 // 10
    for name, part in (("train", toks[:cut]), ("val", toks[cut:])):
        header = np.zeros(256, np.int32)
        header[:3] = (20240520, 1, len(part))
        with open(f"{sys.argv[2]}/sample_{name}_000000.bin", "wb") as f:
            f.write(header.tobytes())
            f.write(part.tobytes())


if __name__ == "__main__":
    main()
