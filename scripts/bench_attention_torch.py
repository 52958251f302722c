#!/usr/bin/env python3
"""PyTorch SDPA on the attention leaderboard case, timed like `paratrain bench attention`.

Default case: batch 1, 16 heads, sequence 16384, head dim 64, bf16, causal, forward+backward
with dO = ones (as `o.sum().backward()`). Backends: SDPA's FlashAttention-2 ("flash") and
cuDNN ("cudnn"); "math" (PyTorch's unfused attention) on request. Protocol (the same as
paratrain's): warm-up passes, then per-pass CUDA-event timings of forward, backward and
forward+backward, each synchronised, medians reported. TFLOP/s by the standard count:
forward 4·N²·d·heads·batch, halved when causal; backward 2.5× forward.

With --paratrain-h5 (the HDF5 file of `paratrain bench attention --study leaderboard`) the
matching flash row is read and paratrain's time is reported next to PyTorch's, with ratios.

    python3 scripts/bench_attention_torch.py [--paratrain-h5 leaderboard.h5] [--json out.json]
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


def forward_flops(b, h, n, d, causal):
    f = 4.0 * n * n * d * h * b
    return f / 2 if causal else f


def time_passes(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(iters):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        ms.append(start.elapsed_time(stop))
    return statistics.median(ms)


def bench_backend(name, args, dtype):
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, generator=gen).requires_grad_() for _ in range(3))
    dout = torch.ones(shape, device="cuda", dtype=dtype) if args.dout == "ones" else torch.randn(
        shape, device="cuda", dtype=dtype, generator=gen)
    with sdpa_kernel([BACKENDS[name]]):
        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(args.causal))

        out = fwd()  # fails here if the backend cannot take this case
        fwd_ms = time_passes(fwd, args.warmup, args.iters)
        out = fwd()
        bwd_ms = time_passes(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), args.warmup,
                             args.iters)
        out = None  # the forward's graph is freed before the fused timing
        fwdbwd_ms = time_passes(lambda: torch.autograd.grad(fwd(), (q, k, v), dout), args.warmup, args.iters)
    return {"fwd_ms": fwd_ms, "bwd_ms": bwd_ms, "fwdbwd_ms": fwdbwd_ms}


def paratrain_row(path, args, dtype_name):
    """The fastest ok flash row of paratrain's table for this case (one per kernel family)."""
    import h5py
    with h5py.File(path, "r") as f:
        table = f["attention"][()]
    best = None
    for row in table:
        get = lambda key: row[key].decode() if isinstance(row[key], bytes) else row[key]
        if (get("impl") == "flash" and get("dtype") == dtype_name and int(get("batch")) == args.batch
                and int(get("heads")) == args.heads and int(get("seq")) == args.seq
                and int(get("head_dim")) == args.head_dim and int(get("causal")) == int(args.causal)
                and get("status") == "ok"):
            r = {"kernel": get("kernel"), "fwd_ms": float(get("fwd_ms")), "bwd_ms": float(get("bwd_ms")),
                 "fwdbwd_ms": float(get("fwdbwd_ms"))}
            if best is None or r["fwdbwd_ms"] < best["fwdbwd_ms"]:
                best = r
    if best is None:
        sys.exit(f"bench_attention_torch: no matching ok flash row in {path}")
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=16384)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--causal", type=int, default=1, choices=[0, 1])
    p.add_argument("--dout", default="ones", choices=["ones", "randn"])
    p.add_argument("--backends", default="flash,cudnn", help="comma list of flash, cudnn, math")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--paratrain-h5", help="paratrain bench attention results to compare with")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]

    f = forward_flops(args.batch, args.heads, args.seq, args.head_dim, args.causal)
    flops = {"fwd_ms": f, "bwd_ms": 2.5 * f, "fwdbwd_ms": 3.5 * f}
    results = {}
    for name in [b for b in args.backends.split(",") if b]:
        try:
            results[f"torch-{name}"] = bench_backend(name, args, dtype)
        except RuntimeError as e:  # a backend that cannot run this case is reported, not fatal
            print(f"bench_attention_torch: {name}: {str(e).splitlines()[0]}", file=sys.stderr)
        torch.cuda.empty_cache()
    if args.paratrain_h5:
        best = paratrain_row(args.paratrain_h5, args, args.dtype)
        results[f"paratrain-{best.pop('kernel')}"] = best

    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  B={args.batch} H={args.heads} "
          f"N={args.seq} d={args.head_dim} {args.dtype} causal={args.causal} dO={args.dout}  "
          f"median of {args.iters} after {args.warmup} warm-up")
    print(f"{'impl':18s} {'fwd_ms':>8s} {'bwd_ms':>8s} {'fwdbwd_ms':>10s} {'fwd_TF/s':>9s} {'fwdbwd_TF/s':>12s}")
    for name, r in results.items():
        print(f"{name:18s} {r['fwd_ms']:8.3f} {r['bwd_ms']:8.3f} {r['fwdbwd_ms']:10.3f} "
              f"{flops['fwd_ms'] / r['fwd_ms'] / 1e9:9.1f} {flops['fwdbwd_ms'] / r['fwdbwd_ms'] / 1e9:12.1f}")
    ours = [name for name in results if name.startswith("paratrain-")]
    for mine in ours:
        for name, r in results.items():
            if not name.startswith("paratrain-"):
                print(f"{mine} fwd+bwd / {name}: {results[mine]['fwdbwd_ms'] / r['fwdbwd_ms']:.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "args": vars(args),
                       "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
