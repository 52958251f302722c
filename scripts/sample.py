#!/usr/bin/env python3
"""Generate text from a Hugging Face export of a paratrain model (`paratrain export --format hf
--tokenizer ...`) with `transformers`: AutoModelForCausalLM and AutoTokenizer from DIR.

    python3 scripts/sample.py DIR --prompt "In the beginning" [--max-new-tokens 100]
        [--temperature 0.8] [--seed 1]

Temperature 0 decodes greedily. Needs torch and transformers (imported only to run).
"""
import argparse
import sys


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="the exported folder (with tokenizer.json)")
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument("--max-new-tokens", type=int, default=100, help="tokens to generate")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature; 0: greedy")
    p.add_argument("--seed", type=int, default=1, help="random seed of the sampling")
    args = p.parse_args(argv)
    if args.max_new_tokens < 1 or args.temperature < 0:
        p.error("--max-new-tokens must be at least 1 and --temperature at least 0")
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
    print(tokenizer.decode(out[0], skip_special_tokens=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
