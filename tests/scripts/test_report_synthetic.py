"""scripts/report on hand-made run records with known values (tests/scripts/synth.py): each kind of
table carries the rows and derived values it should, missing kinds are skipped, malformed files
are errors naming the file, and the plots are real PNGs. The communication benchmarks' sections:
test_report_synthetic_comm.py."""
import math
import os

import h5py
import numpy as np
import pytest

import synth
from synth import BANDWIDTH, CALL_COST
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


def test_missing_kinds_are_skipped(tmp_path, out_dir):
    path = tmp_path / "ar.h5"
    synth.write_record(path, "bench allreduce", {"allreduce": synth.allreduce_rows("mpi", 2, [4096])}, world_size=2)
    proc = run_report([path], out_dir, "--plots")
    assert sorted(os.listdir(out_dir / "csv")) == ["allreduce.csv", "allreduce_busbw.csv"]
    assert sorted(os.listdir(out_dir / "plots")) == ["allreduce_bandwidth.png"]
    assert "Model timings" not in open(out_dir / "report.md").read()
    assert proc.stderr == ""


# ---- bench ddp and the overhead model ------------------------------------------------------



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


def test_update_sms_runs_stay_apart(tmp_path, out_dir):
    """Two `bench model` records of one configuration, `--update-sms 0` and `24` (the A/B of
    `dev/experiments/ab.sh ab-update-sms`), are two rows of the timings with an `update_sms` column."""
    paths = []
    for sms, ms in ((0, 64.0), (24, 62.0)):
        paths.append(tmp_path / f"sms{sms}.h5")
        synth.model_file(paths[-1], [dict(synth.model_row(step_ms=ms), update_sms=sms)])
    run_report(paths, out_dir)
    timings = read_csv(out_dir, "model_timings").set_index("update_sms")
    assert timings.loc[0, "step_ms_mean"] == pytest.approx(64.0)
    assert timings.loc[24, "step_ms_mean"] == pytest.approx(62.0)


def test_training_summary(tmp_path, out_dir):
    a, b = tmp_path / "run_a.h5", tmp_path / "run_b.h5"
    synth.train_file(a, steps=20, first_loss=9.0, final_loss=4.0, val_losses={10: 6.5, 20: 4.5})
    synth.train_file(b, steps=10, first_loss=9.0, final_loss=6.0)
    run_report([a, b], out_dir, "--plots")
    df = read_csv(out_dir, "training").set_index("file")
    assert df.loc["run_a.h5", "steps"] == 20 and df.loc["run_b.h5", "steps"] == 10
    assert df.loc["run_a.h5", "final_loss"] == pytest.approx(4.0)
    assert df.loc["run_a.h5", "min_loss"] == pytest.approx(4.0)
    assert df.loc["run_a.h5", "step_ms"] == pytest.approx(100.0)  # the first (slow) step left out
    assert df.loc["run_a.h5", "final_val_loss"] == pytest.approx(4.5)  # /eval's last row
    assert np.isnan(df.loc["run_b.h5", "final_val_loss"])  # a run without validation
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
