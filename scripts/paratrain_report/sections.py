"""One function per kind of benchmark: records → Sections (titled tables). A kind whose table is
in none of the files gives no section. Values stay numeric in the frames; Column formats say
how they print."""
import math

import numpy as np
import pandas as pd

from . import overhead
from .model_sizes import SIZES, SIZE_ORDER, VOCAB_SIZE
from .render import Column, Section

MIB = float(1 << 20)
OOM = "OOM"

_ORDERS = {
    "size": SIZE_ORDER,
    "precision": ["fp32", "tf32", "bf16"],
    # Records since bench ddp wrote the strategy table's order (root attribute ddp_order) use theirs
    # (_use_ddp_order); this is the order of older records, which lack it.
    "ddp": ["none", "naive", "flat", "overlap", "bucketed", "reduce_scatter", "bucketed_reduce_scatter"],
    "shard": ["none", "broadcast", "zero1"],
    "grad_comm": ["fp32", "bf16"],
    "zero1_prefetch": ["n/a", "off", "on"],
    "impl": ["naive", "flash"],
    "pass": ["inference", "train-step"],
    "fused": ["off", "on"],
}


def _use_ddp_order(rec):
    """The --ddp strategies in the order the binary's strategy table gives them, from any record
    that carries it."""
    for run in rec.files:
        order = run.attrs.get("ddp_order")
        if order:
            _ORDERS["ddp"] = list(order)
            return


def _sort(df, by):
    """Stable sort; sizes, precisions and strategies in their natural order, others as values."""
    by = [c for c in by if c in df.columns]

    def key(col):
        order = _ORDERS.get(col.name)
        if order is None:
            return col
        return col.map(lambda v: order.index(v) if v in order else len(order))

    return df.sort_values(by, key=key, kind="stable").reset_index(drop=True) if by else df


def _present(df, cols):
    return [c for c in cols if c in df.columns]


def _device_note(df):
    gpus = [g for g in dict.fromkeys(df["gpu"]) if g]
    return f" Device: {', '.join(gpus)}." if gpus else ""


def _device_columns(df):
    """A device column only when the rows come from more than one kind of device."""
    return [Column("gpu", "device")] if df["gpu"].nunique() > 1 else []


def _keep(columns, df):
    return [c for c in columns if c.key in df.columns]


def _varying(df, *names):
    """Columns for the configuration fields (mode, fused) that take more than one value in df:
    constant ones would only repeat themselves on every row."""
    return [Column(n, n) for n in names if n in df.columns and df[n].nunique() > 1]


def _ratio(a, b):
    return a / b if (b and math.isfinite(b) and math.isfinite(a)) else float("nan")


def human_bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{int(n)} B"


# ---- bench model ---------------------------------------------------------------------------

MODEL_KEYS = ["gpu", "size", "context_length", "batch_size", "precision", "attention", "fused", "mode"]


def _model_steady(rec):
    """`model` rows at the largest warm-up of each configuration (the steady state), with derived
    columns; None without a model table."""
    df = rec.table("model")
    if df is None:
        return None
    keys = _present(df, MODEL_KEYS)
    df = df.loc[df.groupby(keys, dropna=False)["warmup_steps"].idxmax()]
    return _with_model_derived(df)


def _with_model_derived(df):
    df = df.copy()
    if "mfu" in df:
        df["mfu_pct"] = df["mfu"] * 100.0
    if "peak_memory_bytes" in df:
        df["peak_MiB"] = df["peak_memory_bytes"].where(df["status"] == "ok") / MIB
    return df


def model_timings(rec):
    df = _model_steady(rec)
    if df is None:
        return []
    df = _sort(df, MODEL_KEYS)
    cols = _device_columns(df) + _keep([
        Column("size", "size"), Column("context_length", "ctx"), Column("batch_size", "batch"),
        Column("precision", "precision"), Column("attention", "attention")], df)
    cols += _varying(df, "fused", "mode")
    cols += _keep([
        Column("warmup_steps", "warm-up"), Column("forward_ms_mean", "fwd ms", "{:.2f}"),
        Column("backward_ms_mean", "bwd ms", "{:.2f}"), Column("optimizer_ms_mean", "opt ms", "{:.2f}"),
        Column("step_ms_mean", "step ms", "{:.2f}"), Column("step_ms_sd", "± ms", "{:.2f}"),
        Column("tokens_per_s", "tokens/s", "{:,.0f}"), Column("tflops", "TFLOP/s", "{:.1f}"),
        Column("mfu_pct", "MFU %", "{:.1f}"), Column("peak_MiB", "peak MiB", "{:,.0f}")], df)
    if (df["status"] != "ok").any():
        cols.append(Column("status", "status"))
    desc = ("`paratrain bench model`: mean and standard deviation over the measured steps, each ended "
            "by a device synchronisation, at the largest warm-up measured. MFU counts 6·N·tokens plus "
            "the attention term against the device's dense peak for the precision." + _device_note(df))
    return [Section("model_timings", "Model timings per size and context", desc, cols, df)]


