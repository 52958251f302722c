#!/usr/bin/env python3
"""PyTorch side of `paratrain bench ddp`: the reference Transformer LM (scripts/reference_model.py)
trained data-parallel with torch's own tools, timed with the same protocol (warm-up steps, then
timed steps, each ended by a device synchronisation; the same model size, context, per-rank batch,
AdamW and precision), so the two programs can be compared in one job on the same GPUs.

Strategies:
  none      no communication: each rank trains alone (the floor)
  naive     after backward, one all-reduce (average) per parameter gradient
  ddp       torch.nn.parallel.DistributedDataParallel, bucket_cap_mb (default 25)
  ddp_bf16  DDP as above with gradients on the wire in bf16: default_hooks.bf16_compress_hook
            registered (model.register_comm_hook(None, ...)), the peer of paratrain's
            `bench ddp --ddp bucketed --grad-comm bf16`. The hook divides by the world size in
            bf16 before the sum, paratrain scales the bf16 sum in fp32 after it; with a
            power-of-two world the two give the same values (barring bf16 underflow).
  zero      DDP as above + torch.distributed.optim.ZeroRedundancyOptimizer(AdamW)

Protocol per strategy and precision: a fresh model with the same seed on every rank, each rank its
own fixed random batch; --warmup untimed steps, then --steps timed ones, each timed with CUDA
events from before zero_grad to after the optimizer step and ended by a synchronisation; AdamW
(lr 1e-4, weight decay 0.01, no clipping: as bench ddp); fp32 is true FP32 (TF32 off), bf16 is
autocast; peak memory from torch.cuda.max_memory_allocated over the timed steps.

Launch (one rank per GPU; torch reads Open MPI's rank variables, or torchrun's):
  mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 \\
      python3 scripts/compare_torch_ddp.py --model xl --precision fp32,bf16 --out torch_ddp.h5
Results: a table on stdout (rank 0) and an HDF5 run record (rank 0 writes it) whose table
/ddp_torch has the column names of paratrain's /ddp table (ddp, bucket_mb, shard, grad_comm,
ranks, precision, grad_accum, step_ms, step_sd_ms, step_ms_max_rank, overhead_pct, peak_MB, tokens_per_s;
grad_comm is bf16 for ddp_bf16, fp32 otherwise); `scripts/report` sets its rows beside
paratrain's (table "DDP vs PyTorch").
"""
import argparse
import contextlib
import datetime
import math
import os
import socket
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from paratrain_report.model_sizes import SIZES  # noqa: E402  (no torch needed)
from paratrain_report.torch_cli import (add_protocol_arguments, check_attention, check_choices,  # noqa: E402
                                        resolve_out, split_list)

STRATEGIES = ("none", "naive", "ddp", "ddp_bf16", "zero")
DDP_STRATEGIES = ("ddp", "ddp_bf16", "zero")  # those wrapped in DistributedDataParallel
PRECISIONS = ("fp32", "bf16")
ROW_FIELDS = ["ddp", "bucket_mb", "shard", "grad_comm", "ranks", "precision", "grad_accum", "step_ms", "step_sd_ms",
              "step_ms_max_rank", "overhead_pct", "peak_MB", "tokens_per_s"]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="xl", help=f"named size: {', '.join(SIZES)}")
    ap.add_argument("--vocab-size", type=int, default=10000)
    ap.add_argument("--context-length", dest="context", type=int, default=512)
    ap.add_argument("--batch-size", dest="batch", type=int, default=4, help="sequences per rank per step")
    ap.add_argument("--attention", default="naive", help="naive (as bench ddp's default) or sdpa")
    ap.add_argument("--precision", default="fp32,bf16", help="comma list of fp32 (TF32 off), bf16 (autocast)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help=f"comma list of {', '.join(STRATEGIES)}")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    ap.add_argument("--grad-accum", type=int, default=1,
                    help="micro-batches per step, gradients synchronised in the last (DDP's no_sync before it)")
    add_protocol_arguments(ap, "torch_ddp", warmup=3, warmup_help="untimed steps first", steps_help="timed steps",
                           out_note="; rank 0 writes it")
    args = ap.parse_args(argv)
    args.strategies, args.precision = split_list(args.strategies), split_list(args.precision)
    check_choices(ap, "model", [args.model], SIZES, "size")
    check_choices(ap, "strategies", args.strategies, STRATEGIES, "strategy")
    check_choices(ap, "precision", args.precision, PRECISIONS, "precision")
    if not args.strategies or not args.precision:
        ap.error("--strategies and --precision need at least one value")
    check_attention(ap, args.attention)
    if (args.steps < 1 or args.warmup < 0 or args.batch < 1 or args.context < 1 or args.vocab_size < 1
            or args.grad_accum < 1):
        ap.error("--steps, --batch-size, --context-length, --vocab-size and --grad-accum must be >= 1, --warmup >= 0")
    if not args.bucket_mb > 0:
        ap.error(f"--bucket-mb must be positive (got {args.bucket_mb})")
    resolve_out(ap, args, "torch_ddp")
    return args


