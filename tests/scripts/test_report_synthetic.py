"""scripts/report on hand-made run records with known values (tests/scripts/synth.py): each kind of
table carries the rows and derived values it should, missing kinds are skipped, malformed files
are errors naming the file, and the plots are real PNGs."""
import math
import os

import h5py
import numpy as np
import pytest

import synth
from paratrain_report import records
from conftest import png_size, read_csv, run_report


def model_rows():
    """small at ctx 128/512, fp32 and bf16, warm-up 0/1/2/5 (step time falls with warm-up), one OOM."""
    rows = []
    for precision, base in (("fp32", 300.0), ("bf16", 110.0)):
        for ctx in (128, 512):
            for w in (0, 1, 2, 5):
                step = base * ctx / 512 * (1 + 0.5 / (w + 1))
                rows.append(synth.model_row(ctx=ctx, precision=precision, warmup=w, step_ms=step, sd=w + 1.0))
    rows.append(synth.model_row(size="xl", ctx=1024, precision="bf16", status="oom"))
    return rows


@pytest.fixture
def model_h5(tmp_path):
    path = tmp_path / "model.h5"
    breakdown = [{"size": "small", "context_length": 512, "precision": "fp32", "attention": "flash", "pass": p,
                  "phase": ph, "family": fam, "ms_per_step": ms * (2 if ph == "backward" else 1),
                  "ops_per_step": 4.0, "percent_of_pass": 0.0}
                 for p in ("inference", "train-step") for ph in (("forward",) if p == "inference" else
                                                                 ("forward", "backward"))
                 for fam, ms in (("matmul", 30.0), ("attention", 6.0), ("normalization", 1.5))]
    synth.model_file(path, model_rows(), memory_rows=[synth.memory_row(ctx=c) for c in (128, 512)],
                     timelines={"small_ctx512_fp32_flash_w5": synth.memory_timeline()}, breakdown=breakdown)
    return path


def test_precision_speedup_is_the_ratio_of_step_times(model_h5, out_dir):
    run_report([model_h5], out_dir)
    df = read_csv(out_dir, "precision")
    with h5py.File(model_h5, "r") as f:
        t = f["model"][()]
    for _, row in df.iterrows():
        def step(prec):  # the steady-state row: the largest warm-up of this configuration
            sel = t[(t["precision"] == prec.encode()) & (t["context_length"] == row["context_length"]) &
                    (t["warmup_steps"] == 5) & (t["size"] == b"small")]
            assert len(sel) == 1
            return sel["step_ms_mean"][0]
        assert row["fp32_step_ms"] == pytest.approx(step("fp32"))
        assert row["bf16_step_ms"] == pytest.approx(step("bf16"))
        assert row["bf16_speedup"] == pytest.approx(step("fp32") / step("bf16"))
        assert row["bf16_speedup"] == pytest.approx(300.0 / 110.0)
    assert sorted(df["context_length"]) == [128, 512]


def test_model_timings_show_the_steady_state_and_the_oom_row(model_h5, out_dir):
    run_report([model_h5], out_dir)
    df = read_csv(out_dir, "model_timings")
    assert set(df["warmup_steps"]) == {5}
    assert len(df) == 5  # 2 contexts × 2 precisions + the OOM configuration
    oom = df[df["status"] == "oom"]
    assert len(oom) == 1 and oom["size"].iloc[0] == "xl" and math.isnan(oom["step_ms_mean"].iloc[0])
    ok = df[df["status"] == "ok"]
    assert ok["mfu_pct"].tolist() == pytest.approx([30.0] * 4)  # mfu 0.3 printed as percent
    assert ok["peak_MiB"].tolist() == pytest.approx([2048.0] * 4)
    md = open(out_dir / "report.md").read()
    assert "## Model timings per size and context" in md
    # sizes in their natural order, not alphabetical
    assert df["size"].tolist().index("small") < df["size"].tolist().index("xl")


def test_warmup_table_compares_every_warmup_count(model_h5, out_dir):
    run_report([model_h5], out_dir)
    df = read_csv(out_dir, "warmup")
    assert len(df) == 16
    for _, g in df.groupby(["context_length", "precision"]):
        assert g["warmup_steps"].tolist() == [0, 1, 2, 5]
        steady = g[g["warmup_steps"] == 5]["step_ms_mean"].iloc[0]
        assert g["vs_steady"].tolist() == pytest.approx((g["step_ms_mean"] / steady).tolist())
        assert g["vs_steady"].iloc[0] == pytest.approx(1.5 / (1 + 0.5 / 6))