def precision_comparison(rec):
    df = _model_steady(rec)
    if df is None:
        return []
    df = df[df["status"] == "ok"]
    keys = _present(df, ["gpu", "size", "context_length", "batch_size", "attention", "fused", "mode"])
    lows = [p for p in ("tf32", "bf16") if p in set(df["precision"])]
    if "fp32" not in set(df["precision"]) or not lows:
        return []
    rows = []
    for key, g in df.groupby(keys, dropna=False, sort=False):
        by = {r["precision"]: r for _, r in g.iterrows()}
        if "fp32" not in by or not any(p in by for p in lows):
            continue
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        base = by["fp32"]
        row["fp32_step_ms"] = base["step_ms_mean"]
        row["fp32_peak_MiB"] = base.get("peak_MiB", np.nan)
        for p in lows:
            r = by.get(p)
            get = (lambda c: r[c] if r is not None and c in r else np.nan)
            row[f"{p}_step_ms"] = get("step_ms_mean")
            row[f"{p}_speedup"] = _ratio(base["step_ms_mean"], get("step_ms_mean"))
            if "forward_ms_mean" in base:
                row[f"{p}_fwd_speedup"] = _ratio(base["forward_ms_mean"], get("forward_ms_mean"))
            if "backward_ms_mean" in base:
                row[f"{p}_bwd_speedup"] = _ratio(base["backward_ms_mean"], get("backward_ms_mean"))
            row[f"{p}_mfu_pct"] = get("mfu_pct")
            row[f"{p}_peak_MiB"] = get("peak_MiB")
        rows.append(row)
    if not rows:
        return []
    out = _sort(pd.DataFrame(rows), keys)
    cols = _device_columns(out) + _keep([
        Column("size", "size"), Column("context_length", "ctx"), Column("batch_size", "batch"),
        Column("attention", "attention"), Column("fp32_step_ms", "fp32 step ms", "{:.2f}")], out)
    for p in lows:
        cols += _keep([Column(f"{p}_step_ms", f"{p} step ms", "{:.2f}"),
                       Column(f"{p}_speedup", f"{p} speed-up", "{:.2f}×"),
                       Column(f"{p}_fwd_speedup", f"{p} fwd ×", "{:.2f}"),
                       Column(f"{p}_bwd_speedup", f"{p} bwd ×", "{:.2f}"),
                       Column(f"{p}_mfu_pct", f"{p} MFU %", "{:.1f}")], out)
    cols += _keep([Column("fp32_peak_MiB", "fp32 peak MiB", "{:,.0f}")], out)
    cols += _keep([Column(f"{p}_peak_MiB", f"{p} peak MiB", "{:,.0f}") for p in lows], out)
    desc = ("Mixed versus full precision: speed-up = fp32 step time / the other precision's step time "
            "(the same for forward and backward alone). bf16 is mixed precision with FP32 master "
            "weights; fp32 is true FP32 (TF32 off)." + _device_note(df))
    return [Section("precision", "Mixed versus full precision", desc, cols, out)]


def warmup_comparison(rec):
    df = rec.table("model")
    if df is None:
        return []
    df = _with_model_derived(df)
    keys = _present(df, MODEL_KEYS)
    groups = [g for _, g in df.groupby(keys, dropna=False, sort=False) if g["warmup_steps"].nunique() > 1]
    if not groups:
        return []
    parts = []
    for g in groups:
        g = g.copy()
        steady = g.loc[g["warmup_steps"].idxmax()]
        g["vs_steady"] = g["step_ms_mean"] / steady["step_ms_mean"]
        g["steady_warmup"] = steady["warmup_steps"]
        parts.append(g)
    out = _sort(pd.concat(parts, ignore_index=True), keys + ["warmup_steps"])
    cols = _device_columns(out) + _keep([
        Column("size", "size"), Column("context_length", "ctx"), Column("precision", "precision"),
        Column("attention", "attention")], out) + _varying(out, "fused") + _keep([
        Column("warmup_steps", "warm-up steps"), Column("first_step_ms", "first step ms", "{:.2f}"), Column("step_ms_mean", "step ms", "{:.2f}"),
        Column("step_ms_sd", "± ms", "{:.2f}"), Column("forward_ms_mean", "fwd ms", "{:.2f}"),
        Column("backward_ms_mean", "bwd ms", "{:.2f}"),
        Column("vs_steady", "vs most warm-up", "{:.2f}×")], out)
    desc = ("The same configuration measured after 0, 1, 2, … warm-up steps. Without warm-up the "
            "measured steps include one-time costs (allocator growth, library heuristics, lazy "
            "initialisation), which inflate the mean and the standard deviation; `vs most warm-up` "
            "divides by the mean at the largest warm-up." + _device_note(df))
    return [Section("warmup", "Warm-up steps compared", desc, cols, out)]


MEMORY_KEYS = ["gpu", "size", "precision", "attention", "fused", "batch_size", "context_length"]


def memory_rows(rec):
    """`model_memory` rows, one per configuration: bench model profiles memory once per warm-up
    count, and memory does not depend on it (the last profile is kept). None without the table."""
    df = rec.table("model_memory")
    if df is None:
        return None
    return df.drop_duplicates(subset=_present(df, MEMORY_KEYS), keep="last").reset_index(drop=True)