def make_row(strategy, precision, args, world, step_ms, step_sd_ms, step_ms_max_rank, peak_bytes):
    """One /ddp_torch row (ROW_FIELDS order); overhead_pct is filled in by add_overheads."""
    bucketed = strategy in DDP_STRATEGIES
    return {"ddp": strategy, "bucket_mb": float(args.bucket_mb) if bucketed else math.nan,
            "shard": "zero" if strategy == "zero" else "none",
            "grad_comm": "bf16" if strategy == "ddp_bf16" else "fp32", "ranks": int(world), "precision": precision,
            "grad_accum": int(args.grad_accum),
            "step_ms": float(step_ms), "step_sd_ms": float(step_sd_ms), "step_ms_max_rank": float(step_ms_max_rank),
            "overhead_pct": math.nan, "peak_MB": float(peak_bytes) / 1e6,
            "tokens_per_s": world * args.batch * args.context * args.grad_accum / (step_ms_max_rank * 1e-3)}


def add_overheads(rows):
    """overhead_pct = the slowest rank's step time over the `none` row's slowest rank, same precision
    (NaN without one): a synchronised job runs at its slowest GPU's pace, as paratrain's /ddp counts it."""
    floor = {r["precision"]: r["step_ms_max_rank"] for r in rows if r["ddp"] == "none"}
    for r in rows:
        f = floor.get(r["precision"])
        r["overhead_pct"] = (r["step_ms_max_rank"] / f - 1.0) * 100.0 if f else math.nan
    return rows


def write_results(path, rows, attrs, overwrite=False):
    """The run record: table /ddp_torch in the schema's types (strings fixed-length UTF-8, as
    paratrain's RunRecord writes them; docs/HDF5_SCHEMA.md) and the root attributes."""
    from paratrain_report import records
    records.write_record(path, {"ddp_torch": [{f: r[f] for f in ROW_FIELDS} for r in rows]}, attrs,
                         overwrite=overwrite)


def print_table(rows):
    print("  ".join(f"{c:>16}" for c in ROW_FIELDS))
    for r in rows:
        print("  ".join(f"{r[c]:>16.2f}" if isinstance(r[c], float) else f"{r[c]!s:>16}" for c in ROW_FIELDS))


# ---- the measurement (needs PyTorch and GPUs) -------------------------------------------------

def init_distributed(torch, dist):
    env = os.environ
    rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("RANK", 0)))
    world = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("WORLD_SIZE", 1)))
    local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("LOCAL_RANK", 0)))
    addr, port = env.get("MASTER_ADDR", "127.0.0.1"), env.get("MASTER_PORT", "29500")
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", local))
    return rank, world, local


def over_ranks(torch, dist, x, device):
    """Every rank's float, in rank order."""
    t = torch.tensor([float(x)], device=device, dtype=torch.float64)
    parts = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t)
    return [p.item() for p in parts]


