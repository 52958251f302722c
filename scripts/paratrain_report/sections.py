"""One function per kind of benchmark: records → Sections (titled tables). A kind whose table is
in none of the files gives no section. Values stay numeric in the frames; Column formats say
how they print."""
import numpy as np
import pandas as pd

from .render import Column, Section
from .section_utils import (MIB, OOM, _ORDERS, _device_columns, _device_note, _from_table, _keep, _present, _ratio,
                            _sort, _varying, human_bytes)  # noqa: F401  (human_bytes: plots use it from here)
# The communication sections live in sections_comm; plots reach their helpers through here.
from .sections_comm import (_ddp_table, allreduce, allreduce_defaults, bucket_fits,  # noqa: F401
                            ddp_buckets, ddp_config_defaults, ddp_strategies, sharding)

# ---- bench model ---------------------------------------------------------------------------

MODEL_KEYS = ["gpu", "size", "context_length", "batch_size", "precision", "grad_dtype", "residual_dtype", "attention",
              "fused", "update_sms", "mode"]


@_from_table("model", none_if_missing=True)
def _model_steady(rec, df):
    """`model` rows at the largest warm-up of each configuration (the steady state), with derived
    columns; None without a model table."""
    keys = _present(df, MODEL_KEYS)
    df = df.loc[df.groupby(keys, dropna=False)["warmup_steps"].idxmax()]
    return _with_model_derived(df)


def _with_model_derived(df):
    df = df.copy()
    if "mfu" in df:
        df["mfu_pct"] = df["mfu"] * 100.0
    if "mfu_fp8" in df and df["mfu_fp8"].notna().any():  # fp8 runs: against the FP8 peak too
        df["mfu_fp8_pct"] = df["mfu_fp8"] * 100.0
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
    cols += _varying(df, "grad_dtype", "residual_dtype", "fused", "update_sms", "mode")
    cols += _keep([
        Column("warmup_steps", "warm-up"), Column("forward_ms_mean", "fwd ms", "{:.2f}"),
        Column("backward_ms_mean", "bwd ms", "{:.2f}"), Column("optimizer_ms_mean", "opt ms", "{:.2f}"),
        Column("step_ms_mean", "step ms", "{:.2f}"), Column("step_ms_sd", "± ms", "{:.2f}"),
        Column("tokens_per_s", "tokens/s", "{:,.0f}"), Column("tflops", "TFLOP/s", "{:.1f}"),
        Column("mfu_pct", "MFU %", "{:.1f}"), Column("mfu_fp8_pct", "MFU % of FP8 peak", "{:.1f}"),
        Column("peak_MiB", "peak MiB", "{:,.0f}")], df)
    if (df["status"] != "ok").any():
        cols.append(Column("status", "status"))
    desc = ("`paratrain bench model`: mean and standard deviation over the measured steps, each ended "
            "by a device synchronisation, at the largest warm-up measured. MFU counts 6·N·tokens plus "
            "the attention term against the device's dense peak for the precision (bf16's for fp8, "
            "whose MFU against the FP8 peak has a column of its own)." + _device_note(df))
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


@_from_table("model")
def warmup_comparison(rec, df):
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


@_from_table("model_memory", none_if_missing=True)
def memory_rows(rec, df):
    """`model_memory` rows, one per configuration: bench model profiles memory once per warm-up
    count, and memory does not depend on it (the last profile is kept). None without the table."""
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


@_from_table("model_breakdown")
def kernel_breakdown(rec, df):
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


ROOFLINE_KEYS = ["gpu", "size", "context_length", "precision", "attention", "fused"]
PHASE_ORDER = ["forward", "backward", "optimizer", "step"]


@_from_table("model_roofline", none_if_missing=True)
def roofline_rows(rec, df):
    """/model_roofline rows (the last of duplicates) in configuration, pass and phase order, with
    achieved rates; None without the table."""
    keys = _present(df, ROOFLINE_KEYS)
    df = df.drop_duplicates(subset=keys + ["pass", "phase", "family"], keep="last").copy()
    df["phase_order"] = df["phase"].map(lambda p: PHASE_ORDER.index(p) if p in PHASE_ORDER else len(PHASE_ORDER))
    df = _sort(df, keys + ["pass", "phase_order"])
    seconds = df["achieved_ms"] * 1e-3
    df["achieved_tflops"] = (df["gflop"] * 1e9 / seconds / 1e12).where(df["gflop"] > 0)
    df["achieved_GBps"] = (df["gbytes"] / seconds).where(df["gbytes"] > 0)
    return df.drop(columns="phase_order").reset_index(drop=True)


