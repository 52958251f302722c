"""Hand-made run records in paratrain's HDF5 schema (docs/HDF5_SCHEMA.md) with known values:
for kinds the CPU build cannot produce (bf16, GPUs, several ranks) and for checks that need
exact numbers (the overhead fit)."""
import math

import numpy as np

from paratrain_report import overhead, records
from paratrain_report.model_sizes import SIZES, VOCAB_SIZE

GPU = "NVIDIA H100 80GB HBM3"
# The bench ddp records' known link: bandwidth (bytes/s) and per-call cost (s) the fits recover.
BANDWIDTH, CALL_COST = 40e9, 1.5e-3


def write_record(path, subcommand, tables, attrs=None, datasets=None, world_size=1, gpu=GPU):
    """A run record as paratrain writes it: tables name -> list of row dicts (column order)."""
    base = {"subcommand": subcommand, "world_size": world_size, "gpus": [gpu] * world_size,
            "hosts": ["node0"] * world_size}
    records.write_record(path, tables, {**base, **(attrs or {})}, datasets, overwrite=True)


# ---- bench model ---------------------------------------------------------------------------

def model_row(size="small", ctx=512, precision="fp32", attention="flash", warmup=5, step_ms=100.0, sd=1.0,
              status="ok", peak=2 << 30, first_step_ms=None, mfu=0.3):
    nan = float("nan")
    ok = status == "ok"
    d_model, _, layers, _ = SIZES[size]
    return {"size": size, "d_model": d_model, "num_layers": layers, "context_length": ctx, "batch_size": 4,
            "precision": precision, "attention": attention, "mode": "train-step", "warmup_steps": warmup,
            "measured_steps": 10, "status": status, "oom_requested_bytes": 0 if ok else 1 << 34,
            "forward_ms_mean": step_ms * 0.3 if ok else nan, "forward_ms_sd": sd if ok else nan,
            "backward_ms_mean": step_ms * 0.6 if ok else nan, "backward_ms_sd": sd if ok else nan,
            "optimizer_ms_mean": step_ms * 0.1 if ok else nan, "optimizer_ms_sd": sd if ok else nan,
            "step_ms_mean": step_ms if ok else nan, "step_ms_sd": sd if ok else nan,
            "first_step_ms": (first_step_ms or step_ms * 3) if ok else nan,
            "tokens_per_s": 4 * ctx / (step_ms * 1e-3) if ok else nan, "tflops": 100.0 if ok else nan,
            "peak_tflops": 989.4, "mfu": mfu if ok else nan, "peak_memory_bytes": peak if ok else 0}


def memory_row(size="small", ctx=512, precision="fp32", attention="flash", fwd=1 << 30, step=3 << 30):
    return {"size": size, "context_length": ctx, "batch_size": 4, "precision": precision, "attention": attention,
            "status": "ok", "peak_forward_bytes": fwd, "peak_train_step_bytes": step,
            "before_backward_bytes": step // 2, "peak_parameters_bytes": step // 6, "peak_gradients_bytes": step // 6,
            "peak_optimizer_state_bytes": step // 3, "peak_activations_bytes": step // 4,
            "peak_workspace_bytes": 1 << 20, "peak_other_bytes": 0,
            "timeline": f"/memory_timeline/{size}_ctx{ctx}_{precision}_{attention}_w5"}


def memory_timeline(n_layers=3):
    """A small train-step timeline: activations per layer, their gradients, optimizer state."""
    events = []  # (delta, category, tag)
    for i in range(n_layers):
        events.append((8 << 20, 3, f"layers.{i}.attn.scores"))
        events.append((2 << 20, 3, f"layers.{i}.ffn.hidden"))
    events.append((40 << 20, 3, "lm_head.logits"))
    for i in reversed(range(n_layers)):
        events.append((4 << 20, 4, f"layers.{i}.backward.workspace"))
        events.append((-(4 << 20), 4, f"layers.{i}.backward.workspace"))
        events.append((-(8 << 20), 3, f"layers.{i}.attn.scores"))
        events.append((-(2 << 20), 3, f"layers.{i}.ffn.hidden"))
    events.append((-(40 << 20), 3, "lm_head.logits"))
    events.append((16 << 20, 2, "optimizer.exp_avg"))
    events.append((16 << 20, 2, "optimizer.exp_avg_sq"))
    base = 24 << 20
    in_use = base + np.cumsum([e[0] for e in events])
    return {"time_s": np.linspace(0.0, 0.1, len(events)), "bytes_in_use": in_use.astype(np.int64),
            "delta_bytes": np.array([e[0] for e in events], dtype=np.int64),
            "category": np.array([e[1] for e in events], dtype=np.int64), "tag": [e[2] for e in events]}


