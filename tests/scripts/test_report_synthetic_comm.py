"""scripts/report's communication sections on hand-made run records with known values
(tests/scripts/synth.py): bench allreduce's tables, bench ddp's strategies, bucket fits (the
overhead model recovering a known bandwidth and call overhead), sharding, the timeline's overlap
and PyTorch DDP's rows beside ours. The model, attention and training sections, and what every
report shares: test_report_synthetic.py."""
import math

import h5py
import numpy as np
import pytest

import synth
from synth import BANDWIDTH, CALL_COST
from conftest import png_size, read_csv, run_report


def test_allreduce_tables(tmp_path, out_dir):
    sizes = [1 << 20, 10 << 20, 100 << 20]
    a = tmp_path / "ar2.h5"
    b = tmp_path / "ar4.h5"
    synth.write_record(a, "bench allreduce", {"allreduce": synth.allreduce_rows("nccl", 2, sizes, 300)}, world_size=2)
    synth.write_record(b, "bench allreduce", {"allreduce": synth.allreduce_rows("nccl", 4, sizes, 350)}, world_size=4)
    run_report([a, b], out_dir)
    long = read_csv(out_dir, "allreduce")
    assert len(long) == 6 and long["ranks"].tolist() == [2, 2, 2, 4, 4, 4]
    assert long["size"].tolist()[:3] == ["1 MiB", "10 MiB", "100 MiB"]
    wide = read_csv(out_dir, "allreduce_busbw").set_index("size")
    expected = {r["bytes"]: r["busbw_GBps"] for r in synth.allreduce_rows("nccl", 4, sizes, 350)}
    assert wide.loc["10 MiB", "nccl × 4"] == pytest.approx(expected[10 << 20])


def test_bucket_fit_recovers_bandwidth_and_call_overhead(tmp_path, out_dir):
    path = tmp_path / "ddp.h5"
    s = synth.ddp_file(path, w_Bps=BANDWIDTH, o_s=CALL_COST, buckets_mb=(0, 1, 5, 10, 25, 100, 1000))
    run_report([path], out_dir)
    fit = read_csv(out_dir, "ddp_bucket_fit")
    assert len(fit) == 1
    assert fit["w_GBps"].iloc[0] == pytest.approx(BANDWIDTH / 1e9, rel=1e-6)
    assert fit["o_ms"].iloc[0] == pytest.approx(CALL_COST * 1e3, rel=1e-6)
    assert fit["t0_from"].iloc[0] == "ddp=none"
    assert fit["opt_buckets"].iloc[0] == pytest.approx(math.sqrt(s / (BANDWIDTH * CALL_COST)), rel=1e-6)
    assert fit["opt_bucket_MiB"].iloc[0] == pytest.approx(math.sqrt(s * BANDWIDTH * CALL_COST) / (1 << 20), rel=1e-6)
    points = read_csv(out_dir, "ddp_buckets")
    assert np.allclose(points["residual_ms"], 0.0, atol=1e-6)
    numels = synth.ddp_param_numels()
    assert points.set_index("bucket_mb").loc[0.0, "n_buckets"] == len(numels)  # one per parameter
    assert points.set_index("bucket_mb").loc[1000.0, "n_buckets"] == 1


