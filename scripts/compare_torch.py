#!/usr/bin/env python3
"""Time the PyTorch reference model's train step (forward, loss, backward, clip + AdamW) with the
protocol of `paratrain bench model`, eager (fp32 and bf16 autocast) and with torch.compile, and
write the table "torch_model" (stdout and an HDF5 run record) that `scripts/report` sets beside
paratrain's rows as ratios.

Protocol per configuration: a fresh model (seeded), fixed random tokens; --warmup untimed steps,
then --steps measured steps; every phase timed with CUDA events and each step ended by a device
synchronisation; mean and sample standard deviation per phase; peak memory from
torch.cuda.max_memory_allocated over the measured steps; tokens/s; MFU = (6·N + attention term)
FLOPs per token × tokens / step time / the device's dense peak for the precision. fp32 is true
FP32 (TF32 off); bf16 is autocast (FP32 weights and optimizer state). "compile" compiles the
model with torch.compile (its backward follows); the loss and AdamW (PyTorch's default, foreach)
run as in eager. Out-of-memory configurations are recorded with status "oom" and the sweep goes on.

Run it in the same job as paratrain, on the same GPU:
    build/paratrain bench model --model small,medium,large,xl,2.7b --context-length 512 --precision fp32,bf16 \\
        --attention flash --out results/paratrain_model.h5
    python3 scripts/compare_torch.py --out results/torch_model.h5
    scripts/report results/paratrain_model.h5 results/torch_model.h5 --out results/report
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from paratrain_report.model_sizes import SIZES, dense_peak_flops  # noqa: E402
from paratrain_report.torch_cli import (add_protocol_arguments, check_attention, check_choices,  # noqa: E402
                                        resolve_out, split_list)

REFERENCE_SIZES = [s for s in SIZES if s != "tiny"]
VARIANTS = ("eager", "compile")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", dest="sizes", default=",".join(REFERENCE_SIZES), help=f"comma list of {', '.join(SIZES)}")
    ap.add_argument("--context-length", dest="contexts", default="512", help="comma list of context lengths")
    ap.add_argument("--batch-size", type=int, default=4, help="sequences per step")
    ap.add_argument("--vocab-size", type=int, default=10000)
    ap.add_argument("--precision", dest="precisions", default="fp32,bf16", help="comma list of fp32 (TF32 off), bf16 (autocast)")
    ap.add_argument("--variants", default="eager,compile", help="comma list of eager, compile (torch.compile)")
    ap.add_argument("--attention", default="naive",
                    help="naive (scores materialised, as the reference) or sdpa (F.scaled_dot_product_attention)")
    ap.add_argument("--compile-mode", default="default", help="torch.compile mode (default, max-autotune, ...)")
    add_protocol_arguments(ap, "torch_model", warmup=5, warmup_help="untimed steps first (compile happens here)",
                           steps_help="measured steps")
    args = ap.parse_args(argv)
    args.sizes, args.precisions, args.variants = (split_list(args.sizes), split_list(args.precisions),
                                                  split_list(args.variants))
    try:
        args.contexts = [int(c) for c in split_list(args.contexts)]
    except ValueError:
        ap.error(f"--context-length: not a list of integers: {args.contexts}")
    check_choices(ap, "model", args.sizes, SIZES, "size")
    check_choices(ap, "precision", args.precisions, ("fp32", "bf16"), "precision")
    check_choices(ap, "variants", args.variants, VARIANTS, "variant")
    check_attention(ap, args.attention)
    if args.steps < 1 or args.warmup < 0 or args.batch_size < 1 or not all(c > 0 for c in args.contexts):
        ap.error("--steps and --batch-size must be >= 1, --warmup >= 0, --context-length positive")
    resolve_out(ap, args, "torch_model")
    return args


def summary(xs):
    nan = float("nan")
    if not xs:
        return nan, nan
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def measure(torch, rm, size, context, precision, variant, args, device):
    """One configuration: returns the row's measured fields."""
    torch.manual_seed(args.seed)
    cfg = rm.ModelConfig.named(size, vocab_size=args.vocab_size, context_length=context, attention=args.attention)
    model = rm.TransformerLM.from_config(cfg).to(device)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    fwd = torch.compile(model, mode=None if args.compile_mode == "default" else args.compile_mode) \
        if variant == "compile" else model
    gen = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, args.vocab_size, (args.batch_size, context), generator=gen).to(device)
    targets = torch.randint(0, args.vocab_size, (args.batch_size, context), generator=gen).to(device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")
    events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    phases = {"forward": [], "backward": [], "optimizer": [], "step": []}
    first_step_ms = float("nan")
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        events[0].record()
        opt.zero_grad(set_to_none=True)  # in the forward phase, as paratrain's step
        with autocast:
            logits = fwd(ids)
        loss = rm.cross_entropy(logits, targets)
        events[1].record()
        loss.backward()
        events[2].record()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        events[3].record()
        torch.cuda.synchronize(device)
        if i == 0:
            first_step_ms = (time.perf_counter() - t0) * 1e3  # includes compilation for torch.compile
        if i >= args.warmup:
            f, b, o = (events[k].elapsed_time(events[k + 1]) for k in range(3))
            for name, ms in (("forward", f), ("backward", b), ("optimizer", o), ("step", f + b + o)):
                phases[name].append(ms)
    peak = torch.cuda.max_memory_allocated(device)
    row = {}
    for name, xs in phases.items():
        row[f"{name}_ms_mean"], row[f"{name}_ms_sd"] = summary(xs)
    row["first_step_ms"] = first_step_ms
    row["peak_memory_bytes"] = int(peak)
    row["flops_per_step"] = cfg.train_flops_per_token(context) * args.batch_size * context
    del model, fwd, opt, params, logits, loss
    return row


ROW_FIELDS = ["size", "d_model", "num_layers", "context_length", "batch_size", "precision", "attention", "variant",
              "mode", "warmup_steps", "measured_steps", "status", "forward_ms_mean", "forward_ms_sd",
              "backward_ms_mean", "backward_ms_sd", "optimizer_ms_mean", "optimizer_ms_sd", "step_ms_mean",
              "step_ms_sd", "first_step_ms", "tokens_per_s", "tflops", "peak_tflops", "mfu", "peak_memory_bytes"]
MEASURED_FIELDS = ROW_FIELDS[ROW_FIELDS.index("forward_ms_mean"):]


def make_row(size, context, precision, variant, args, measured, peak_flops, status):
    nan = float("nan")
    d_model, _, num_layers, _ = SIZES[size]
    row = {"size": size, "d_model": d_model, "num_layers": num_layers, "context_length": context,
           "batch_size": args.batch_size, "precision": precision, "attention": args.attention, "variant": variant,
           "mode": "train-step", "warmup_steps": args.warmup, "measured_steps": args.steps, "status": status}
    for f in MEASURED_FIELDS:
        row[f] = measured.get(f, 0 if f == "peak_memory_bytes" else nan)
    step_s = row["step_ms_mean"] * 1e-3
    if status == "ok":
        row["tokens_per_s"] = args.batch_size * context / step_s
        row["tflops"] = measured["flops_per_step"] / step_s / 1e12
        row["mfu"] = measured["flops_per_step"] / step_s / peak_flops if peak_flops else nan
    row["peak_tflops"] = peak_flops / 1e12 if peak_flops else nan
    return row


def print_table(rows):
    cols = ["size", "context_length", "precision", "variant", "status", "forward_ms_mean", "backward_ms_mean",
            "optimizer_ms_mean", "step_ms_mean", "step_ms_sd", "tokens_per_s", "mfu", "peak_memory_bytes"]
    print("  ".join(f"{c:>16}" for c in cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            cells.append(f"{v:>16.4f}" if c == "mfu" else f"{v:>16.2f}" if isinstance(v, float) else f"{v!s:>16}")
        print("  ".join(cells))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch  # only now: --help works without PyTorch

    import reference_model as rm
    from paratrain_report import records

    if not torch.cuda.is_available():
        sys.exit("compare_torch.py: no CUDA device (the comparison is a GPU measurement)")
    device = torch.device("cuda", torch.cuda.current_device())
    gpu = torch.cuda.get_device_name(device)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means true FP32, as paratrain's
    torch.backends.cudnn.allow_tf32 = False
    start = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = []
    for size in args.sizes:
        for context in args.contexts:
            for precision in args.precisions:
                peak = dense_peak_flops(gpu, precision)
                for variant in args.variants:
                    try:
                        m, status = measure(torch, rm, size, context, precision, variant, args, device), "ok"
                    except torch.cuda.OutOfMemoryError:
                        m, status = {}, "oom"
                    if variant == "compile":
                        torch._dynamo.reset()  # each configuration compiles its own graphs
                    torch.cuda.empty_cache()
                    row = make_row(size, context, precision, variant, args, m, peak, status)
                    rows.append(row)
                    print(f"torch {size} ctx{context} {precision} {variant}: "
                          + (f"step {row['step_ms_mean']:.2f} ms (sd {row['step_ms_sd']:.2f})" if status == "ok"
                             else "out of memory"), flush=True)
    print()
    print_table(rows)
    attrs = {"subcommand": "compare_torch", "command_line": " ".join([sys.argv[0]] + (argv or sys.argv[1:])),
             "start_time": start, "program": "scripts/compare_torch.py", "torch_version": torch.__version__,
             "cuda_runtime_version": str(torch.version.cuda), "world_size": 1, "hosts": [socket.gethostname()],
             "gpus": [gpu], "devices": [str(device)],
             "commit_time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    for k, v in vars(args).items():
        attrs[f"option.{k.replace('_', '-')}"] = ",".join(map(str, v)) if isinstance(v, list) else str(v)
    records.write_record(args.out, {"torch_model": [{f: r[f] for f in ROW_FIELDS} for r in rows]}, attrs,
                         overwrite=args.overwrite)
    print(f"\nresults: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
