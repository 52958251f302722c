"""bench ddp's per-rank timeline (/ddp_events) and bucket counts (/ddp buckets) as the real binary
writes them (ctest fixture scripts_test_data: 2 CPU ranks, the tiny model, every strategy, bucket
caps 0, 0.1, 1, 10 MiB, both sharding modes, gradients in fp32 and bf16), checked against the
model's shapes: one timeline per configuration and rank, compute phases in order without overlap,
one communication event per collective the strategy issues, named after its bucket or parameter
(a bf16 copy too); and the report's overlap plot drawn from them."""
import math
import os

import h5py
import numpy as np
import pandas as pd
import pytest

from conftest import png_size, run_report
from paratrain_report import overhead

DATA = os.environ.get("PARATRAIN_TEST_DATA", "")
VOCAB, D_MODEL, LAYERS, D_FF = 10000, 128, 4, 384  # tiny
LAYER_PARAMS = ["ln1.weight", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
                "attn.output_proj.weight", "ln2.weight", "ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight"]
PARAM_NAMES = (["token_embeddings.weight"] + [f"layers.{i}.{p}" for i in range(LAYERS) for p in LAYER_PARAMS]
               + ["ln_final.weight", "lm_head.weight"])
NUMELS = overhead.reference_param_numels(VOCAB, D_MODEL, LAYERS, D_FF)


def ddp_file():
    if not DATA or not os.path.isdir(DATA):
        pytest.skip("PARATRAIN_TEST_DATA is not set: run through ctest (fixture scripts_test_data)")
    path = os.path.join(DATA, "ddp.h5")
    if not os.path.exists(path):
        pytest.skip(f"{path} was not produced (see ddp.log there)")
    return path


def frame(path, name):
    with h5py.File(path, "r") as f:
        t = f[name][()]
    return pd.DataFrame({c: [v.decode() if isinstance(v, bytes) else v for v in t[c]] for c in t.dtype.names})


def config_key(row):
    return (row["ddp"], -1.0 if math.isnan(row["bucket_mb"]) else row["bucket_mb"], row["shard"], row["grad_comm"],
            row["zero1_prefetch"])


def by_config(ev, *extra):
    """ev grouped by configuration (and `extra` columns): one group per timeline."""
    return ev.groupby(["ddp", ev["bucket_mb"].fillna(-1.0), "shard", "grad_comm", "zero1_prefetch", *extra])


@pytest.fixture(scope="module")
def tables():
    path = ddp_file()
    return path, frame(path, "ddp"), frame(path, "ddp_events")


def test_bucket_column_matches_the_plan(tables):
    _, ddp, _ = tables
    assert len(PARAM_NAMES) == len(NUMELS) == 39
    for _, r in ddp.iterrows():
        if r["ddp"] == "bucketed":
            want = overhead.bucket_count(NUMELS, r["bucket_mb"])
        elif r["ddp"] == "bucketed_reduce_scatter":  # zero1 with the default 25 MiB cap: no tail here
            want = overhead.bucket_count(NUMELS, 25.0)
        else:
            want = {"none": 0, "flat": 1, "reduce_scatter": 1, "naive": 39, "overlap": 39}[r["ddp"]]
        assert r["buckets"] == want, (r["ddp"], r["bucket_mb"], r["shard"])
    caps = ddp[(ddp["ddp"] == "bucketed") & (ddp["shard"] == "none") & (ddp["grad_comm"] == "fp32")]
    caps = caps.set_index("bucket_mb")["buckets"]
    assert caps[0.0] == 39 and caps[10.0] == 2


def test_one_timeline_per_configuration_and_rank(tables):
    _, ddp, ev = tables
    configs = {config_key(r) for _, r in ddp.iterrows()}
    assert {config_key(r) for _, r in ev.iterrows()} == configs
    for key, g in by_config(ev):
        assert sorted(g["rank"].unique()) == [0, 1], key
        assert g["step"].nunique() == 1 and g["step"].iloc[0] == 1 + 2, key  # after warm-up 1, steps 2
        assert set(g["stream"]) <= {"compute", "comm"}
        assert (g["end_ms"] >= g["start_ms"]).all() and (g["start_ms"] >= 0).all(), key