def test_grad_comm_rows_get_their_own_fit_and_older_files_read_as_fp32(tmp_path, out_dir):
    new, old = tmp_path / "ddp.h5", tmp_path / "old.h5"
    s = synth.ddp_file(new, w_Bps=BANDWIDTH, o_s=CALL_COST, shards=True, grad_comm=("fp32", "bf16"))
    synth.ddp_file(old, w_Bps=BANDWIDTH, o_s=CALL_COST, ranks=4)  # no grad_comm column
    run_report([new, old], out_dir)
    ddp = read_csv(out_dir, "ddp")
    assert set(ddp[ddp["ranks"] == 4]["grad_comm"]) == {"fp32"}
    two = ddp[ddp["ranks"] == 2]
    assert two[two["ddp"] == "none"]["grad_comm"].tolist() == ["fp32"]
    assert (two["grad_comm"] == "bf16").sum() == (two["grad_comm"] == "fp32").sum() - 1  # the floor once
    # one fit per wire type, each recovering the link from its own bytes: s in fp32, s/2 in bf16
    fit = read_csv(out_dir, "ddp_bucket_fit")
    fit2 = fit[fit["ranks"] == 2].set_index("grad_comm")
    assert sorted(fit2.index) == ["bf16", "fp32"]
    for wire, s_wire in (("fp32", s), ("bf16", s / 2)):
        assert fit2.loc[wire, "s_MB"] == pytest.approx(s_wire / 1e6)
        assert fit2.loc[wire, "w_GBps"] == pytest.approx(BANDWIDTH / 1e9, rel=1e-6)
        assert fit2.loc[wire, "o_ms"] == pytest.approx(CALL_COST * 1e3, rel=1e-6)
    assert np.allclose(read_csv(out_dir, "ddp_buckets")["residual_ms"], 0.0, atol=1e-6)
    # sharded rows beside the unsharded run of their own wire type
    shard = read_csv(out_dir, "sharding")
    for wire in ("fp32", "bf16"):
        block = shard[shard["grad_comm"] == wire]
        assert block["shard"].tolist() == ["none", "broadcast", "zero1"], wire
        assert block["optstate_vs_unsharded"].tolist() == pytest.approx([1.0, 0.5, 0.5])


def test_bucket_counts_from_the_named_size_alone(tmp_path, out_dir):
    a, b = tmp_path / "resolved.h5", tmp_path / "named.h5"
    synth.ddp_file(a, w_Bps=BANDWIDTH, o_s=CALL_COST)
    synth.ddp_file(b, w_Bps=BANDWIDTH, o_s=CALL_COST, model_attrs=False, ranks=4)
    run_report([a, b], out_dir)
    points = read_csv(out_dir, "ddp_buckets")
    two, four = points[points["ranks"] == 2], points[points["ranks"] == 4]
    assert len(two) == len(four) == 5
    assert two["n_buckets"].tolist() == four["n_buckets"].tolist()
    assert len(read_csv(out_dir, "ddp_bucket_fit")) == 2


def test_fit_with_free_intercept_and_noise():
    from paratrain_report import overhead
    s = 500e6
    n = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=float)
    t0 = 0.2
    exact = t0 + s / (n * BANDWIDTH) + n * CALL_COST
    fit = overhead.fit_overhead(s, n, exact)  # t0 unknown: fitted
    assert fit.t0_fitted and fit.t0_s == pytest.approx(t0, rel=1e-9)
    assert fit.w_Bps == pytest.approx(BANDWIDTH, rel=1e-9) and fit.o_s == pytest.approx(CALL_COST, rel=1e-9)
    rng = np.random.default_rng(0)
    noisy = exact * (1 + 0.002 * rng.standard_normal(len(n)))
    fit = overhead.fit_overhead(s, n, noisy, t0_s=t0)
    assert fit.w_Bps == pytest.approx(BANDWIDTH, rel=0.1) and fit.o_s == pytest.approx(CALL_COST, rel=0.1)
    # the optimum minimises the model
    nb = fit.optimal_buckets
    assert fit.overhead_s(nb) <= min(fit.overhead_s(nb * 0.9), fit.overhead_s(nb * 1.1))


def test_fit_needs_enough_points_and_reports_no_interior_optimum():
    from paratrain_report import overhead
    with pytest.raises(ValueError):
        overhead.fit_overhead(1e8, [4, 4, 4], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError):
        overhead.fit_overhead(1e8, [1, 2], [1.0, 0.9])  # t0 free needs 3 distinct counts
    # step time falling faster than 1/n_b: the fitted call cost is negative → no interior optimum
    fit = overhead.fit_overhead(1e8, [1, 2, 4], [0.99, 0.48, 0.21], t0_s=0.0)
    assert fit.o_s == pytest.approx(-0.01) and fit.w_Bps == pytest.approx(1e8)
    assert fit.optimal_buckets is None and fit.optimal_bucket_bytes is None


