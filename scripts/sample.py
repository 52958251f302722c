#!/usr/bin/env python3
"""Generate text from a Hugging Face export of a paratrain model (`paratrain export --format hf
--tokenizer ...`): with `transformers` (AutoModelForCausalLM, AutoTokenizer from DIR) where torch
is installed, else with NumPy (scripts/llama_numpy.py and the `tokenizers` package).

    python3 scripts/sample.py DIR --prompt "In the beginning" [--max-new-tokens 100]
        [--temperature 0.8] [--seed 1] [--backend auto|transformers|numpy]

Temperature 0 decodes greedily.
"""
import argparse
import os
import sys


def transformers_importable():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def sample_numpy(args):
    import numpy as np
    from llama_numpy import generate, load
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(os.path.join(args.dir, "tokenizer.json"))
    cfg, weights = load(args.dir)
    ids = tokenizer.encode(args.prompt).ids or [cfg.get("bos_token_id", 0)]
    out = generate(cfg, weights, ids, args.max_new_tokens, args.temperature, np.random.default_rng(args.seed))
    print(args.prompt + tokenizer.decode(out[len(ids):], skip_special_tokens=True))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="the exported folder (with tokenizer.json)")
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument("--max-new-tokens", type=int, default=100, help="tokens to generate")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature; 0: greedy")
    p.add_argument("--seed", type=int, default=1, help="random seed of the sampling")
    p.add_argument("--backend", choices=["auto", "transformers", "numpy"], default="auto",
                   help="auto: transformers if torch imports, else numpy")
    args = p.parse_args(argv)
    if args.max_new_tokens < 1 or args.temperature < 0:
        p.error("--max-new-tokens must be at least 1 and --temperature at least 0")
    if not os.path.isfile(os.path.join(args.dir, "tokenizer.json")):
        print(f"sample.py: {args.dir}: no tokenizer.json (export with --tokenizer)", file=sys.stderr)
        return 1
    backend = args.backend
    if backend == "auto":
        backend = "transformers" if transformers_importable() else "numpy"
    if backend == "numpy":
        return sample_numpy(args)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.dir)
    model = AutoModelForCausalLM.from_pretrained(args.dir).eval()
    ids = tokenizer(args.prompt, return_tensors="pt").input_ids
    # The model saw at most max_position_embeddings tokens: keep the prompt's end within it.
    ids = ids[:, -max(1, model.config.max_position_embeddings - args.max_new_tokens):]
    sampling = {"do_sample": True, "temperature": args.temperature} if args.temperature > 0 else {"do_sample": False}
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=args.max_new_tokens, pad_token_id=tokenizer.eos_token_id, **sampling)
    print(args.prompt + tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
