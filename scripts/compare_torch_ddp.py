#!/usr/bin/env python3
"""PyTorch side of `paratrain bench ddp`: the reference Transformer LM trained data-parallel
with torch's own tools, timed with the same protocol (warm-up steps, then timed steps, each
ended by a device synchronisation; the same model size, context, per-rank batch, AdamW and
precision), so the two programs can be compared in one job on the same GPUs.

Strategies:
  none    no communication: each rank trains alone (the floor)
  naive   after backward, one all-reduce per parameter gradient (then divided by world size)
  ddp     torch.nn.parallel.DistributedDataParallel, bucket_cap_mb (default 25)
  zero    DDP as above + torch.distributed.optim.ZeroRedundancyOptimizer(AdamW)

Launch (one rank per GPU; torch reads Open MPI's rank variables, or torchrun's):
  mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 \
      python3 scripts/compare_torch_ddp.py --model xl --precision fp32,bf16 --out torch_ddp.h5
Results: a table on stdout (rank 0) and, with --out, an HDF5 file whose /ddp_torch table has
the column names of paratrain's /ddp table (ddp, bucket_mb, shard, ranks, precision, step_ms,
step_sd_ms, overhead_pct, peak_MB, tokens_per_s).
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

SIZES = {  # d_model, d_ff, num_layers, num_heads (vocabulary 10000)
    "small": (768, 3072, 12, 12),
    "medium": (1024, 4096, 24, 16),
    "large": (1280, 5120, 36, 20),
    "xl": (1600, 6400, 48, 25),
    "2.7b": (2560, 10240, 32, 32),
}


# ---- the reference model (same architecture, names and initialisation as paratrain's) ----
def trunc_normal_(t, std):
    nn.init.trunc_normal_(t, mean=0.0, std=std, a=-3 * std, b=3 * std)


class Linear(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        trunc_normal_(self.weight, math.sqrt(2.0 / (d_in + d_out)))

    def forward(self, x):
        return x @ self.weight.t()


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x * self.weight).to(dtype)


def rope(x, theta):
    # x (B, H, T, D): rotate pairs (2i, 2i+1) by position·theta^(−2i/D)
    _, _, t, d = x.shape
    inv = theta ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = torch.arange(t, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Attention(nn.Module):
    def __init__(self, d_model, heads, theta):
        super().__init__()
        self.h, self.theta = heads, theta
        self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)

    def forward(self, x):
        b, t, c = x.shape
        split = lambda y: y.view(b, t, self.h, c // self.h).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        q, k = rope(q, self.theta), rope(k, self.theta)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)  # materialised, as the reference
        mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
        probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        y = (probs @ v).transpose(1, 2).reshape(b, t, c)
        return self.output_proj(y)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1, self.w2, self.w3 = Linear(d_model, d_ff), Linear(d_ff, d_model), Linear(d_model, d_ff)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d_model, heads, d_ff, theta):
        super().__init__()
        self.ln1, self.attn = RMSNorm(d_model), Attention(d_model, heads, theta)
        self.ln2, self.ffn = RMSNorm(d_model), SwiGLU(d_model, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TransformerLM(nn.Module):
    def __init__(self, vocab, d_model, layers, heads, d_ff, theta=10000.0):
        super().__init__()
        self.token_embeddings = nn.Embedding(vocab, d_model)
        trunc_normal_(self.token_embeddings.weight, 1.0)
        self.layers = nn.ModuleList(Block(d_model, heads, d_ff, theta) for _ in range(layers))
        self.ln_final = RMSNorm(d_model)
        self.lm_head = Linear(d_model, vocab)

    def forward(self, ids):
        x = self.token_embeddings(ids)
        for blk in self.layers:
            x = blk(x)
        return self.lm_head(self.ln_final(x))


# ---- launch ----------------------------------------------------------------------------
def init_distributed():
    env = os.environ
    rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("RANK", 0)))
    world = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE", 1)))
    local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("LOCAL_RANK", 0)))
    addr, port = env.get("MASTER_ADDR", "127.0.0.1"), env.get("MASTER_PORT", "29500")
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", local))
    return rank, world, local


def stats_over_ranks(x, device):
    """(mean, max) of a per-rank float."""
    t = torch.tensor([x], device=device, dtype=torch.float64)
    all_ = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(all_, t)
    vals = [a.item() for a in all_]
    return sum(vals) / len(vals), max(vals)


def run_one(strategy, precision, args, rank, world, device):
    d_model, d_ff, layers, heads = SIZES[args.model]
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = TransformerLM(args.vocab_size, d_model, layers, heads, d_ff).to(device)
    params = list(model.parameters())
    torch.cuda.reset_peak_memory_stats(device)
    if strategy in ("ddp", "zero"):
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index],
                                                    bucket_cap_mb=args.bucket_mb)
    if strategy == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-4)
    else:
        opt = torch.optim.AdamW(params, lr=1e-4)
    g = torch.Generator(device="cpu").manual_seed(args.seed + 1000 * rank)  # each rank its batch
    ids = torch.randint(0, args.vocab_size, (args.batch, args.context), generator=g).to(device)
    tgt = torch.randint(0, args.vocab_size, (args.batch, args.context), generator=g).to(device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")

    times = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.reset_peak_memory_stats(device)
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            logits = model(ids)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))
        loss.backward()
        if strategy == "naive":
            for p in params:
                dist.all_reduce(p.grad)
                p.grad.div_(world)
        opt.step()
        torch.cuda.synchronize(device)
        if step >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    peak = torch.cuda.max_memory_allocated(device)
    mean, max_rank = stats_over_ranks(statistics.mean(times), device)
    sd, _ = stats_over_ranks(statistics.stdev(times) if len(times) > 1 else 0.0, device)
    _, peak_max = stats_over_ranks(float(peak), device)
    del model, opt, params
    torch.cuda.empty_cache()
    return {"ddp": strategy, "bucket_mb": args.bucket_mb if strategy in ("ddp", "zero") else float("nan"),
            "shard": "zero" if strategy == "zero" else "none", "ranks": world, "precision": precision,
            "step_ms": mean, "step_sd_ms": sd, "step_ms_max_rank": max_rank, "peak_MB": peak_max / 1e6,
            "tokens_per_s": world * args.batch * args.context / (mean * 1e-3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="xl", choices=sorted(SIZES))
    ap.add_argument("--vocab-size", type=int, default=10000)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4, help="sequences per rank per step")
    ap.add_argument("--precision", default="fp32,bf16", help="comma list of fp32, bf16")
    ap.add_argument("--strategies", default="none,naive,ddp,zero", help="comma list of none, naive, ddp, zero")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--out", default="", help="HDF5 file for the table (rank 0 writes it)")
    args = ap.parse_args()
    strategies = [s for s in args.strategies.split(",") if s]
    precisions = [p for p in args.precision.split(",") if p]
    for s in strategies:
        if s not in ("none", "naive", "ddp", "zero"):
            sys.exit(f"compare_torch_ddp.py: unknown strategy '{s}'")
    for p in precisions:
        if p not in ("fp32", "bf16"):
            sys.exit(f"compare_torch_ddp.py: unknown precision '{p}'")

    # True FP32 in fp32 mode (paratrain's fp32 never uses TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rank, world, local = init_distributed()
    device = torch.device("cuda", local)
    rows = []
    for precision in precisions:
        floor = None
        for s in strategies:
            r = run_one(s, precision, args, rank, world, device)
            if s == "none":
                floor = r["step_ms"]
            r["overhead_pct"] = (r["step_ms"] / floor - 1) * 100 if floor else float("nan")
            rows.append(r)
            if rank == 0:
                print(f"torch {precision} {s}: {r['step_ms']:.2f} ms/step (sd {r['step_sd_ms']:.2f}), "
                      f"peak {r['peak_MB']:.0f} MB", flush=True)
    if rank == 0:
        cols = ["ddp", "bucket_mb", "shard", "ranks", "precision", "step_ms", "step_sd_ms",
                "step_ms_max_rank", "overhead_pct", "peak_MB", "tokens_per_s"]
        print("  ".join(f"{c:>14}" for c in cols))
        for r in rows:
            print("  ".join(f"{r[c]:>14.2f}" if isinstance(r[c], float) else f"{r[c]:>14}" for c in cols))
        if args.out:
            write_h5(args.out, rows, cols, args, world)
            print(f"results: {args.out}")
    dist.destroy_process_group()


def write_h5(path, rows, cols, args, world):
    import h5py
    import numpy as np
    fields = []
    for c in cols:
        v = rows[0][c]
        fields.append((c, h5py.string_dtype() if isinstance(v, str) else (np.int64 if isinstance(v, int) else np.float64)))
    data = np.array([tuple(r[c] for c in cols) for r in rows], dtype=fields)
    tmp = f"{path}.tmp.{os.getpid()}"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("ddp_torch", data=data)
        f.attrs["program"] = "scripts/compare_torch_ddp.py"
        f.attrs["torch_version"] = torch.__version__
        f.attrs["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
        f.attrs["device"] = torch.cuda.get_device_name()
        f.attrs["world_size"] = world
        for k, v in vars(args).items():
            f.attrs[f"option.{k}"] = str(v)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