def test_bucket_count_follows_plan_buckets():
    from paratrain_report import overhead
    mib = 1 << 20
    numels = [mib // 4, mib // 8, mib // 8, 3 * mib // 4, mib // 4]  # bytes: 1, .5, .5, 3, 1 MiB
    # reverse order: 1 | 3 (alone: larger than the cap) | .5+.5 | 1  with a 1 MiB cap
    assert overhead.bucket_count(numels, 1.0) == 4
    assert overhead.bucket_count(numels, 0) == 5  # one per parameter
    assert overhead.bucket_count(numels, 4.0) == 2  # 1+3 | .5+.5+1
    assert overhead.bucket_count(numels, 100.0) == 1
    # the reference layout: per layer 9 parameters, plus embedding, ln_final, lm_head
    assert len(overhead.reference_param_numels(100, 8, 3, 16)) == 3 * 9 + 3
    from paratrain_report.model_sizes import num_params
    assert sum(overhead.reference_param_numels(100, 8, 3, 16)) == num_params(100, 8, 3, 16)


def test_ddp_strategies_sharding_and_timeline(tmp_path, out_dir):
    path = tmp_path / "ddp.h5"
    synth.ddp_file(path, w_Bps=BANDWIDTH, o_s=CALL_COST, shards=True, events=True)
    run_report([path], out_dir, "--plots")
    ddp = read_csv(out_dir, "ddp")
    assert ddp["ddp"].tolist()[:2] == ["none", "flat"]
    assert (ddp["ddp"] == "reduce_scatter").sum() == 0  # sharded rows are in their own table
    assert set(ddp["grad_comm"]) == {"fp32"}  # a file from before --grad-comm
    shard = read_csv(out_dir, "sharding")
    assert shard["shard"].tolist() == ["none", "broadcast", "zero1"]
    assert shard["optstate_vs_unsharded"].tolist() == pytest.approx([1.0, 0.5, 0.5])
    assert shard["bucket_mb"].iloc[0] == 25.0  # the unsharded run with broadcast's gradient sync
    for name in ("ddp_step_time.png", "ddp_buckets.png", "ddp_timeline.png"):
        w, h = png_size(out_dir / "plots" / name)
        assert w > 300 and h > 200


def test_overlap_fraction():
    from paratrain_report.plots import overlap_fraction
    compute = [(0, 10), (10, 20)]
    assert overlap_fraction(compute, [(15, 25)]) == pytest.approx(0.5)
    assert overlap_fraction(compute, [(20, 30)]) == pytest.approx(0.0)
    assert overlap_fraction(compute, [(2, 4), (5, 9)]) == pytest.approx(1.0)


def test_pytorch_ddp_rows_beside_ours(tmp_path, out_dir):
    path = tmp_path / "ddp.h5"
    synth.ddp_file(path, w_Bps=BANDWIDTH, o_s=CALL_COST, buckets_mb=(1, 25, 100), shards=True)
    torch_path = tmp_path / "torch_ddp.h5"
    torch_rows = [{"ddp": d, "bucket_mb": b, "shard": "none", "ranks": 2, "precision": "fp32", "step_ms": ms,
                   "step_sd_ms": 1.0, "step_ms_max_rank": ms, "overhead_pct": 0.0, "peak_MB": 4000.0,
                   "tokens_per_s": 1.0}
                  for d, b, ms in (("none", math.nan, 250.0), ("ddp", 25.0, 300.0), ("zero", 25.0, 320.0))]
    synth.write_record(torch_path, "compare_torch_ddp", {"ddp_torch": torch_rows}, world_size=2)
    run_report([path, torch_path], out_dir)
    df = read_csv(out_dir, "ddp_torch").set_index("torch")
    assert df.loc["none", "ratio"] == pytest.approx(200.0 / 250.0)
    with h5py.File(path, "r") as f:
        t = f["ddp"][()]
    ours25 = t[(t["ddp"] == b"bucketed") & (t["bucket_mb"] == 25.0) & (t["shard"] == b"none")]["step_ms"][0]
    assert df.loc["ddp", "paratrain_step_ms"] == pytest.approx(ours25)
    assert df.loc["ddp", "ratio"] == pytest.approx(ours25 / 300.0)
    zero1 = t[t["shard"] == b"zero1"]["step_ms"][0]
    assert df.loc["zero", "ratio"] == pytest.approx(zero1 / 320.0)
    assert set(df["grad_comm"]) == {"fp32"}  # torch rows from before ddp_bf16


# ---- torch, training, accumulation ---------------------------------------------------------