def test_memory_per_context_in_mib(model_h5, out_dir):
    run_report([model_h5], out_dir)
    df = read_csv(out_dir, "memory")
    assert df["context_length"].tolist() == [128, 512]
    assert df["peak_forward_MiB"].tolist() == pytest.approx([1024.0, 1024.0])
    assert df["peak_train_step_MiB"].tolist() == pytest.approx([3072.0, 3072.0])
    assert df["peak_optimizer_state_MiB"].tolist() == pytest.approx([1024.0, 1024.0])


def test_kernel_breakdown_sums_phases_and_percentages(model_h5, out_dir):
    run_report([model_h5], out_dir)
    df = read_csv(out_dir, "breakdown").set_index("family")
    # train-step: forward 30 + backward 60 for matmul
    assert df.loc["matmul", "train-step_ms"] == pytest.approx(90.0)
    assert df.loc["matmul", "inference_ms"] == pytest.approx(30.0)
    assert df["train-step_pct"].sum() == pytest.approx(100.0)
    assert df["inference_pct"].sum() == pytest.approx(100.0)
    assert df.index.tolist()[0] == "matmul"  # largest first


def test_roofline_table_ratio_rates_order_and_plot(tmp_path, out_dir):
    """/model_roofline: rows in phase order (the step row last), the ratio as written, achieved
    rates derived from the counts, the ceilings named under the table, and the figure drawn."""
    path = tmp_path / "roofline.h5"
    rows = [synth.roofline_row(phase="step", family="all", gflop=1400.0, gbytes=20.0, achieved_ms=12.0),
            synth.roofline_row(phase="optimizer", family="optimizer", gflop=0.0, gbytes=9.0, achieved_ms=4.0),
            synth.roofline_row(phase="backward", family="matmul", gflop=800.0, gbytes=3.0, achieved_ms=1.6),
            synth.roofline_row(phase="forward", family="matmul", gflop=400.0, gbytes=0.5, achieved_ms=0.8),
            synth.roofline_row(phase="forward", family="elementwise", gflop=0.0, gbytes=6.0, achieved_ms=3.0)]
    rows += [synth.roofline_row(pass_="inference", phase=ph, family=fam, gflop=400.0, gbytes=8.0, achieved_ms=ms)
             for ph, fam, ms in (("forward", "matmul", 0.9), ("step", "all", 4.0))]
    synth.model_file(path, [synth.model_row(precision="bf16")], roofline=rows)
    run_report([path], out_dir, "--plots")
    df = read_csv(out_dir, "roofline")
    train = df[df["pass"] == "train-step"]
    assert train["phase"].tolist() == ["forward", "forward", "backward", "optimizer", "step"]
    assert df["pass"].tolist()[:2] == ["inference", "inference"]  # passes in their natural order
    written = {(r["pass"], r["phase"], r["family"]): r for r in rows}
    for _, r in df.iterrows():
        w = written[(r["pass"], r["phase"], r["family"])]
        assert r["ratio"] == pytest.approx(w["ratio"])
        assert r["bound"] == w["bound"]
        assert r["achieved_GBps"] == pytest.approx(w["gbytes"] / (w["achieved_ms"] * 1e-3))
        if w["gflop"] > 0:
            assert r["achieved_tflops"] == pytest.approx(w["gflop"] / w["achieved_ms"])
        else:
            assert math.isnan(r["achieved_tflops"])
    mm = train[train["family"] == "matmul"].set_index("phase")
    assert mm.loc["forward", "bound"] == "compute"  # 400 GFLOP at 989.4 TFLOP/s > 0.5 GB at 3 TB/s
    assert mm.loc["backward", "bound"] == "memory"  # 800 GFLOP: 0.81 ms < 3 GB: 1 ms
    assert mm.loc["forward", "ratio"] == pytest.approx(0.8 / (400e9 / 989.4e12 * 1e3))
    md = open(out_dir / "report.md").read()
    assert "## Roofline: achieved against the hardware's floor" in md
    assert "dense peak 989.4 TFLOP/s; measured copy rate 3,000 GB/s" in md
    # The ratio comes right after the row's identity, before the times.
    header = next(line for line in md.splitlines() if line.startswith("| size") and "achieved / floor" in line)
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells.index("achieved / floor") == cells.index("op family") + 1
    w, h = png_size(out_dir / "plots" / "roofline.png")
    assert w > 400 and h > 200