def roofline_row(pass_="train-step", phase="forward", family="matmul", gflop=1000.0, gbytes=2.0, achieved_ms=2.0,
                 peak_tflops=989.4, copy_GBps=3000.0, size="small", ctx=512, precision="bf16", attention="flash"):
    """A /model_roofline row whose floor, ratio and bound follow from its FLOPs and bytes as the
    binary derives them for a single op (the sum over ops is that op's floor)."""
    compute = gflop * 1e9 / (peak_tflops * 1e12) * 1e3 if peak_tflops == peak_tflops else 0.0
    memory = gbytes / copy_GBps * 1e3
    floor = max(compute, memory)
    return {"size": size, "context_length": ctx, "precision": precision, "attention": attention, "fused": "on",
            "pass": pass_, "phase": phase, "family": family, "gflop": gflop, "gbytes": gbytes,
            "achieved_ms": achieved_ms, "floor_ms": floor, "ratio": achieved_ms / floor if floor > 0 else math.nan,
            "bound": ("compute" if compute > memory else "memory") if floor > 0 else "none",
            "peak_tflops": peak_tflops, "copy_GBps": copy_GBps}


def model_file(path, rows, memory_rows=None, timelines=None, breakdown=None, roofline=None):
    tables = {"model": rows}
    if memory_rows:
        tables["model_memory"] = memory_rows
    if breakdown:
        tables["model_breakdown"] = breakdown
    if roofline:
        tables["model_roofline"] = roofline
    datasets = {}
    for name, tl in (timelines or {}).items():
        for k, v in tl.items():
            datasets[f"memory_timeline/{name}/{k}"] = v
    write_record(path, "bench model", tables, datasets=datasets)


# ---- bench attention -----------------------------------------------------------------------

def attention_row(impl, seq, d=64, dtype="bf16", ms=1.0, status="ok"):
    nan = float("nan")
    ok = status == "ok"
    return {"impl": impl, "dtype": dtype, "batch": 1, "heads": 1, "seq": seq, "head_dim": d, "causal": 1,
            "status": status, "fwd_ms": ms if ok else nan, "bwd_ms": 2.5 * ms if ok else nan,
            "fwdbwd_ms": 3.5 * ms if ok else nan, "fwd_tflops": 1.0, "bwd_tflops": 1.0, "fwdbwd_tflops": 1.0,
            "iters": 10, "mem_before_bwd_MiB": (seq * seq / 1e4 if impl == "naive" else seq / 100) if ok else nan,
            "peak_MiB": 1.0, "oom_request_bytes": 0 if ok else 1 << 36}


# ---- bench allreduce -----------------------------------------------------------------------

def allreduce_rows(backend, ranks, sizes, bw_GBps=100.0, latency_us=10.0):
    rows = []
    for b in sizes:
        t = latency_us + b / (bw_GBps * 1e3)
        algbw = b / (t * 1e-6) / 1e9
        rows.append({"backend": backend, "ranks": ranks, "bytes": b, "count": b // 4, "type": "float",
                     "redop": "sum", "time_us": t, "time_us_max": t * 1.01, "algbw_GBps": algbw,
                     "busbw_GBps": algbw * 2 * (ranks - 1) / ranks, "wrong": 0})
    return rows


# ---- bench ddp -----------------------------------------------------------------------------

DDP_MODEL = "small"


def ddp_param_numels(size=DDP_MODEL):
    d_model, d_ff, layers, _ = SIZES[size]
    return overhead.reference_param_numels(VOCAB_SIZE, d_model, layers, d_ff)


def ddp_row(ddp, step_ms, bucket_mb=float("nan"), shard="none", ranks=2, precision="fp32", floor=None,
            optstate_MB=500.0):
    return {"ddp": ddp, "bucket_mb": bucket_mb, "shard": shard, "ranks": ranks, "precision": precision,
            "step_ms": step_ms, "step_sd_ms": 0.5, "step_ms_max_rank": step_ms * 1.01,
            "overhead_pct": (step_ms / floor - 1) * 100 if floor else 0.0,
            "exposed_comm_ms": max(0.0, step_ms - (floor or step_ms)), "comm_MB": 500.0,
            "tokens_per_s": 4096 / step_ms * 1e3, "peak_MB": 3000.0,
            "init_MB": 1500.0, "init_params_MB": 500.0, "init_grads_MB": 500.0, "init_optstate_MB": 0.0,
            "before_step_MB": 2500.0, "before_step_params_MB": 500.0, "before_step_grads_MB": 500.0,
            "before_step_optstate_MB": 0.0, "before_step_acts_MB": 1000.0,
            "step_MB": 2600.0, "step_params_MB": 500.0, "step_grads_MB": 500.0,
            "step_optstate_MB": optstate_MB, "step_acts_MB": 100.0}


