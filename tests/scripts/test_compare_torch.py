"""compare_torch.py where PyTorch is absent: its row arithmetic (tokens/s, TFLOP/s, MFU) and the
shared model counts agree with independent hand computations (its command line:
test_compare_torch_cli.py)."""
import math
import sys

import pytest

from conftest import SCRIPTS


def test_parameter_count_of_the_small_model():
    from paratrain_report.model_sizes import num_params
    # d 768, d_ff 3072, 12 layers, vocab 10000, by hand: per layer 4·768² + 3·768·3072 + 2·768
    per_layer = 4 * 768 * 768 + 3 * 768 * 3072 + 2 * 768
    assert per_layer == 9_438_720
    assert num_params(10000, 768, 12, 3072) == 12 * per_layer + 2 * 10000 * 768 + 768 == 128_625_408


def test_row_arithmetic():
    sys.path.insert(0, SCRIPTS)
    import compare_torch as ct
    args = ct.parse_args(["--model", "xl", "--out", "/nonexistent/x.h5"])
    measured = {"forward_ms_mean": 50.0, "forward_ms_sd": 1.0, "backward_ms_mean": 100.0, "backward_ms_sd": 1.0,
                "optimizer_ms_mean": 16.0, "optimizer_ms_sd": 0.5, "step_ms_mean": 166.0, "step_ms_sd": 2.0,
                "first_step_ms": 900.0, "peak_memory_bytes": 40 << 30}
    # xl: d 1600, d_ff 6400, 48 layers; GEMM parameters exclude the embedding table
    n_gemm = 48 * (4 * 1600 ** 2 + 3 * 1600 * 6400 + 2 * 1600) + 1600 + 10000 * 1600
    flops = (6 * n_gemm + 12 * 48 * 512 * 1600) * 4 * 512
    measured["flops_per_step"] = flops
    from paratrain_report.model_sizes import dense_peak_flops
    peak = dense_peak_flops("NVIDIA H200", "bf16")
    assert peak == pytest.approx(989.4e12)
    row = ct.make_row("xl", 512, "bf16", "eager", args, measured, peak, "ok")
    assert row["tokens_per_s"] == pytest.approx(4 * 512 / 0.166)
    assert row["tflops"] == pytest.approx(flops / 0.166 / 1e12)
    assert row["mfu"] == pytest.approx(flops / 0.166 / 989.4e12)
    assert list(row) == ct.ROW_FIELDS
    oom = ct.make_row("xl", 512, "bf16", "compile", args, {}, peak, "oom")
    assert oom["status"] == "oom" and math.isnan(oom["step_ms_mean"]) and math.isnan(oom["mfu"])
    assert oom["peak_memory_bytes"] == 0


def test_peaks_come_from_the_accelerator_table_paratrain_compiles_in():
    """The same rows and matching as core/accelerator_specs.cpp (tests/cpu/test_kernel_choice.cpp
    checks the C++ side on the same names): no GPU of the table is left at MFU NaN."""
    from paratrain_report.model_sizes import accelerators, dense_peak_flops
    presets = [r["preset"] for r in accelerators()]
    assert {"a100-sxm", "a100-pcie", "l40s", "h100-sxm", "h100-pcie", "h200", "b200", "gb200"} <= set(presets)
    cases = {"NVIDIA H100 80GB HBM3": 989.4, "NVIDIA H100 PCIe": 756, "NVIDIA A100-SXM4-40GB": 312,
             "NVIDIA A100 80GB PCIe": 312, "NVIDIA L40S": 362, "NVIDIA B200": 2250, "NVIDIA GB200": 2500,
             "NVIDIA H200": 989.4}
    for name, tflops in cases.items():
        assert dense_peak_flops(name, "bf16") == pytest.approx(tflops * 1e12), name
    assert dense_peak_flops("NVIDIA L40S", "fp32") == pytest.approx(91.6e12)
    for name, tflops in {"NVIDIA H100 80GB HBM3": 1978.9, "NVIDIA H200": 1978.9, "NVIDIA A100-SXM4-40GB": 0}.items():
        assert dense_peak_flops(name, "fp8") == pytest.approx(tflops * 1e12), name
    assert dense_peak_flops("NVIDIA GeForce RTX 4090", "bf16") == 0.0