def memory_per_context(rec):
    df = memory_rows(rec)
    if df is None:
        return []
    parts = ["peak_forward", "peak_train_step", "before_backward", "peak_parameters", "peak_gradients",
             "peak_optimizer_state", "peak_activations", "peak_workspace", "peak_other"]
    for p in parts:
        if f"{p}_bytes" in df:
            df[f"{p}_MiB"] = df[f"{p}_bytes"].where(df["status"] == "ok") / MIB
    df = _sort(df, MEMORY_KEYS)
    headers = {"peak_forward": "forward peak", "peak_train_step": "train-step peak",
               "before_backward": "before backward", "peak_parameters": "params",
               "peak_gradients": "grads", "peak_optimizer_state": "optimizer state",
               "peak_activations": "activations", "peak_workspace": "workspace", "peak_other": "other"}
    cols = _device_columns(df) + _keep([
        Column("size", "size"), Column("precision", "precision"), Column("attention", "attention")], df)
    cols += _varying(df, "fused") + _keep([Column("batch_size", "batch"), Column("context_length", "ctx")], df)
    cols += _keep([Column(f"{p}_MiB", f"{headers[p]} MiB", "{:,.1f}") for p in parts], df)
    if (df["status"] != "ok").any():
        cols.append(Column("status", "status"))
    desc = ("Peak memory per context length from the tracking allocator: a forward-only (inference) "
            "pass, a full train step, the bytes in use when backward starts, and what the train-step "
            "peak is made of (params include the bf16 copy in mixed precision)." + _device_note(df))
    return [Section("memory", "Peak memory per context length", desc, cols, df)]


def kernel_breakdown(rec):
    df = rec.table("model_breakdown")
    if df is None:
        return []
    keys = _present(df, ["gpu", "size", "context_length", "precision", "attention", "fused"])
    agg = df.groupby(keys + ["pass", "family"], dropna=False, sort=False).agg(
        ms=("ms_per_step", "sum")).reset_index()
    totals = agg.groupby(keys + ["pass"], dropna=False)["ms"].transform("sum")
    agg["pct"] = 100.0 * agg["ms"] / totals
    wide = agg.pivot_table(index=keys + ["family"], columns="pass", values=["ms", "pct"], dropna=False)
    wide.columns = [f"{p}_{v}" for v, p in wide.columns]
    out = wide.dropna(how="all").reset_index()  # pivoting made every family × configuration
    sort_by = "train-step_ms" if "train-step_ms" in out else out.columns[-1]
    out = out.sort_values(sort_by, ascending=False, kind="stable")
    out = _sort(out, keys)
    cols = _device_columns(out) + _keep([
        Column("size", "size"), Column("context_length", "ctx"), Column("precision", "precision"),
        Column("attention", "attention")], out) + _varying(out, "fused") + [Column("family", "op family")]
    for p in _ORDERS["pass"]:
        cols += _keep([Column(f"{p}_ms", f"{p} ms/step", "{:.3f}"), Column(f"{p}_pct", f"{p} %", "{:.1f}")], out)
    desc = ("Device time per op family from CUDA events (phases summed), forward only (inference) "
            "and a full train step: which kernels take the time, and how that changes from "
            "inference to training." + _device_note(df))
    return [Section("breakdown", "Kernel time per op family", desc, cols, out)]


# ---- bench attention -----------------------------------------------------------------------

ATTN_KEYS = ["gpu", "dtype", "batch", "heads", "head_dim", "causal", "seq"]


def attention(rec):
    df = rec.table("attention")
    if df is None:
        return []
    df = _sort(df, ["gpu", "impl", "dtype", "batch", "heads", "head_dim", "causal", "seq"])
    cols = _device_columns(df) + _keep([
        Column("impl", "impl"), Column("dtype", "dtype"), Column("batch", "B"), Column("heads", "H"),
        Column("seq", "T"), Column("head_dim", "d"), Column("causal", "causal"), Column("status", "status"),
        Column("fwd_ms", "fwd ms", "{:.3f}"), Column("bwd_ms", "bwd ms", "{:.3f}"),
        Column("fwdbwd_ms", "fwd+bwd ms", "{:.3f}"), Column("fwdbwd_tflops", "fwd+bwd TFLOP/s", "{:.1f}"),
        Column("mem_before_bwd_MiB", "before bwd MiB", "{:,.1f}"), Column("peak_MiB", "peak MiB", "{:,.1f}")], df)
    desc = ("`paratrain bench attention`: median latency per pass after warm-up; memory in use just "
            "before backward (inputs, outputs and what forward saved). Out-of-memory configurations "
            "are kept as OOM." + _device_note(df))
    sections = [Section("attention", "Attention latency and memory", desc, cols, df)]

    keys = _present(df, ATTN_KEYS)
    naive, flash = df[df["impl"] == "naive"], df[df["impl"] == "flash"]
    both = naive.merge(flash, on=keys, suffixes=("_naive", "_flash"))
    if both.empty:
        return sections
    out = both[keys].copy()
    for impl in ("naive", "flash"):
        oom = both[f"status_{impl}"] != "ok"
        for c in ("fwd_ms", "bwd_ms", "fwdbwd_ms", "mem_before_bwd_MiB"):
            if f"{c}_{impl}" in both:
                out[f"{c}_{impl}"] = both[f"{c}_{impl}"].astype(object).where(~oom, OOM)
    for c in ("fwd_ms", "fwdbwd_ms"):
        out[f"{c}_speedup"] = both[f"{c}_naive"] / both[f"{c}_flash"]
    if "mem_before_bwd_MiB_naive" in both:
        out["mem_ratio"] = both["mem_before_bwd_MiB_naive"] / both["mem_before_bwd_MiB_flash"]
    out = _sort(out, keys)
    cols = _device_columns(out) + _keep([
        Column("dtype", "dtype"), Column("batch", "B"), Column("heads", "H"), Column("head_dim", "d"),
        Column("causal", "causal"), Column("seq", "T"),
        Column("fwd_ms_naive", "naive fwd ms", "{:.3f}"), Column("fwd_ms_flash", "flash fwd ms", "{:.3f}"),
        Column("fwd_ms_speedup", "fwd speed-up", "{:.2f}×"),
        Column("fwdbwd_ms_naive", "naive fwd+bwd ms", "{:.3f}"),
        Column("fwdbwd_ms_flash", "flash fwd+bwd ms", "{:.3f}"),
        Column("fwdbwd_ms_speedup", "fwd+bwd speed-up", "{:.2f}×"),
        Column("mem_before_bwd_MiB_naive", "naive before bwd MiB", "{:,.1f}"),
        Column("mem_before_bwd_MiB_flash", "flash before bwd MiB", "{:,.1f}"),
        Column("mem_ratio", "memory ratio", "{:.1f}×")], out)
    desc = ("Naive (materialised scores) versus flash attention on the same configurations: speed-up "
            "= naive time / flash time; memory ratio = naive / flash bytes in use before backward."
            + _device_note(df))
    sections.append(Section("attention_compare", "Naive versus flash attention", desc, cols, out))
    return sections