def ddp_file(path, w_Bps, o_s, t0_ms=200.0, buckets_mb=(0, 1, 10, 100, 1000), ranks=2, precision="fp32",
             shards=False, events=False, model_attrs=True, grad_comm=None):
    """Step times exactly t0 + s/(n_b·w) + n_b·o for the bucketed rows. grad_comm: None writes no
    grad_comm column (a file from before --grad-comm); else the rows of every strategy once per
    wire type listed, bf16 ones moving s/2 bytes (and zero1 5 ms faster)."""
    numels = ddp_param_numels()
    s = 4.0 * sum(numels)

    def bucketed_ms(mb, s_wire):  # the overhead model, exactly
        nb = overhead.bucket_count(numels, mb)
        return t0_ms + 1e3 * (s_wire / (nb * w_Bps) + nb * o_s)

    rows = [ddp_row("none", t0_ms, ranks=ranks, precision=precision, floor=t0_ms)]
    wires = ["fp32"]
    for wire in grad_comm or ("fp32",):
        s_wire = s / 2 if wire == "bf16" else s
        first = len(rows)
        rows.append(ddp_row("flat", t0_ms + 1e3 * (s_wire / w_Bps + o_s), ranks=ranks, precision=precision,
                            floor=t0_ms))
        caps = list(buckets_mb) + ([25] if shards and 25 not in buckets_mb else [])
        for mb in caps:
            rows.append(ddp_row("bucketed", bucketed_ms(mb, s_wire), bucket_mb=float(mb), ranks=ranks,
                                precision=precision, floor=t0_ms))
        if shards:
            rows.append(ddp_row("bucketed", bucketed_ms(25, s_wire) + 10, bucket_mb=25.0, shard="broadcast",
                                ranks=ranks, precision=precision, floor=t0_ms, optstate_MB=500.0 / ranks))
            rows.append(ddp_row("reduce_scatter", t0_ms + 35 - (5 if wire == "bf16" else 0), shard="zero1",
                                ranks=ranks, precision=precision, floor=t0_ms, optstate_MB=500.0 / ranks))
        wires += [wire] * (len(rows) - first)
    if grad_comm is not None:
        for r, wire in zip(rows, wires):
            r["grad_comm"] = wire
    tables = {"ddp": rows}
    if events:
        tables["ddp_events"] = ddp_events(ranks)
    d_model, d_ff, layers, heads = SIZES[DDP_MODEL]
    attrs = {"option.model": DDP_MODEL, "option.precision": precision, "option.d-model": "0"}
    if model_attrs:  # the resolved shape, as bench ddp records it; else only the named size
        attrs.update({"model.d_model": d_model, "model.num_layers": layers, "model.num_heads": heads,
                      "model.d_ff": d_ff, "model.vocab_size": VOCAB_SIZE})
    write_record(path, "bench ddp", tables, attrs=attrs, world_size=ranks)
    return s


def ddp_events(ranks):
    """One step per configuration: forward, backward in 4 chunks; flat syncs after backward,
    bucketed overlaps its all-reduces with the backward chunks."""
    rows = []
    for ddp, bucket in (("flat", math.nan), ("bucketed", 25.0)):
        for r in range(ranks):
            t = 0.0

            def ev(stream, name, start, end):
                rows.append({"ddp": ddp, "bucket_mb": bucket, "shard": "none", "rank": r, "step": 0,
                             "stream": stream, "name": name, "start_ms": start, "end_ms": end})

            ev("compute", "forward", t, t + 30)
            t += 30
            for k in range(4):
                ev("compute", f"backward layers {3 - k}", t, t + 15)
                if ddp == "bucketed":
                    ev("comm", f"all-reduce bucket {k}", t + 15, t + 27)
                t += 15
            if ddp == "flat":
                ev("comm", "all-reduce flat", t, t + 40)
                t += 40
            else:
                t += 12
            ev("compute", "optimizer", t, t + 5)
    return rows


# ---- train, PyTorch reference --------------------------------------------------------------

def train_file(path, steps=20, first_loss=9.2, final_loss=5.0, val_losses=None):
    """val_losses: {step: validation loss}, the /eval table (none when None)."""
    rows = []
    for i in range(steps):
        loss = first_loss + (final_loss - first_loss) * i / (steps - 1)
        rows.append({"step": i + 1, "loss": loss, "lr": 1e-3 * (1 - i / steps), "grad_norm": 1.0,
                     "step_ms": 500.0 if i == 0 else 100.0, "tokens_per_s": 1000.0 if i == 0 else 5000.0})
    tables = {"train_steps": rows}
    if val_losses:
        tables["eval"] = [{"step": k, "val_loss": v, "tokens": 4096, "ms": 10.0} for k, v in val_losses.items()]
    write_record(path, "train", tables,
                 attrs={"precision": "fp32", "status": "completed", "model.parameters": 2_000_000})


def torch_row(size, ctx, precision, variant, step_ms, attention="naive", peak=3 << 30):
    d_model, _, layers, _ = SIZES[size]
    return {"size": size, "d_model": d_model, "num_layers": layers, "context_length": ctx, "batch_size": 4,
            "precision": precision, "attention": attention, "variant": variant, "mode": "train-step",
            "warmup_steps": 5, "measured_steps": 10, "status": "ok", "forward_ms_mean": step_ms / 3,
            "forward_ms_sd": 0.1, "backward_ms_mean": step_ms / 2, "backward_ms_sd": 0.1,
            "optimizer_ms_mean": step_ms / 6, "optimizer_ms_sd": 0.1, "step_ms_mean": step_ms, "step_ms_sd": 0.2,
            "tokens_per_s": 4 * ctx / (step_ms * 1e-3), "tflops": 50.0, "peak_tflops": 989.4, "mfu": 0.05,
            "peak_memory_bytes": peak}