def roofline(rec):
    df = roofline_rows(rec)
    if df is None:
        return []
    cols = _device_columns(df) + _keep([
        Column("size", "size"), Column("context_length", "ctx"), Column("precision", "precision"),
        Column("attention", "attention")], df) + _varying(df, "fused") + _keep([
        Column("pass", "pass"), Column("phase", "phase"), Column("family", "op family"),
        Column("ratio", "achieved / floor", "{:.1f}×"), Column("achieved_ms", "achieved ms", "{:.3f}"),
        Column("floor_ms", "floor ms", "{:.3f}"), Column("bound", "bound"), Column("gflop", "GFLOP", "{:,.1f}"),
        Column("gbytes", "GB", "{:,.3f}"), Column("achieved_tflops", "TFLOP/s", "{:.1f}"),
        Column("achieved_GBps", "GB/s", "{:,.0f}")], df)
    notes = []
    rates = df.drop_duplicates(subset=_present(df, ["gpu", "precision", "peak_tflops", "peak_tflops_fp8", "copy_GBps"]))
    for _, r in rates.iterrows():
        peak = r.get("peak_tflops", np.nan)
        where = f"{r['gpu']}, {r['precision']}" if r.get("gpu") else r["precision"]
        compute = f"dense peak {peak:,.1f} TFLOP/s" if np.isfinite(peak) else "no dense peak known (memory-only floors)"
        fp8_peak = r.get("peak_tflops_fp8", np.nan)
        if np.isfinite(fp8_peak):
            compute += f" (FP8 GEMMs: {fp8_peak:,.1f} TFLOP/s)"
        notes.append(f"{where}: {compute}; measured copy rate {r['copy_GBps']:,.0f} GB/s.")
    desc = ("How far each phase and op family of `bench model --breakdown` is from the hardware: the "
            "FLOPs (matrix products) and bytes its ops must do, from the shapes; the floor, the sum over "
            "its ops of max(FLOPs / dense peak, bytes / measured copy rate); achieved / floor. The step "
            "rows hold the pass's sums, their achieved time the whole pass on the stream (gaps between "
            "kernels included). Bound: the side giving the larger part of the floor." + _device_note(df))
    return [Section("roofline", "Roofline: achieved against the hardware's floor", desc, cols, df, notes)]


# ---- bench attention -----------------------------------------------------------------------

ATTN_KEYS = ["gpu", "dtype", "batch", "heads", "head_dim", "causal", "layout", "seq"]


@_from_table("attention")
def attention(rec, df):
    df = _sort(df, ["gpu", "impl", "dtype", "batch", "heads", "head_dim", "causal", "seq"])
    cols = _device_columns(df) + _keep([
        Column("impl", "impl"), Column("dtype", "dtype"), Column("batch", "B"), Column("heads", "H"),
        Column("seq", "T"), Column("head_dim", "d"), Column("causal", "causal"), Column("layout", "layout"),
        Column("status", "status"), Column("fwd_ms", "fwd ms", "{:.3f}"), Column("bwd_ms", "bwd ms", "{:.3f}"),
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



# ---- paratrain train -----------------------------------------------------------------------

@_from_table("train_steps", attrs=("precision", "status", "model.parameters", "command_line"))
def training(rec, df):
    rows = []
    evals = rec.table("eval")
    for file, g in df.groupby("file", sort=False):
        g = g.sort_values("step")
        e = evals[evals["file"] == file].sort_values("step") if evals is not None else None
        later = g.iloc[1:] if len(g) > 1 else g  # the first step carries one-time costs
        rows.append({"file": file, "world_size": g["world_size"].iloc[0], "precision": g["precision"].iloc[0],
                     "parameters": g["model.parameters"].iloc[0], "steps": len(g),
                     "first_loss": g["loss"].iloc[0], "final_loss": g["loss"].iloc[-1], "min_loss": g["loss"].min(),
                     "final_val_loss": e["val_loss"].iloc[-1] if e is not None and len(e) else np.nan,
                     "step_ms": later["step_ms"].mean(),
                     "tokens_per_s": later["tokens_per_s"].mean() if "tokens_per_s" in g else np.nan,
                     "final_lr": g["lr"].iloc[-1] if "lr" in g else np.nan, "status": g["status"].iloc[0]})
    out = pd.DataFrame(rows)
    if out["final_val_loss"].isna().all():  # no run evaluated: no empty column
        out = out.drop(columns="final_val_loss")
    cols = _keep([Column("file", "run"), Column("world_size", "ranks"), Column("precision", "precision"),
                  Column("parameters", "parameters", "{:,.0f}"), Column("steps", "steps"),
                  Column("first_loss", "first loss", "{:.4f}"), Column("final_loss", "final loss", "{:.4f}"),
                  Column("min_loss", "min loss", "{:.4f}"), Column("final_val_loss", "final val loss", "{:.4f}"),
                  Column("step_ms", "step ms", "{:.2f}"),
                  Column("tokens_per_s", "tokens/s", "{:,.0f}"), Column("final_lr", "final lr", "{:.2e}"),
                  Column("status", "status")], out)
    desc = ("`paratrain train` runs: loss at the first and last step, the lowest loss, the last validation "
            "loss (/eval), and the mean "
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

@_from_table("accumulation")
def accumulation(rec, df):
    cols = _keep([Column("case", "case"), Column("accumulator", "accumulator"), Column("addend", "addend"),
                  Column("sum", "sum", "{:.8f}"), Column("error", "error", "{:+.3e}")], df)
    desc = "`paratrain demo accumulation`: 0.01 added 1000 times in each arithmetic."
    return [Section("accumulation", "Accumulation precision", desc, cols, df)]


BUILDERS = [model_timings, precision_comparison, warmup_comparison, memory_per_context, kernel_breakdown,
            roofline, torch_comparison, attention, allreduce, ddp_strategies, ddp_buckets, sharding, training,
            accumulation]


def build_all(rec):
    return [s for build in BUILDERS for s in build(rec)]