def test_roofline_without_a_peak_says_the_floors_are_memory_only(tmp_path, out_dir):
    path = tmp_path / "roofline_cpu.h5"
    nan = float("nan")
    rows = [synth.roofline_row(precision="fp32", gflop=5.0, gbytes=1.0, achieved_ms=2000.0, peak_tflops=nan,
                               copy_GBps=20.0),
            synth.roofline_row(precision="fp32", phase="step", family="all", gflop=5.0, gbytes=1.0,
                               achieved_ms=2500.0, peak_tflops=nan, copy_GBps=20.0)]
    synth.model_file(path, [synth.model_row()], roofline=rows)
    run_report([path], out_dir)
    df = read_csv(out_dir, "roofline")
    assert df["ratio"].tolist() == pytest.approx([2000.0 / 50.0, 2500.0 / 50.0])
    assert set(df["bound"]) == {"memory"}
    assert "no dense peak known (memory-only floors); measured copy rate 20 GB/s" in open(out_dir / "report.md").read()


def test_attention_compare_speedups_and_oom(tmp_path, out_dir):
    rows = []
    for seq in (128, 256, 512):
        rows.append(synth.attention_row("flash", seq, ms=seq / 1000))
        rows.append(synth.attention_row("naive", seq, ms=seq * seq / 1e5, status="ok" if seq < 512 else "OOM"))
    path = tmp_path / "attention.h5"
    synth.write_record(path, "bench attention", {"attention": rows})
    run_report([path], out_dir)
    all_rows = read_csv(out_dir, "attention")
    assert len(all_rows) == 6
    cmp = read_csv(out_dir, "attention_compare").set_index("seq")
    assert cmp.loc[128, "fwd_ms_speedup"] == pytest.approx((128 * 128 / 1e5) / (128 / 1000))
    assert cmp.loc[256, "fwdbwd_ms_speedup"] == pytest.approx((256 * 256 / 1e5) / (256 / 1000))
    assert cmp.loc[512, "fwd_ms_naive"] == "OOM"
    assert math.isnan(cmp.loc[512, "fwd_ms_speedup"])
    md = open(out_dir / "report.md").read()
    assert "| OOM |" in md


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


def test_missing_kinds_are_skipped(tmp_path, out_dir):
    path = tmp_path / "ar.h5"
    synth.write_record(path, "bench allreduce", {"allreduce": synth.allreduce_rows("mpi", 2, [4096])}, world_size=2)
    proc = run_report([path], out_dir, "--plots")
    assert sorted(os.listdir(out_dir / "csv")) == ["allreduce.csv", "allreduce_busbw.csv"]
    assert sorted(os.listdir(out_dir / "plots")) == ["allreduce_bandwidth.png"]
    assert "Model timings" not in open(out_dir / "report.md").read()
    assert proc.stderr == ""


# ---- bench ddp and the overhead model ------------------------------------------------------

BANDWIDTH, CALL_COST = 40e9, 1.5e-3  # bytes/s, s


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

def test_torch_comparison_ratios(model_h5, tmp_path, out_dir):
    torch_path = tmp_path / "torch.h5"
    synth.write_record(torch_path, "compare_torch", {"torch_model": [
        synth.torch_row("small", 512, "fp32", "eager", 400.0), synth.torch_row("small", 512, "fp32", "compile", 350.0),
        synth.torch_row("small", 512, "bf16", "eager", 160.0), synth.torch_row("small", 512, "bf16", "compile", 100.0),
        synth.torch_row("small", 128, "bf16", "eager", 50.0)]})
    other_gpu = tmp_path / "torch_h200.h5"
    synth.write_record(other_gpu, "compare_torch",
                       {"torch_model": [synth.torch_row("small", 512, "fp32", "eager", 1.0)]}, gpu="NVIDIA H200")
    run_report([model_h5, torch_path, other_gpu], out_dir)
    df = read_csv(out_dir, "torch_compare")
    # only the same device is compared: the H200 row matches nothing of ours
    assert set(df["gpu"]) == {synth.GPU}
    r512 = df[(df["context_length"] == 512) & (df["precision"] == "bf16")].iloc[0]
    ours = 110.0 * (1 + 0.5 / 6)
    assert r512["ours_ms"] == pytest.approx(ours)
    assert r512["eager_ratio"] == pytest.approx(ours / 160.0)
    assert r512["compile_ratio"] == pytest.approx(ours / 100.0)
    r128 = df[(df["context_length"] == 128) & (df["precision"] == "bf16")].iloc[0]
    assert math.isnan(r128["compile_ms"])
    assert len(df) == 3  # ctx 512 fp32 and bf16, ctx 128 bf16