# ---- bench allreduce -----------------------------------------------------------------------

def allreduce(rec):
    df = rec.table("allreduce")
    if df is None:
        return []
    df = allreduce_defaults(df)
    df = _sort(df, ["gpu", "collective", "backend", "ranks", "bytes"])
    df["size"] = df["bytes"].map(human_bytes)
    cols = _device_columns(df) + _keep([
        Column("collective", "collective"), Column("backend", "backend"), Column("ranks", "ranks"),
        Column("size", "size"),
        Column("bytes", "bytes", "{:d}"), Column("time_us", "time µs", "{:,.1f}"),
        Column("time_us_max", "slowest rank µs", "{:,.1f}"), Column("algbw_GBps", "algbw GB/s", "{:.2f}"),
        Column("busbw_GBps", "busbw GB/s", "{:.2f}"), Column("wrong", "wrong")], df)
    desc = ("`paratrain bench allreduce`: fp32 collectives, in place, nccl-tests' columns: algbw = "
            "bytes / time, busbw = algbw × 2(n−1)/n (all-reduce), (n−1)/n (reduce-scatter, all-gather), "
            "1 (broadcast)." + _device_note(df))
    sections = [Section("allreduce", "Collectives by size, ranks and backend", desc, cols, df)]

    df["series"] = df["backend"] + " × " + df["ranks"].astype(str)
    if df["collective"].nunique() > 1:
        df["series"] = df["collective"] + " " + df["series"]
    wide = df.pivot_table(index="bytes", columns="series", values="busbw_GBps", aggfunc="mean").reset_index()
    wide["size"] = wide["bytes"].map(human_bytes)
    series = [c for c in wide.columns if c not in ("bytes", "size")]
    cols = [Column("size", "size")] + [Column(s, f"{s} GB/s", "{:.2f}") for s in series]
    desc = "Bus bandwidth (GB/s) per message size; columns are collective, backend × ranks."
    sections.append(Section("allreduce_busbw", "All-reduce bus bandwidth", desc, cols, wide))
    return sections


# ---- bench ddp -----------------------------------------------------------------------------

_DIMS = ("d_model", "num_layers", "d_ff", "vocab_size")
# The benchmarked model's shape: `model.*` attributes (resolved values), else the options
# (`option.d_model` or `option.d-model`; 0 or absent = the named size's value).
DDP_ATTRS = tuple(f"model.{d}" for d in _DIMS) + ("option.model",) + tuple(
    f"option.{d}" for d in _DIMS) + tuple(f"option.{d.replace('_', '-')}" for d in _DIMS)


def _ddp_table(rec):
    df = rec.table("ddp", attrs=DDP_ATTRS)
    if df is None:
        return None
    return ddp_config_defaults(df)


def allreduce_defaults(df):
    """A copy of a /allreduce table; files from before --collectives timed the all-reduce alone."""
    df = df.copy()
    df["collective"] = df["collective"].fillna("all_reduce") if "collective" in df else "all_reduce"
    return df


def ddp_config_defaults(df):
    """A copy of a /ddp or /ddp_events table with the configuration columns of older files
    filled in as those files ran."""
    df = df.copy()
    if "shard" not in df:
        df["shard"] = "none"
    if "comm_sms" not in df:  # files from before --comm-sms: NCCL's own CTA count
        df["comm_sms"] = 0
    # Files from before --grad-comm (alone, or beside newer ones): fp32 gradients on the wire.
    df["grad_comm"] = df["grad_comm"].fillna("fp32") if "grad_comm" in df else "fp32"
    # Files from before --zero1-prefetch waited for zero1's all-gather at the end of the step.
    if "zero1_prefetch" not in df:
        df["zero1_prefetch"] = np.where(df["shard"] == "zero1", "off", "n/a")
    return df