def test_compute_phases_in_order(tables):
    _, _, ev = tables
    backward = (["backward lm_head", "backward ln_final"] + [f"backward layers.{i}" for i in reversed(range(LAYERS))]
                + ["backward token_embeddings"])
    for key, g in by_config(ev[ev["stream"] == "compute"], "rank"):
        names = g["name"].tolist()
        assert names[:len(backward) + 1] == ["forward"] + backward, key
        rest = [n for n in names[len(backward) + 1:] if n != "backward (rest)"]
        assert rest and set(rest) == {"optimizer"}, key
        starts, ends = g["start_ms"].to_numpy(), g["end_ms"].to_numpy()
        assert starts[0] == 0.0
        assert np.all(starts[1:] >= ends[:-1] - 1e-9), f"{key}: compute events overlap"


def expected_comm(ddp, bucket_mb, shard):
    """(names, ordered): name prefixes of the collectives, and whether they are issued in that
    order (per-parameter and bucket collectives start in the order backward finishes them)."""
    reverse = list(reversed(PARAM_NAMES))
    if ddp == "none":
        return [], True
    if ddp == "naive":
        return [f"all-reduce {n}" for n in reverse], True
    if ddp == "overlap":  # in the order backward finishes them
        return [f"all-reduce {n}" for n in reverse], False
    if ddp == "flat":
        return ["all-reduce all gradients"], True
    if ddp == "bucketed":
        nb = overhead.bucket_count(NUMELS, 25.0 if shard == "broadcast" else bucket_mb)
        names = [f"all-reduce bucket {b}" for b in range(nb)]
        if shard == "broadcast":  # each owner broadcasts its run of parameters
            names += ["broadcast parameters token_embeddings.weight to", "broadcast parameters"]
        return names, shard == "broadcast"
    if ddp == "reduce_scatter":
        return ["reduce-scatter all gradients", "all-gather"], True
    if ddp == "bucketed_reduce_scatter":  # one 25 MiB bucket (an even element count: no tail)
        return ["reduce-scatter bucket 0", "all-gather"], True
    raise AssertionError(ddp)


def test_one_comm_event_per_collective(tables):
    _, _, ev = tables
    for (ddp, bucket, shard, wire, _prefetch, rank), g in by_config(ev, "rank"):
        names = g[g["stream"] == "comm"]["name"].tolist()
        want, ordered = expected_comm(ddp, bucket, shard)
        # gradient collectives on a bf16 copy say so beside their size; parameters stay fp32
        for n in names:
            assert ("(bf16, " in n) == (wire == "bf16" and not n.startswith(("all-gather", "broadcast"))), n
        assert len(names) == len(want), (ddp, bucket, shard, rank, names)
        if not ordered:  # whole names: each collective exactly once
            assert sorted(n[:n.rindex(" (")] for n in names) == sorted(want), (ddp, bucket, shard, rank)
            continue
        for n, w in zip(names, want):
            assert n.startswith(w), (ddp, bucket, shard, n, w)
            assert n.endswith(" MB)"), n


def test_blocking_strategies_communicate_after_backward(tables):
    """naive and flat start their collectives only when backward is over, and the optimizer
    runs only once they are done: the timeline must show no overlap there."""
    _, _, ev = tables
    for (ddp, wire, rank), g in ev[ev["shard"] == "none"].groupby(["ddp", "grad_comm", "rank"]):
        if ddp not in ("naive", "flat"):
            continue
        compute, comm = g[g["stream"] == "compute"], g[g["stream"] == "comm"]
        backward_end = compute[compute["name"].str.startswith("backward")]["end_ms"].max()
        optimizer_start = compute[compute["name"] == "optimizer"]["start_ms"].min()
        assert comm["start_ms"].min() >= backward_end - 1e-9, (ddp, wire, rank)
        assert comm["end_ms"].max() <= optimizer_start + 1e-9, (ddp, wire, rank)


def test_report_draws_the_timeline(tables, tmp_path):
    path, _, _ = tables
    out = tmp_path / "report"
    run_report([path], out, "--plots")
    assert png_size(out / "plots" / "ddp_timeline.png")[0] > 300