def test_fused_on_and_off_stay_apart(tmp_path, out_dir):
    """`bench model --fused off` and `--fused on` of one configuration are two rows wherever the
    report lists configurations, with a `fused` column to tell them apart."""
    path = tmp_path / "fused.h5"
    rows = [dict(synth.model_row(step_ms=ms), fused=f) for f, ms in (("off", 130.0), ("on", 100.0))]
    breakdown = [{"size": "small", "context_length": 512, "precision": "fp32", "attention": "flash", "fused": f,
                  "pass": "train-step", "phase": "forward", "family": "matmul", "ms_per_step": ms,
                  "ops_per_step": 4.0, "percent_of_pass": 100.0} for f, ms in (("off", 90.0), ("on", 70.0))]
    synth.model_file(path, rows, breakdown=breakdown)
    torch_path = tmp_path / "torch.h5"
    synth.write_record(torch_path, "compare_torch", {"torch_model": [synth.torch_row("small", 512, "fp32", "eager", 200.0)]})
    run_report([path, torch_path], out_dir)
    timings = read_csv(out_dir, "model_timings").set_index("fused")
    assert timings.loc["off", "step_ms_mean"] == pytest.approx(130.0)
    assert timings.loc["on", "step_ms_mean"] == pytest.approx(100.0)
    kernels = read_csv(out_dir, "breakdown").set_index("fused")
    assert kernels.loc["off", "train-step_ms"] == pytest.approx(90.0)
    assert kernels.loc["on", "train-step_ms"] == pytest.approx(70.0)
    ratios = read_csv(out_dir, "torch_compare").set_index("fused")
    assert ratios.loc["off", "eager_ratio"] == pytest.approx(130.0 / 200.0)
    assert ratios.loc["on", "eager_ratio"] == pytest.approx(100.0 / 200.0)


def test_training_summary(tmp_path, out_dir):
    a, b = tmp_path / "run_a.h5", tmp_path / "run_b.h5"
    synth.train_file(a, steps=20, first_loss=9.0, final_loss=4.0)
    synth.train_file(b, steps=10, first_loss=9.0, final_loss=6.0)
    run_report([a, b], out_dir, "--plots")
    df = read_csv(out_dir, "training").set_index("file")
    assert df.loc["run_a.h5", "steps"] == 20 and df.loc["run_b.h5", "steps"] == 10
    assert df.loc["run_a.h5", "final_loss"] == pytest.approx(4.0)
    assert df.loc["run_a.h5", "min_loss"] == pytest.approx(4.0)
    assert df.loc["run_a.h5", "step_ms"] == pytest.approx(100.0)  # the first (slow) step left out
    assert png_size(out_dir / "plots" / "training_loss.png")[0] > 300


# ---- formats, plots, errors ----------------------------------------------------------------

def test_markdown_and_latex_are_well_formed(model_h5, out_dir):
    run_report([model_h5], out_dir)
    md = open(out_dir / "report.md").read().splitlines()
    start = md.index("## Mixed versus full precision")
    first = next(i for i in range(start, len(md)) if md[i].startswith("|"))
    block = []
    for line in md[first:]:
        if not line.startswith("|"):
            break
        block.append(line)
    assert len(block) == 2 + 2  # header, rule, two contexts
    assert all(line.count("|") == block[0].count("|") for line in block)
    assert "| 2.73× |" in block[2]  # 300/110 printed with two decimals
    tex = open(out_dir / "report.tex").read()
    assert tex.startswith("\\documentclass") and tex.rstrip().endswith("\\end{document}")
    assert tex.count("\\begin{tabular}") == tex.count("\\end{tabular}") >= 5
    assert "2.73$\\times$" in tex
    # every underscore and percent sign in the printed text is escaped (comments and labels aside)
    body = "\n".join(line for line in tex[tex.index("\\begin{document}"):].splitlines()
                     if not line.startswith(("%", "\\label")))
    assert "_" not in body.replace("\\_", "")
    assert "%" not in body.replace("\\%", "")
    assert "MFU \\%" in body
    assert body.isascii(), sorted({ch for ch in body if not ch.isascii()})  # pdflatex-safe
    assert "`" not in body and "\\texttt{paratrain bench model}" in body


def test_latex_of_every_kind_is_plain_ascii(model_h5, tmp_path, out_dir):
    files = [model_h5, tmp_path / "att.h5", tmp_path / "ar.h5", tmp_path / "ddp.h5", tmp_path / "train.h5",
             tmp_path / "torch.h5"]
    synth.write_record(files[1], "bench attention", {"attention": [
        synth.attention_row(i, 64) for i in ("naive", "flash")]})
    synth.write_record(files[2], "bench allreduce", {"allreduce": synth.allreduce_rows("nccl", 2, [1 << 20])})
    synth.ddp_file(files[3], w_Bps=BANDWIDTH, o_s=CALL_COST, shards=True)
    synth.train_file(files[4])
    synth.write_record(files[5], "compare_torch",
                       {"torch_model": [synth.torch_row("small", 512, "bf16", "eager", 1.0)]})
    run_report(files, out_dir)
    tex = open(out_dir / "report.tex").read()
    assert tex.count("\\begin{table}") == len(os.listdir(out_dir / "csv")) >= 14
    body = tex[tex.index("\\begin{document}"):]
    assert body.isascii(), sorted({ch for ch in body if not ch.isascii()})


