"""The report's figures (matplotlib, PNG). Each function takes the records and an output
directory, draws what the records hold and returns the paths it wrote (none when its data is
absent)."""
import math
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.transforms as mtransforms  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from . import sections  # noqa: E402
from .records import MEMORY_CATEGORIES  # noqa: E402

MIB = float(1 << 20)
DPI = 120
CATEGORY_COLORS = {"parameters": "#4c72b0", "gradients": "#dd8452", "optimizer_state": "#55a868",
                   "activations": "#c44e52", "workspace": "#8172b3", "other": "#937860"}


def _save(fig, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _grid(n, width=5.5, height=4.0, ncols_max=3):
    ncols = min(n, ncols_max)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()[:n]


def _varying(df, cols):
    return [c for c in cols if c in df and df[c].nunique() > 1]


def attention_latency(rec, out_dir):
    df = rec.table("attention")
    if df is None:
        return []
    panels = list(df.groupby(["dtype", "causal"], sort=True))
    fig, axes = plt.subplots(2, len(panels), figsize=(6 * len(panels), 8.5), squeeze=False,
                             constrained_layout=True)
    seqs = sorted(df["seq"].unique())
    extra = _varying(df, ["batch", "heads", "gpu"])
    dims = sorted(df["head_dim"].unique())
    colors = dict(zip(dims, plt.cm.viridis(np.linspace(0, 0.85, len(dims)))))
    styles = {"naive": ("--", "o"), "flash": ("-", "s")}
    for col, ((dtype, causal), g) in enumerate(panels):
        for row, (field, what) in enumerate((("fwd_ms", "forward"), ("fwdbwd_ms", "forward + backward"))):
            ax = axes[row][col]
            oom_label = "OOM"
            for key, line in g.groupby(["impl", "head_dim"] + extra, sort=True):
                impl, d = key[0], key[1]
                line = line.sort_values("seq")
                ok = line[line["status"] == "ok"]
                ls, marker = styles.get(impl, ("-.", "^"))
                label = f"{impl} d={d}" + "".join(f" {c}={v}" for c, v in zip(extra, key[2:]))
                ax.plot(ok["seq"], ok[field], ls, marker=marker, ms=4, color=colors[d], label=label)
                oom = line[line["status"] != "ok"]
                if len(oom):
                    trans = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
                    ax.plot(oom["seq"], np.full(len(oom), 0.98), "x", color=colors[d], transform=trans,
                            clip_on=False, label=oom_label)
                    oom_label = None
            ax.set_xscale("log", base=2)
            ax.set_xticks(seqs)
            ax.set_xticklabels([str(t) for t in seqs], rotation=45, fontsize=8)
            ax.minorticks_off()
            ax.set_yscale("log")
            plain = FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
            ax.tick_params(axis="y", which="minor", labelsize=7)
            ax.set_xlabel("sequence length T")
            ax.set_ylabel(f"{what} latency (ms)")
            ax.set_title(f"{dtype}, {'causal' if causal else 'not causal'}: {what}")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
    fig.suptitle("Attention latency against sequence length (× = out of memory)")
    return [_save(fig, out_dir, "attention_latency.png")]


def allreduce_bandwidth(rec, out_dir):
    df = rec.table("allreduce")
    if df is None:
        return []
    df = sections.allreduce_defaults(df)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    multi_gpu = df["gpu"].nunique() > 1
    for key, g in df.groupby(["collective", "backend", "ranks", "gpu"], sort=True):
        g = g.sort_values("bytes")
        label = f"{key[0]} {key[1]}, {key[2]} ranks" + (f", {key[3]}" if multi_gpu else "")
        ax.plot(g["bytes"], g["busbw_GBps"], "-o", ms=4, label=label)
    ax.set_xscale("log", base=2)
    ticks = [b for b in sorted(df["bytes"].unique())]
    ax.set_xticks(ticks)
    ax.set_xticklabels([sections.human_bytes(b) for b in ticks], rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("message size per rank")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("Collective bus bandwidth against size")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return [_save(fig, out_dir, "allreduce_bandwidth.png")]


def _strategy_label(row):
    if row.get("shard", "none") != "none":
        label = f"shard\n{row['shard']}"
        if str(row["ddp"]).startswith("bucketed"):  # zero1's per-bucket reduce-scatter
            label += "\nbucketed"
        label += {"on": "\nprefetch", "off": "\nno prefetch"}.get(row.get("zero1_prefetch"), "")
        return label + (f"\n{row['grad_comm']} grads" if row.get("grad_comm", "fp32") != "fp32" else "")
    label = row["ddp"]
    if label == "bucketed" and not pd.isna(row.get("bucket_mb")):
        label += "\nper param" if row["bucket_mb"] == 0 else f"\n{row['bucket_mb']:g} MiB"
    if label != "none" and row.get("comm_sms", 0):
        label += f"\n{int(row['comm_sms'])} SMs"
    if row.get("grad_comm", "fp32") != "fp32":
        label += f"\n{row['grad_comm']} grads"
    return label


def _prefetch_label(prefetch):
    """zero1's --zero1-prefetch in a title (nothing without zero1)."""
    return {"on": ", gathers prefetched", "off": ", gathers waited"}.get(prefetch, "")


def ddp_step_time(rec, out_dir):
    df = sections._ddp_table(rec)
    if df is None:
        return []
    panels = list(df.groupby(["gpu", "ranks", "precision"], sort=True))
    bars = df.groupby(["gpu", "ranks", "precision"]).size().max()
    fig, axes = _grid(len(panels), width=max(6.0, 0.95 * bars + 1.5), ncols_max=1)
    for ax, ((gpu, ranks, precision), g) in zip(axes, panels):
        g = sections._sort(g, ["shard", "comm_sms", "grad_comm", "zero1_prefetch", "ddp", "bucket_mb"])
        x = np.arange(len(g))
        sd = g["step_sd_ms"] if "step_sd_ms" in g else None
        ax.bar(x, g["step_ms"], yerr=sd, color="#4c72b0", capsize=3, label="step")
        if "exposed_comm_ms" in g:
            ax.bar(x, g["exposed_comm_ms"], bottom=g["step_ms"] - g["exposed_comm_ms"], color="none",
                   edgecolor="#dd8452", hatch="///", label="exposed communication")
        floor = g.loc[g["ddp"] == "none", "step_ms"]
        if len(floor):
            ax.axhline(floor.iloc[0], color="k", ls="--", lw=1, label="no communication")
        ax.set_xticks(x)
        ax.set_xticklabels([_strategy_label(r) for _, r in g.iterrows()], fontsize=8)
        ax.set_ylabel("step time (ms)")
        ax.set_title(f"{ranks} ranks, {precision}" + (f" ({gpu})" if gpu else ""), fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Data-parallel step time per strategy")
    return [_save(fig, out_dir, "ddp_step_time.png")]


def ddp_buckets(rec, out_dir):
    """Step time against bucket size: each measurement at its mean bucket size s/n_b (labelled
    with the cap that produced it), the fitted model and its optimum b* = sqrt(s·w·o)."""
    fits, points = sections.bucket_fits(rec)
    if points is None:
        return []
    panels = list(points.groupby(["gpu", "ranks", "precision", "comm_sms", "grad_comm"], sort=True))
    by_key = {(f["gpu"], f["ranks"], f["precision"], f["comm_sms"], f["grad_comm"]): f for f in fits}
    fig, axes = _grid(len(panels), width=6.5, height=4.8)
    for ax, (key, g) in zip(axes, panels):
        f = by_key.get(key)
        s_bytes = g["s_bytes"].iloc[0]
        g = g.assign(bucket_MiB=s_bytes / g["n_buckets"] / MIB).sort_values("bucket_MiB")
        sd = g["step_sd_ms"] if "step_sd_ms" in g else None
        ax.errorbar(g["bucket_MiB"], g["step_ms"], yerr=sd, fmt="o", color="#4c72b0", capsize=3,
                    label="measured (labels: the cap)")
        for (b, ms), same in g.groupby(["bucket_MiB", "step_ms"], sort=False):
            caps = ", ".join("per param" if c == 0 else f"{c:g} MiB" for c in same["bucket_mb"])
            ax.annotate(caps, (b, ms), textcoords="offset points", xytext=(4, 6), fontsize=7)
        if f is not None:
            fit = f["fit"]
            lo = min(g["bucket_MiB"].min(), (fit.optimal_bucket_bytes or s_bytes) / MIB) / 1.5
            b = np.geomspace(lo, s_bytes / MIB, 200)
            ax.plot(b, fit.step_s(s_bytes / (b * MIB)) * 1e3, "-", color="#dd8452",
                    label=f"t0 + s/(n_b·w) + n_b·o  (w = {fit.w_Bps / 1e9:.2f} GB/s, o = {fit.o_s * 1e3:.3f} ms)")
            if np.isfinite(f["floor_ms"]):
                ax.axhline(f["floor_ms"], color="k", ls="--", lw=1, label="no communication (t0)")
            if fit.optimal_buckets is not None:
                bstar = fit.optimal_bucket_bytes / MIB
                ax.axvline(bstar, color="#c44e52", ls=":", lw=1.5)
                ax.plot([bstar], [fit.step_s(fit.optimal_buckets) * 1e3], "*", ms=15, color="#c44e52",
                        label=f"optimum b* = {bstar:,.1f} MiB (n_b = {fit.optimal_buckets:.1f})")
            else:
                ax.text(0.02, 0.02, "no interior optimum (w or o ≤ 0)", transform=ax.transAxes, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("bucket size s/n_b (MiB)")
        ax.set_ylabel("step time (ms)")
        top = ax.secondary_xaxis("top", functions=(lambda b: s_bytes / MIB / np.maximum(b, 1e-9),
                                                   lambda n: s_bytes / MIB / np.maximum(n, 1e-9)))
        top.set_xlabel("number of buckets n_b", fontsize=8)
        gpu, ranks, precision, sms, wire = key
        ax.set_title(f"{ranks} ranks, {precision}, s = {s_bytes / 1e6:,.0f} MB" + (f", {sms} comm SMs" if sms else "")
                     + (f", {wire} gradients" if wire != "fp32" else "") + (f" ({gpu})" if gpu else ""), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Step time against bucket size, with the fitted overhead model")
    fig.tight_layout()
    return [_save(fig, out_dir, "ddp_buckets.png")]


def _merge_intervals(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap_fraction(compute, comm):
    """Share of the communication time during which compute also runs (intervals in ms)."""
    comp, com = _merge_intervals(compute), _merge_intervals(comm)
    total = sum(e - s for s, e in com)
    both = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in comp for s2, e2 in com)
    return both / total if total > 0 else float("nan")


def ddp_timeline(rec, out_dir, max_panels=6):
    """Per-rank compute and communication lanes from the `ddp_events` table (one step)."""
    df = rec.table("ddp_events")
    if df is None:
        return []
    df = sections.ddp_config_defaults(df)
    config = ["file", "ddp", "bucket_mb", "shard", "comm_sms", "grad_comm", "zero1_prefetch"]
    if "step" in df:  # one step per configuration: the first recorded
        df = df[df["step"] == df.groupby(config, dropna=False)["step"].transform("min")]
    df = df.assign(bucket_key=df["bucket_mb"].fillna(-1))
    panels = list(df.groupby(["file", "ddp", "bucket_key", "shard", "comm_sms", "grad_comm", "zero1_prefetch"],
                             sort=False))[:max_panels]
    ranks_max = df["rank"].nunique()
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 0.8 + 0.9 * ranks_max * len(panels)), squeeze=False,
                             sharex=True)
    colors = {"compute": "#4c72b0", "comm": "#dd8452"}
    for ax, ((_, ddp, bucket, shard, sms, wire, prefetch), g) in zip(axes[:, 0], panels):
        ticks, labels, fractions = [], [], []
        for i, (rank, rg) in enumerate(sorted(g.groupby("rank"), key=lambda t: t[0])):
            lanes = {}
            for j, stream in enumerate(("compute", "comm")):
                sg = rg[rg["stream"] == stream]
                y = i * 2.5 + j * 1.1
                lanes[stream] = list(zip(sg["start_ms"], sg["end_ms"]))
                ax.broken_barh([(s, e - s) for s, e in lanes[stream]], (y, 0.9),
                               facecolors=colors.get(stream, "grey"), edgecolor="white", linewidth=0.3)
                ticks.append(y + 0.45)
                labels.append(f"rank {rank} {stream}")
            fractions.append(overlap_fraction(lanes["compute"], lanes["comm"]))
        name = (ddp + (f" {bucket:g} MiB" if bucket >= 0 else "") + (f" + {shard}" if shard != "none" else "")
                + (f", {sms} comm SMs" if sms else "") + (f", {wire} gradients" if wire != "fp32" else "")
                + _prefetch_label(prefetch))
        if all(f != f for f in fractions):  # NaN: no communication at all (the floor)
            ax.set_title(f"{name}: no communication", fontsize=9)
        else:
            hidden = ", ".join(f"{100 * f:.0f}%" for f in fractions)
            ax.set_title(f"{name}: communication overlapped with compute per rank: {hidden}", fontsize=9)
        ax.set_yticks(ticks)
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()  # rank 0 on top
        ax.set_xlabel("time since the step started (ms)")
        ax.grid(True, axis="x", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    fig.legend(handles, ["compute stream", "communication"], loc="upper right")
    fig.suptitle("Per-rank timeline of one training step")
    fig.tight_layout()
    return [_save(fig, out_dir, "ddp_timeline.png")]


def roofline(rec, out_dir, max_panels=8):
    """Per configuration and pass (one panel each): achieved time against the roofline floor for
    every phase and op family, and the whole step, as horizontal bars on a log scale, each pair
    labelled with achieved / floor."""
    df = sections.roofline_rows(rec)
    if df is None:
        return []
    keys = [k for k in sections.ROOFLINE_KEYS if k in df] + ["pass"]
    panels = list(df.groupby(keys, sort=False, dropna=False))[:max_panels]
    rows_max = max(len(g) for _, g in panels)
    fig, axes = _grid(len(panels), width=7.0, height=0.9 + 0.42 * rows_max, ncols_max=2)
    colors = {"compute": "#c44e52", "memory": "#4c72b0", "none": "#999999"}
    for ax, (key, g) in zip(axes, panels):
        g = g.reset_index(drop=True)
        y = np.arange(len(g))
        achieved = g["achieved_ms"].to_numpy(dtype=float)
        floor = g["floor_ms"].to_numpy(dtype=float)
        bar_colors = [colors.get(b, "#999999") for b in g["bound"]]
        ax.barh(y - 0.2, achieved, height=0.38, color=bar_colors, label="achieved")
        ax.barh(y + 0.2, np.where(floor > 0, floor, np.nan), height=0.38, color="none", edgecolor=bar_colors,
                hatch="///", label="floor")
        for i, r in g.iterrows():
            if np.isfinite(r["ratio"]):
                ax.annotate(f"{r['ratio']:.1f}×", (achieved[i], y[i] - 0.2), xytext=(3, 0),
                            textcoords="offset points", va="center", fontsize=7)
        ax.set_yticks(y)
        ax.set_yticklabels(["whole step" if r["phase"] == "step" else r["family"] if r["phase"] == r["family"]
                            else f"{r['phase']} {r['family']}" for _, r in g.iterrows()], fontsize=8)
        ax.invert_yaxis()
        positive = np.concatenate([achieved[achieved > 0], floor[floor > 0]])
        if len(positive) and positive.max() / positive.min() > 20:
            ax.set_xscale("log")
        ax.set_xlabel("ms per step")
        cfg = dict(zip(keys, key))
        title = " ".join(str(cfg[k]) for k in ("size", "precision", "attention") if k in cfg)
        title += f", ctx {cfg['context_length']}, {cfg['pass']}" + (f", fused {cfg['fused']}" if "fused" in cfg else "")
        ax.set_title(title + (f" ({cfg['gpu']})" if cfg.get("gpu") else ""), fontsize=9)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors["compute"]),
               plt.Rectangle((0, 0), 1, 1, color=colors["memory"]),
               plt.Rectangle((0, 0), 1, 1, facecolor="none", edgecolor="k", hatch="///")]
    fig.legend(handles, ["achieved, compute-bound floor", "achieved, memory-bound floor", "floor"],
               loc="upper right", fontsize=8)
    fig.suptitle("Achieved time against the roofline floor (labels: achieved / floor)")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return [_save(fig, out_dir, "roofline.png")]


def _slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "timeline"


PERSISTENT = ("parameters", "gradients", "optimizer_state")  # allocated before a step, kept after


def memory_timeline(timeline, out_dir, top=10, persistent=None):
    """Bytes in use over the allocation events of one train step, stacked by category, with the
    largest allocations numbered where they happen and listed by tag (the view of PyTorch's
    memory_viz). `persistent` (category → bytes, from the memory table) splits what was in use
    before the first event into parameters, gradients and optimizer state."""
    ev = timeline.frame
    if ev.empty:
        return []
    # One more x than events so the last event's level is drawn as a step too.
    idx = np.arange(len(ev) + 1)
    in_use = ev["bytes_in_use"].to_numpy(dtype=float)
    base = in_use[0] - ev["delta_bytes"].iloc[0]  # in use before the first recorded event
    extend = lambda a: np.append(a, a[-1])  # noqa: E731
    stacks, labels, colors = [], [], []
    known = {k: v for k, v in (persistent or {}).items() if v > 0}
    if known and sum(known.values()) <= base:
        for name, nbytes in known.items():
            stacks.append(np.full(len(idx), nbytes / MIB))
            labels.append(f"{name.replace('_', ' ')} (before the step)")
            colors.append(CATEGORY_COLORS[name])
        base -= sum(known.values())
    if base > 0:
        stacks.append(np.full(len(idx), base / MIB))
        labels.append("other, in use before the step" if known else "in use before the step")
        colors.append("#bbbbbb")
    for code, name in enumerate(MEMORY_CATEGORIES):
        delta = np.where(ev["category"].to_numpy() == code, ev["delta_bytes"].to_numpy(dtype=float), 0.0)
        if np.any(delta):
            stacks.append(extend(np.cumsum(delta)) / MIB)
            labels.append(name.replace("_", " "))
            colors.append(CATEGORY_COLORS[name])
    fig, ax = plt.subplots(figsize=(12, 5))
    ax.stackplot(idx, *stacks, labels=labels, colors=colors, step="post", alpha=0.85)
    ax.step(idx, extend(in_use) / MIB, where="post", color="k", lw=0.8, label="total in use")
    peak = int(np.argmax(in_use))
    ax.plot([peak + 0.5], [in_use[peak] / MIB], "v", color="k", ms=7)
    allocs = ev[ev["delta_bytes"] > 0].sort_values("delta_bytes", ascending=False)
    allocs = allocs.drop_duplicates("tag").head(top).sort_index()
    lines = []
    for k, (i, a) in enumerate(allocs.iterrows(), start=1):
        ax.annotate(str(k), (i + 0.5, a["bytes_in_use"] / MIB), xytext=(0, 4), textcoords="offset points",
                    ha="center", va="bottom", fontsize=7,
                    bbox=dict(boxstyle="circle,pad=0.15", fc="white", ec="0.3", lw=0.5))
        lines.append(f"{k:>2}  {a['tag']}  {a['delta_bytes'] / MIB:,.1f} MiB")
    ax.set_ylim(0, in_use.max() / MIB * 1.12)
    ax.set_xlim(0, len(ev))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("allocation event (alloc or free), in order")
    ax.set_ylabel("bytes in use (MiB)")
    ax.set_title(f"Memory timeline of one train step: {timeline.name} ({os.path.basename(timeline.file)}); "
                 f"peak {in_use[peak] / MIB:,.1f} MiB (▼)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.text(1.01, 0.55, "largest allocations\n" + "\n".join(lines), transform=ax.transAxes, va="top",
            fontsize=7, family="monospace")
    ax.grid(True, alpha=0.3)
    return [_save(fig, out_dir, f"memory_timeline_{_slug(timeline.name)}.png")]


def memory_timelines(rec, out_dir, max_plots=24):
    """One figure per configuration of the memory table (its `timeline` column names the group),
    or per timeline when there is no such table."""
    timelines = rec.memory_timelines()
    rows = sections.memory_rows(rec)
    persistent = {}
    if rows is not None and "timeline" in rows:
        for _, r in rows.iterrows():
            key = (r["file"], str(r["timeline"]).rsplit("/", 1)[-1])
            persistent[key] = {c: float(r.get(f"peak_{c}_bytes", 0) or 0) for c in PERSISTENT}
        timelines = [t for t in timelines if (os.path.basename(t.file), t.name) in persistent]
    paths = []
    for t in timelines[:max_plots]:
        paths += memory_timeline(t, out_dir, persistent=persistent.get((os.path.basename(t.file), t.name)))
    return paths


def training_loss(rec, out_dir):
    """Each run's training loss per step, and its validation loss (/eval) as markers on a dashed
    line of the same colour."""
    df = rec.table("train_steps")
    if df is None:
        return []
    evals = rec.table("eval")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for file, g in df.groupby("file", sort=False):
        g = g.sort_values("step")
        (line,) = ax.plot(g["step"], g["loss"], lw=1, label=file)
        e = evals[evals["file"] == file].sort_values("step") if evals is not None else None
        if e is not None and not e.empty:
            ax.plot(e["step"], e["val_loss"], "o--", ms=4, lw=1, color=line.get_color(), label=f"{file} (validation)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats)")
    ax.set_title("Training loss" + (" and validation loss" if evals is not None else ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return [_save(fig, out_dir, "training_loss.png")]


PLOTTERS = [roofline, attention_latency, allreduce_bandwidth, ddp_step_time, ddp_buckets, ddp_timeline,
            memory_timelines, training_loss]


def plot_all(rec, out_dir):
    return [p for plot in PLOTTERS for p in plot(rec, out_dir)]