def _ddp_columns(df):
    return _device_columns(df) + _keep([
        Column("ranks", "ranks"), Column("precision", "precision"), Column("ddp", "strategy"),
        Column("bucket_mb", "bucket MiB", "{:g}"), Column("comm_sms", "comm SMs"),
        Column("grad_comm", "grad comm"), Column("step_ms", "step ms", "{:.2f}"),
        Column("step_sd_ms", "± ms", "{:.2f}"), Column("overhead_pct", "vs none %", "{:+.1f}"),
        Column("exposed_comm_ms", "exposed comm ms", "{:.2f}"), Column("comm_MB", "comm MB", "{:,.1f}"),
        Column("tokens_per_s", "tokens/s", "{:,.0f}"), Column("peak_MB", "peak MB", "{:,.0f}")], df)


def ddp_strategies(rec):
    _use_ddp_order(rec)
    full = _ddp_table(rec)
    if full is None:
        return []
    df = _sort(full[full["shard"] == "none"],
               ["gpu", "ranks", "precision", "comm_sms", "grad_comm", "ddp", "bucket_mb"])
    if df.empty:
        return []
    desc = ("`paratrain bench ddp`: the training step under each gradient-sync strategy (none = no "
            "communication, the floor), mean over steps and ranks. Exposed communication is the time "
            "from the end of backward to the end of the gradient sync: what overlap did not hide. "
            "comm SMs: --comm-sms (0: NCCL's own CTA count, GEMMs on every SM). grad comm: the "
            "gradients' type on the wire (--grad-comm; bf16: cast, summed in bf16, scaled in fp32)."
            + _device_note(df))
    sections = [Section("ddp", "Data-parallel strategies and bucket sizes", desc, _ddp_columns(df), df)]
    sections += _ddp_torch(rec, full)
    return sections


def _ddp_torch(rec, ours):
    """PyTorch's rows (scripts/compare_torch_ddp.py, table ddp_torch) beside the matching paratrain
    configuration: none, naive, DDP ↔ bucketed at the same cap, DDP with bf16_compress_hook ↔
    bucketed with --grad-comm bf16, ZeroRedundancyOptimizer ↔ zero1; gradients on the wire in the
    same type (files from before ddp_bf16 have fp32 throughout)."""
    torch = rec.table("ddp_torch")
    if torch is None:
        return []
    rows = []
    for _, t in torch.iterrows():
        wire = t.get("grad_comm", "fp32")
        wire = "fp32" if pd.isna(wire) else wire  # files from before ddp_bf16
        same = ours[(ours["ranks"] == t["ranks"]) & (ours["precision"] == t["precision"]) & (ours["grad_comm"] == wire)]
        plain = same[same["shard"] == "none"]
        if t["ddp"] in ("ddp", "ddp_bf16"):
            match = plain[(plain["ddp"] == "bucketed") & np.isclose(plain["bucket_mb"], t["bucket_mb"])]
            label = f"bucketed {t['bucket_mb']:g} MiB"
        elif t["ddp"] == "zero":
            match, label = same[same["shard"] == "zero1"], "zero1"
        else:
            match, label = plain[plain["ddp"] == t["ddp"]], t["ddp"]
        match = match.sort_values("step_ms")  # several --comm-sms values: the fastest
        first = match.iloc[0] if len(match) else {}
        ours_ms = first.get("step_ms", np.nan) if len(match) else np.nan
        if len(match) and first.get("comm_sms", 0):
            label += f", {int(first['comm_sms'])} comm SMs"
        if len(match) and first.get("zero1_prefetch") == "on":
            label += ", gathers prefetched"
        if wire != "fp32":
            label += f", {wire} gradients"
        rows.append({"ranks": t["ranks"], "precision": t["precision"], "torch": t["ddp"], "grad_comm": wire,
                     "torch_step_ms": t["step_ms"], "paratrain": label, "paratrain_step_ms": ours_ms,
                     "ratio": _ratio(ours_ms, t["step_ms"]), "torch_peak_MB": t.get("peak_MB", np.nan),
                     "paratrain_peak_MB": first.get("peak_MB", np.nan) if len(match) else np.nan})
    out = _sort(pd.DataFrame(rows), ["ranks", "precision"])
    cols = [Column("ranks", "ranks"), Column("precision", "precision"), Column("torch", "PyTorch"),
            Column("grad_comm", "grad comm"),
            Column("torch_step_ms", "PyTorch step ms", "{:.2f}"), Column("paratrain", "paratrain"),
            Column("paratrain_step_ms", "paratrain step ms", "{:.2f}"), Column("ratio", "ratio", "{:.2f}×"),
            Column("torch_peak_MB", "PyTorch peak MB", "{:,.0f}"),
            Column("paratrain_peak_MB", "paratrain peak MB", "{:,.0f}")]
    desc = ("PyTorch's data parallelism (scripts/compare_torch_ddp.py: no communication, per-parameter "
            "all-reduce, DistributedDataParallel, DDP with bf16_compress_hook, ZeroRedundancyOptimizer) "
            "beside the matching paratrain configuration with gradients of the same type on the wire; "
            "ratio = paratrain / PyTorch step time.")
    return [Section("ddp_torch", "Data parallelism: paratrain versus PyTorch", desc, cols, out)]