def test_memory_timeline_and_attention_plots(model_h5, tmp_path, out_dir):
    att = tmp_path / "attention.h5"
    synth.write_record(att, "bench attention", {"attention": [
        synth.attention_row(i, s, d=d, ms=s / 100, status="OOM" if (i, s) == ("naive", 1024) else "ok")
        for i in ("naive", "flash") for s in (256, 512, 1024) for d in (32, 64)]})
    run_report([model_h5, att], out_dir, "--plots")
    plots = sorted(os.listdir(out_dir / "plots"))
    assert plots == ["attention_latency.png", "memory_timeline_small_ctx512_fp32_flash_w5.png"]
    for p in plots:
        w, h = png_size(out_dir / "plots" / p)
        assert w > 400 and h > 300
        assert os.path.getsize(out_dir / "plots" / p) > 10_000


def test_many_files_of_one_sweep_are_read_together(tmp_path, out_dir):
    paths = []
    for i, ctx in enumerate((128, 256, 512)):
        p = tmp_path / f"model_{i}.h5"
        synth.model_file(p, [synth.model_row(ctx=ctx, precision=prec, step_ms=ms)
                             for prec, ms in (("fp32", 3.0 * ctx), ("bf16", 1.0 * ctx))])
        paths.append(p)
    run_report(paths, out_dir)
    df = read_csv(out_dir, "precision")
    assert df["context_length"].tolist() == [128, 256, 512]
    assert df["bf16_speedup"].tolist() == pytest.approx([3.0, 3.0, 3.0])


@pytest.mark.parametrize("kind", ["not_hdf5", "no_tables", "missing_column", "bad_timeline", "absent"])
def test_malformed_file_is_an_error_naming_it(tmp_path, out_dir, kind, model_h5):
    bad = tmp_path / f"bad_{kind}.h5"
    if kind == "not_hdf5":
        bad.write_text("this is not HDF5\n")
    elif kind == "no_tables":
        with h5py.File(bad, "w") as f:
            f["weights"] = np.zeros(3)
    elif kind == "missing_column":
        rows = [{k: v for k, v in synth.model_row().items() if k != "step_ms_mean"}]
        synth.write_record(bad, "bench model", {"model": rows})
    elif kind == "bad_timeline":
        tl = synth.memory_timeline()
        tl["tag"] = tl["tag"][:-1]
        synth.model_file(bad, [synth.model_row()], timelines={"x": tl})
    proc = run_report([model_h5, bad], out_dir, check=False)
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and proc.stderr.startswith("report: error:")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (out_dir / "report.md").exists()


def test_bad_format_is_a_usage_error(model_h5, out_dir):
    proc = run_report([model_h5], out_dir, "--format", "md,pdf", check=False)
    assert proc.returncode == 2 and "pdf" in proc.stderr


def test_write_record_is_atomic_and_refuses_to_overwrite(tmp_path):
    from paratrain_report import records
    path = tmp_path / "r.h5"
    records.write_record(str(path), {"t": [{"a": 1, "b": "x", "c": 2.5}]}, {"subcommand": "test", "gpus": ["g"]})
    with pytest.raises(records.ReportError, match="exists"):
        records.write_record(str(path), {"t": [{"a": 2, "b": "y", "c": 0.0}]})
    run = records.load_file(str(path))
    assert run.tables["t"].to_dict("records") == [{"a": 1, "b": "x", "c": 2.5}]
    assert run.attrs["gpus"] == ["g"] and run.attrs["schema_version"] == 1
    assert os.listdir(tmp_path) == ["r.h5"]


def test_write_record_accepts_numpy_strings(tmp_path):
    # torch reports device names as numpy.str_, which h5py cannot store as they are.
    path = tmp_path / "np_strings.h5"
    records.write_record(str(path), {"t": [{"a": 1, "b": "x"}]},
                         {"gpu": np.str_("NVIDIA H100 80GB HBM3"), "gpus": np.array(["a", "bb"])})
    with h5py.File(path) as f:
        assert f.attrs["gpu"] == "NVIDIA H100 80GB HBM3"
        assert [x.decode() if isinstance(x, bytes) else x for x in f.attrs["gpus"]] == ["a", "bb"]