def run_one(torch, dist, rm, strategy, precision, args, rank, world, device):
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    cfg = rm.ModelConfig.named(args.model, vocab_size=args.vocab_size, context_length=args.context,
                               attention=args.attention)
    model = rm.TransformerLM.from_config(cfg).to(device)
    params = list(model.parameters())
    if strategy in DDP_STRATEGIES:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index],
                                                          bucket_cap_mb=args.bucket_mb)
    if strategy == "ddp_bf16":  # each bucket cast to bf16, all-reduced, cast back
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    if strategy == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-4, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    g = torch.Generator(device="cpu").manual_seed(args.seed + 1000 * rank)  # each rank its batch
    ids = torch.randint(0, args.vocab_size, (args.batch, args.context), generator=g).to(device)
    tgt = torch.randint(0, args.vocab_size, (args.batch, args.context), generator=g).to(device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize(device)
        if step == args.warmup:
            torch.cuda.reset_peak_memory_stats(device)
        start.record()
        opt.zero_grad(set_to_none=True)
        for micro in range(args.grad_accum):  # DDP synchronises only the last micro-batch's backward
            last = micro == args.grad_accum - 1
            with (contextlib.nullcontext() if last or strategy not in DDP_STRATEGIES else model.no_sync()):
                with autocast:
                    logits = model(ids)
                loss = rm.cross_entropy(logits, tgt) / args.grad_accum
                loss.backward()
        if strategy == "naive":  # paratrain's naive: one averaging all-reduce per parameter
            for p in params:
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        end.record()
        torch.cuda.synchronize(device)
        if step >= args.warmup:
            times.append(start.elapsed_time(end))
    peak = torch.cuda.max_memory_allocated(device)
    means = over_ranks(torch, dist, statistics.fmean(times), device)
    sds = over_ranks(torch, dist, statistics.stdev(times) if len(times) > 1 else 0.0, device)
    peaks = over_ranks(torch, dist, peak, device)
    del model, opt, params, logits, loss
    torch.cuda.empty_cache()
    return make_row(strategy, precision, args, world, statistics.fmean(means), max(sds), max(means), max(peaks))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    import torch  # only now: --help, argument errors and the writer work without PyTorch
    import torch.distributed as dist

    import reference_model as rm

    if not torch.cuda.is_available():
        sys.exit("compare_torch_ddp.py: no CUDA device (the comparison is a GPU measurement)")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means true FP32, as paratrain's
    torch.backends.cudnn.allow_tf32 = False
    now = lambda: datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    start_time = now()
    rank, world, local = init_distributed(torch, dist)
    device = torch.device("cuda", local)
    hosts, gpus, devices = [None] * world, [None] * world, [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    dist.all_gather_object(gpus, torch.cuda.get_device_name(device))
    dist.all_gather_object(devices, str(device))
    rows = []
    for precision in args.precision:
        for s in args.strategies:
            rows.append(run_one(torch, dist, rm, s, precision, args, rank, world, device))
            r = rows[-1]
            if rank == 0:
                print(f"torch {precision} {s}: {r['step_ms']:.2f} ms/step (sd {r['step_sd_ms']:.2f}), "
                      f"peak {r['peak_MB']:.0f} MB", flush=True)
    add_overheads(rows)
    if rank == 0:
        print_table(rows)
        attrs = {"subcommand": "compare_torch_ddp", "program": "scripts/compare_torch_ddp.py",
                 "command_line": " ".join([sys.argv[0]] + list(argv)), "start_time": start_time,
                 "commit_time": now(), "torch_version": torch.__version__,
                 "cuda_runtime_version": str(torch.version.cuda),
                 "nccl_version": ".".join(map(str, torch.cuda.nccl.version())), "world_size": world,
                 "hosts": hosts, "gpus": gpus, "devices": devices,
                 "precision": ",".join(args.precision)}
        for k, v in vars(args).items():
            attrs[f"option.{k.replace('_', '-')}"] = ",".join(map(str, v)) if isinstance(v, list) else str(v)
        write_results(args.out, rows, attrs, overwrite=args.overwrite)
        print(f"results: {args.out}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