def _model_param_numels(row):
    """Parameter sizes of the benchmarked model from the file's attributes (see DDP_ATTRS)."""
    size = SIZES.get(str(row.get("option.model", "")), (0, 0, 0, 0))
    named = {"d_model": size[0], "d_ff": size[1], "num_layers": size[2], "vocab_size": VOCAB_SIZE}

    def dim(name):
        for key in (f"model.{name}", f"option.{name}", f"option.{name.replace('_', '-')}"):
            try:
                v = int(float(row.get(key, 0)))
            except (TypeError, ValueError):
                v = 0
            if v > 0:
                return v
        return named[name]

    dims = {k: dim(k) for k in _DIMS}
    if not all(dims.values()):
        return None
    return overhead.reference_param_numels(dims["vocab_size"], dims["d_model"], dims["num_layers"], dims["d_ff"])


def bucket_fits(rec):
    """(fits, points): the overhead model fitted per (device, ranks, precision, --comm-sms,
    --grad-comm), and every bucketed measurement with its bucket count and the model's prediction."""
    df = _ddp_table(rec)
    if df is None:
        return [], None
    df = df[df["shard"] == "none"]
    fits, parts = [], []
    for key, outer in df.groupby(["gpu", "ranks", "precision"], sort=False):
        floor = outer.loc[outer["ddp"] == "none", "step_ms"]  # communicates nothing: any --comm-sms
        t0 = floor.iloc[0] * 1e-3 if len(floor) else None
        for (sms, wire), g in outer.groupby(["comm_sms", "grad_comm"], sort=True):
            b = _bucket_points(g[g["ddp"] == "bucketed"].copy())
            if b is None:
                continue
            fit = None
            try:
                fit = overhead.fit_overhead(b["s_bytes"].iloc[0], b["n_buckets"], b["step_ms"] * 1e-3, t0)
            except ValueError:
                pass
            b["model_ms"] = fit.step_s(b["n_buckets"]) * 1e3 if fit else np.nan
            b["residual_ms"] = b["step_ms"] - b["model_ms"]
            parts.append(b)
            if fit:
                fits.append({"gpu": key[0], "ranks": key[1], "precision": key[2], "comm_sms": sms,
                             "grad_comm": wire, "fit": fit,
                             "floor_ms": t0 * 1e3 if t0 is not None else np.nan, "points": b})
    points = (_sort(pd.concat(parts, ignore_index=True),
                    ["gpu", "ranks", "precision", "comm_sms", "grad_comm", "bucket_mb"]) if parts else None)
    return fits, points


def _bucket_points(b):
    """Bucketed rows (of one --grad-comm) with n_buckets and s_bytes (gradient bytes on the wire:
    2 per element in bf16, 4 in fp32) added; None when empty or the bucket count cannot be known."""
    if b.empty:
        return None
    numels = _model_param_numels(b.iloc[0])
    if "buckets" in b:
        b["n_buckets"] = b["buckets"].astype(float)
    elif numels is not None:
        b["n_buckets"] = [overhead.bucket_count(numels, mb) for mb in b["bucket_mb"]]
    else:
        return None
    wire_bytes = 2.0 if b["grad_comm"].iloc[0] == "bf16" else 4.0
    b["s_bytes"] = wire_bytes * sum(numels) if numels is not None else b["comm_MB"].iloc[0] * 1e6
    return b


