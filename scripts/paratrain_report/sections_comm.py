"""Sections of the communication benchmarks: bench allreduce (every collective) and bench ddp
(strategies, PyTorch DDP beside them, bucket fits, optimizer sharding)."""
import numpy as np
import pandas as pd

from . import overhead
from .model_sizes import SIZES, VOCAB_SIZE
from .render import Column, Section
from .section_utils import (_device_columns, _device_note, _from_table, _keep, _ratio, _sort, _use_ddp_order,
                            human_bytes)

# ---- bench allreduce -----------------------------------------------------------------------

@_from_table("allreduce")
def allreduce(rec, df):
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


@_from_table("ddp", attrs=DDP_ATTRS, none_if_missing=True)
def _ddp_table(rec, df):
    return ddp_config_defaults(df)


def allreduce_defaults(df):
    """A copy of a /allreduce table; files from before --collective timed the all-reduce alone."""
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
        Column("step_sd_ms", "± ms", "{:.2f}"), Column("step_ms_max_rank", "slowest rank ms", "{:.2f}"),
        Column("overhead_pct", "vs none %", "{:+.1f}"),
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
            "communication, the floor), mean over steps and ranks. `vs none` compares the slowest ranks "
            "(a synchronised job runs at its slowest GPU's pace; files from before counted the floor's "
            "mean). Exposed communication is the time from the end of backward to the end of the "
            "gradient sync on the slowest rank: what overlap did not hide. "
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
        accum = t.get("grad_accum", 1)  # files from before --grad-accum: 1
        if "grad_accum" in same:
            same = same[same["grad_accum"] == (1 if pd.isna(accum) else accum)]
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


