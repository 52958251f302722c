"""compare_torch_ddp.py where PyTorch is absent: its rows and overheads are right, and its HDF5
writer makes a run record in the schema's types (strings fixed-length UTF-8, not numpy unicode, which h5py
cannot store) that scripts/report reads into its paratrain-vs-PyTorch DDP table (its command
line: test_compare_torch_cli.py)."""
import math
import sys
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

import synth
from conftest import SCRIPTS, read_csv, run_report

sys.path.insert(0, SCRIPTS)
import compare_torch_ddp as ctd  # noqa: E402


def synthetic_rows():
    """Two precisions, every strategy, step times chosen by hand."""
    args = SimpleNamespace(bucket_mb=25.0, batch=4, context=512, grad_accum=3)
    times = {("fp32", "none"): 680.0, ("fp32", "naive"): 714.0, ("fp32", "ddp"): 715.0,
             ("fp32", "ddp_bf16"): 702.0, ("fp32", "zero"): 740.0,
             ("bf16", "none"): 166.0, ("bf16", "naive"): 202.0, ("bf16", "ddp"): 192.0,
             ("bf16", "ddp_bf16"): 181.0, ("bf16", "zero"): 219.0}
    # The slowest rank: 3 ms behind the mean on the floor (GPUs that differ), 1 ms in a synchronised row.
    rows = [ctd.make_row(s, p, args, 2, ms, 1.5, ms + (3.0 if s == "none" else 1.0), 40e9 if s != "zero" else 30e9)
            for (p, s), ms in times.items()]
    return ctd.add_overheads(rows), times


def test_rows_and_overheads():
    rows, times = synthetic_rows()
    for r in rows:
        assert list(r) == ctd.ROW_FIELDS
        floor = times[(r["precision"], "none")] + 3.0
        assert r["overhead_pct"] == pytest.approx((r["step_ms_max_rank"] / floor - 1) * 100)
        assert r["tokens_per_s"] == pytest.approx(2 * 4 * 512 * 3 / (r["step_ms_max_rank"] * 1e-3))
        assert r["grad_accum"] == 3
        assert r["peak_MB"] == pytest.approx(40e3 if r["ddp"] != "zero" else 30e3)
        if r["ddp"] in ("ddp", "ddp_bf16", "zero"):
            assert r["bucket_mb"] == 25.0
        else:
            assert math.isnan(r["bucket_mb"])
        assert r["shard"] == ("zero" if r["ddp"] == "zero" else "none")
        assert r["grad_comm"] == ("bf16" if r["ddp"] == "ddp_bf16" else "fp32")
    no_floor = ctd.add_overheads([r for r in rows if r["ddp"] != "none"])
    assert all(math.isnan(r["overhead_pct"]) for r in no_floor)


def test_writer_uses_the_schema_types(tmp_path):
    rows, _ = synthetic_rows()
    rows[0]["precision"] = np.str_("fp32")  # numpy unicode scalars are what broke the old writer
    path = tmp_path / "torch_ddp.h5"
    attrs = {"subcommand": "compare_torch_ddp", "world_size": 2, "gpus": ["NVIDIA H100 80GB HBM3"] * 2,
             "hosts": ["node0", "node0"], "option.model": "xl"}
    ctd.write_results(str(path), rows, attrs)
    with h5py.File(path, "r") as f:
        t = f["ddp_torch"]
        assert list(t.dtype.names) == ctd.ROW_FIELDS
        for c in ("ddp", "shard", "grad_comm", "precision"):
            assert t.dtype[c].kind == "S", (c, t.dtype[c])
        assert t.dtype["ranks"] == np.dtype("<i8") and t.dtype["step_ms"] == np.dtype("<f8")
        data = t[()]
        assert [d.decode() for d in data["ddp"]] == [r["ddp"] for r in rows]
        assert np.allclose(data["step_ms"], [r["step_ms"] for r in rows])
        assert f.attrs["world_size"] == 2 and f.attrs["schema_version"] == 1
    with pytest.raises(Exception, match="exists"):
        ctd.write_results(str(path), rows, attrs)
    ctd.write_results(str(path), rows, attrs, overwrite=True)


def test_the_bf16_hook_variant_is_a_strategy(tmp_path):
    assert ctd.parse_args(["--strategies", "ddp,ddp_bf16", "--out", str(tmp_path / "x.h5")]).strategies == \
        ["ddp", "ddp_bf16"]


def test_report_sets_torch_rows_beside_ours(tmp_path, out_dir):
    ours = tmp_path / "ddp.h5"
    synth.ddp_file(ours, w_Bps=50e9, o_s=1e-4, buckets_mb=(1, 25, 100), shards=True, grad_comm=("fp32", "bf16"))
    rows, _ = synthetic_rows()
    theirs = tmp_path / "torch_ddp.h5"
    ctd.write_results(str(theirs), rows, {"subcommand": "compare_torch_ddp", "world_size": 2,
                                          "gpus": [synth.GPU] * 2, "hosts": ["node0"] * 2})
    run_report([ours, theirs], out_dir)
    df = read_csv(out_dir, "ddp_torch")
    assert len(df) == len(rows)
    with h5py.File(ours, "r") as f:
        t = f["ddp"][()]
    plain = t[t["shard"] == b"none"]
    ours_none = plain[plain["ddp"] == b"none"]["step_ms"][0]
    bucketed_25 = (plain["ddp"] == b"bucketed") & (plain["bucket_mb"] == 25.0)
    ours_25 = plain[bucketed_25 & (plain["grad_comm"] == b"fp32")]["step_ms"][0]
    ours_25_bf16 = plain[bucketed_25 & (plain["grad_comm"] == b"bf16")]["step_ms"][0]
    assert ours_25_bf16 < ours_25
    fp32 = df[df["precision"] == "fp32"].set_index("torch")
    assert fp32.loc["none", "ratio"] == pytest.approx(ours_none / 680.0)
    assert fp32.loc["ddp", "paratrain"] == "bucketed 25 MiB"
    assert fp32.loc["ddp", "ratio"] == pytest.approx(ours_25 / 715.0)
    # the bf16 hook beside paratrain's --grad-comm bf16 at the same cap
    assert fp32.loc["ddp_bf16", "grad_comm"] == "bf16"
    assert fp32.loc["ddp_bf16", "paratrain"] == "bucketed 25 MiB, bf16 gradients"
    assert fp32.loc["ddp_bf16", "ratio"] == pytest.approx(ours_25_bf16 / 702.0)
    assert fp32.loc["zero", "paratrain"] == "zero1"
    zero1_fp32 = t[(t["shard"] == b"zero1") & (t["grad_comm"] == b"fp32")]["step_ms"][0]
    assert fp32.loc["zero", "paratrain_step_ms"] == pytest.approx(zero1_fp32)
    # synth writes fp32 only: bf16 torch rows have no paratrain partner, shown as NaN
    assert df[df["precision"] == "bf16"]["paratrain_step_ms"].isna().all()
    assert "paratrain versus PyTorch" in (out_dir / "report.md").read_text()