def ddp_buckets(rec):
    _use_ddp_order(rec)
    fits, points = bucket_fits(rec)
    if points is None:
        return []
    cols = _device_columns(points) + _keep([
        Column("ranks", "ranks"), Column("precision", "precision"), Column("comm_sms", "comm SMs"),
        Column("grad_comm", "grad comm"),
        Column("bucket_mb", "bucket MiB", "{:g}"), Column("n_buckets", "buckets", "{:.0f}"), Column("step_ms", "step ms", "{:.2f}"),
        Column("step_sd_ms", "± ms", "{:.2f}"), Column("exposed_comm_ms", "exposed comm ms", "{:.2f}"),
        Column("model_ms", "model ms", "{:.2f}"), Column("residual_ms", "residual ms", "{:+.2f}")], points)
    desc = ("Bucketed gradient sync at each bucket cap, with the bucket count the cap gives for this "
            "model and the step time the fitted overhead model predicts (t0 + s/(n_b·w) + n_b·o; "
            "docs/REPORT.md derives it).")
    sections = [Section("ddp_buckets", "Step time against bucket size", desc, cols, points)]
    if not fits:
        sections[0].notes.append("Too few distinct bucket counts to fit the overhead model.")
        return sections
    rows = []
    for f in fits:
        fit = f["fit"]
        nb = fit.optimal_buckets
        best = f["points"].loc[f["points"]["step_ms"].idxmin()]
        rows.append({"gpu": f["gpu"], "ranks": f["ranks"], "precision": f["precision"], "comm_sms": f["comm_sms"],
                     "grad_comm": f["grad_comm"],
                     "s_MB": fit.s_bytes / 1e6, "w_GBps": fit.w_Bps / 1e9, "o_ms": fit.o_s * 1e3,
                     "t0_ms": fit.t0_s * 1e3, "t0_from": "fitted" if fit.t0_fitted else "ddp=none",
                     "opt_buckets": nb if nb is not None else np.nan,
                     "opt_bucket_MiB": fit.optimal_bucket_bytes / overhead.MIB if nb is not None else np.nan,
                     "opt_step_ms": fit.step_s(nb) * 1e3 if nb is not None else np.nan,
                     "best_measured_MiB": best["bucket_mb"], "rms_ms": fit.rms_s * 1e3, "points": fit.n_points})
    out = pd.DataFrame(rows)
    cols = _device_columns(out) + [
        Column("ranks", "ranks"), Column("precision", "precision"), Column("comm_sms", "comm SMs"),
        Column("grad_comm", "grad comm"), Column("s_MB", "s MB", "{:,.1f}"),
        Column("w_GBps", "w GB/s", "{:.2f}"), Column("o_ms", "o ms", "{:.3f}"), Column("t0_ms", "t0 ms", "{:.2f}"),
        Column("t0_from", "t0 from"), Column("opt_buckets", "optimal n_b", "{:.1f}"),
        Column("opt_bucket_MiB", "optimal bucket MiB", "{:.1f}"),
        Column("opt_step_ms", "model step at optimum ms", "{:.2f}"),
        Column("best_measured_MiB", "best measured MiB", "{:g}"), Column("rms_ms", "rms residual ms", "{:.3f}"),
        Column("points", "points")]
    desc = ("Least-squares fit of step(n_b) = t0 + s/(n_b·w) + n_b·o over the bucketed measurements: s "
            "gradient bytes, w all-reduce bandwidth, o cost per call; optimum n_b* = √(s/(w·o)), bucket "
            "b* = √(s·w·o). A dash means the fit has no interior optimum (w or o came out ≤ 0).")
    sections.append(Section("ddp_bucket_fit", "Overhead model fit", desc, cols, out))
    return sections


def sharding(rec):
    _use_ddp_order(rec)
    df = _ddp_table(rec)
    if df is None or not (df["shard"] != "none").any():
        return []
    parts = []
    for _, g in df.groupby(["gpu", "ranks", "precision", "grad_comm"], sort=False):
        sharded = g[g["shard"] != "none"]
        if sharded.empty:
            continue
        plain = g[g["shard"] == "none"]
        first = sharded.iloc[0]
        same_sync = plain[(plain["ddp"] == first["ddp"]) &
                          (np.isclose(plain["bucket_mb"], first["bucket_mb"]) |
                           (plain["bucket_mb"].isna() & pd.isna(first["bucket_mb"])))]
        base = same_sync if len(same_sync) else plain[plain["ddp"] == "flat"]
        if base.empty:
            base = plain[plain["ddp"] != "none"].head(1)
        base = base.head(1)
        block = pd.concat([base, sharded], ignore_index=True)
        if len(base) and "step_optstate_MB" in block:
            block["optstate_vs_unsharded"] = block["step_optstate_MB"] / base["step_optstate_MB"].iloc[0]
        parts.append(block)
    out = _sort(pd.concat(parts, ignore_index=True),
                ["gpu", "ranks", "precision", "grad_comm", "shard", "comm_sms", "zero1_prefetch"])
    cols = _device_columns(out) + _keep([
        Column("ranks", "ranks"), Column("precision", "precision"), Column("shard", "sharding"),
        Column("ddp", "gradient sync"), Column("bucket_mb", "bucket MiB", "{:g}"), Column("comm_sms", "comm SMs"),
        Column("grad_comm", "grad comm"), Column("zero1_prefetch", "zero1 prefetch"),
        Column("step_ms", "step ms", "{:.2f}"), Column("overhead_pct", "vs none %", "{:+.1f}"),
        Column("init_MB", "after init MB", "{:,.1f}"),
        Column("init_optstate_MB", "optimizer state at init MB", "{:,.1f}"),
        Column("step_MB", "step peak MB", "{:,.1f}"), Column("step_optstate_MB", "optimizer state MB", "{:,.1f}"),
        Column("optstate_vs_unsharded", "optimizer state vs unsharded", "{:.2f}×"),
        Column("peak_MB", "peak MB", "{:,.1f}")], out)
    desc = ("Optimizer-state sharding (broadcast: each rank updates its parameters and broadcasts "
            "them; zero1: reduce-scatter gradients, update the shard, all-gather parameters, during "
            "the next forward with zero1 prefetch on) beside "
            "the unsharded run with the same gradient sync and gradient type on the wire. Memory of "
            "rank 0; optimizer state "
            "should fall to about 1/ranks.")
    return [Section("sharding", "Optimizer sharding: memory and time", desc, cols, out)]


# ---- paratrain train -----------------------------------------------------------------------

def training(rec):
    df = rec.table("train_steps", attrs=("precision", "status", "model.parameters", "command_line"))
    if df is None:
        return []
    rows = []
    for file, g in df.groupby("file", sort=False):
        g = g.sort_values("step")
        later = g.iloc[1:] if len(g) > 1 else g  # the first step carries one-time costs
        rows.append({"file": file, "world_size": g["world_size"].iloc[0], "precision": g["precision"].iloc[0],
                     "parameters": g["model.parameters"].iloc[0], "steps": len(g),
                     "first_loss": g["loss"].iloc[0], "final_loss": g["loss"].iloc[-1], "min_loss": g["loss"].min(),
                     "step_ms": later["step_ms"].mean(),
                     "tokens_per_s": later["tokens_per_s"].mean() if "tokens_per_s" in g else np.nan,
                     "final_lr": g["lr"].iloc[-1] if "lr" in g else np.nan, "status": g["status"].iloc[0]})
    out = pd.DataFrame(rows)
    cols = _keep([Column("file", "run"), Column("world_size", "ranks"), Column("precision", "precision"),
                  Column("parameters", "parameters", "{:,.0f}"), Column("steps", "steps"),
                  Column("first_loss", "first loss", "{:.4f}"), Column("final_loss", "final loss", "{:.4f}"),
                  Column("min_loss", "min loss", "{:.4f}"), Column("step_ms", "step ms", "{:.2f}"),
                  Column("tokens_per_s", "tokens/s", "{:,.0f}"), Column("final_lr", "final lr", "{:.2e}"),
                  Column("status", "status")], out)
    desc = ("`paratrain train` runs: loss at the first and last step, the lowest loss, and the mean "
            "step time and throughput without the first step.")
    return [Section("training", "Training runs", desc, cols, out)]


# ---- PyTorch reference (scripts/compare_torch.py) -----------------------------------------

def torch_comparison(rec):
    torch = rec.table("torch_model")
    ours = _model_steady(rec)
    if torch is None or ours is None:
        return []
    torch = torch[torch["status"] == "ok"].copy()
    ours = ours[ours["status"] == "ok"]
    if "mode" in ours:
        ours = ours[ours["mode"] == "train-step"]
    multi_attn = "attention" in torch and torch["attention"].nunique() > 1
    torch["label"] = torch["variant"] + (" " + torch["attention"] if multi_attn else "")
    labels = list(dict.fromkeys(torch["label"]))
    keys = ["gpu", "size", "context_length", "batch_size", "precision"]
    rows = []
    for _, r in ours.iterrows():
        match = torch
        for k in keys:
            match = match[match[k] == r[k]]
        if match.empty:
            continue
        row = {k: r[k] for k in keys}
        row.update(attention=r["attention"], fused=r.get("fused", "on"), ours_ms=r["step_ms_mean"], ours_mfu=r.get("mfu_pct", np.nan),
                   ours_MiB=r.get("peak_MiB", np.nan))
        for lab in labels:
            t = match[match["label"] == lab]
            ms = t["step_ms_mean"].iloc[0] if len(t) else np.nan
            row[f"{lab}_ms"] = ms
            row[f"{lab}_ratio"] = _ratio(r["step_ms_mean"], ms)
            row[f"{lab}_MiB"] = t["peak_memory_bytes"].iloc[0] / MIB if len(t) and "peak_memory_bytes" in t else np.nan
        rows.append(row)
    if not rows:
        return []
    out = _sort(pd.DataFrame(rows), keys + ["attention", "fused"])
    cols = _device_columns(out) + [
        Column("size", "size"), Column("context_length", "ctx"), Column("batch_size", "batch"),
        Column("precision", "precision"), Column("attention", "attention")] + _varying(out, "fused") + [
        Column("ours_ms", "paratrain ms", "{:.2f}"), Column("ours_mfu", "MFU %", "{:.1f}")]
    for lab in labels:
        cols += [Column(f"{lab}_ms", f"torch {lab} ms", "{:.2f}"), Column(f"{lab}_ratio", f"/ {lab}", "{:.2f}×")]
    cols += [Column("ours_MiB", "paratrain peak MiB", "{:,.0f}")]
    cols += [Column(f"{lab}_MiB", f"torch {lab} peak MiB", "{:,.0f}") for lab in labels]
    desc = ("paratrain's train step beside the PyTorch reference model's (scripts/compare_torch.py: the "
            "same architecture and protocol, eager and torch.compile) on the same device; ratio = "
            "paratrain / PyTorch step time. Targets (issue 6): bf16 ≤ 0.6× eager and ≤ 1.0× compiled; "
            "fp32 ≤ 0.85× eager; peak memory no higher." + _device_note(out))
    return [Section("torch_compare", "paratrain versus PyTorch", desc, cols, out)]


# ---- paratrain demo accumulation -----------------------------------------------------------

def accumulation(rec):
    df = rec.table("accumulation")
    if df is None:
        return []
    cols = _keep([Column("case", "case"), Column("accumulator", "accumulator"), Column("addend", "addend"),
                  Column("sum", "sum", "{:.8f}"), Column("error", "error", "{:+.3e}")], df)
    desc = "`paratrain demo accumulation`: 0.01 added 1000 times in each arithmetic."
    return [Section("accumulation", "Accumulation precision", desc, cols, df)]


BUILDERS = [model_timings, precision_comparison, warmup_comparison, memory_per_context, kernel_breakdown,
            torch_comparison, attention, allreduce, ddp_strategies, ddp_buckets, sharding, training,
            accumulation]


def build_all(rec):
    return [s for build in BUILDERS for s in build(rec)]
