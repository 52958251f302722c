"""train's progress line shows what people watch (issue 48): model FLOPs utilisation and memory.
MFU is checked against the model's FLOPs computed here from the model's shape (6 per GEMM
parameter per token plus the attention products, bench model's count), the record's step time
and the peak given (--peak-tflops: the CPU has none), per device on 2 ranks; memory against the
bytes AdamW must hold at least (weights, gradients, two moments)."""
import json
import os
import subprocess

import h5py
import pytest

from conftest import MPIEXEC

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SAMPLE = os.path.join(REPO, "data", "sample_tokens.npy")
BIN = os.environ.get("PARATRAIN_BIN", os.path.join(REPO, "build", "paratrain"))
TIMEOUT_S = 120
D, L, H, FF, V, T, B, ACCUM = 32, 2, 2, 64, 10000, 16, 4, 2
MODEL = ["--model", "tiny", "--d-model", str(D), "--num-layers", str(L), "--num-heads", str(H), "--d-ff", str(FF),
         "--vocab-size", str(V), "--context-length", str(T), "--batch-size", str(B), "--grad-accum", str(ACCUM),
         "--device", "cpu", "--data", SAMPLE]

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"no paratrain binary at {BIN}")


def train(tmp_path, ranks, *extra):
    rec = str(tmp_path / f"r{ranks}_{len(list(tmp_path.iterdir()))}.h5")
    cmd = ([MPIEXEC, "-np", str(ranks)] if ranks > 1 else []) + [BIN, "train", *MODEL, "--steps", "3", "--out", rec,
                                                                 *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(rec, "r") as f:
        return proc.stdout, f["train_steps"][()], int(f.attrs["model.parameters"])


@pytest.mark.parametrize("ranks", [1, 2])
def test_mfu_is_the_model_flops_over_step_time_and_peak_per_device(tmp_path, ranks):
    peak_tflops = 0.05
    out, rows, params = train(tmp_path, ranks, "--log-format", "jsonl", "--peak-tflops", str(peak_tflops))
    events = [json.loads(line) for line in out.splitlines()]
    steps = [e for e in events if e["event"] == "step"]
    assert len(steps) == 3 and events[0]["peak_tflops"] == peak_tflops
    flops_per_token = 6 * (params - V * D) + 12 * L * T * D
    flops_per_step = flops_per_token * B * ACCUM * T
    assert events[0]["flops_per_step"] == flops_per_step
    for e, row in zip(steps, rows):
        assert e["step_ms"] == row["step_ms"]
        want = flops_per_step / ranks / (row["step_ms"] * 1e-3) / (peak_tflops * 1e12)
        assert e["mfu"] == pytest.approx(want, rel=1e-12)
        assert e["tokens_per_s"] == pytest.approx(B * ACCUM * T / (row["step_ms"] * 1e-3), rel=1e-12)


def test_memory_is_at_least_what_adamw_holds_and_the_cpu_has_no_mfu(tmp_path):
    out, _, params = train(tmp_path, 1, "--log-format", "jsonl")
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0]["peak_tflops"] is None
    for e in (e for e in events if e["event"] == "step"):
        assert e["mfu"] is None
        # fp32 weights, gradients and AdamW's two moments: 16 bytes a parameter, at least.
        assert e["memory_peak_bytes"] >= e["memory_bytes"] >= 16 * params
    text, _, _ = train(tmp_path, 1)
    lines = [line for line in text.splitlines() if line.startswith("step ")]
    assert len(lines) == 3 and all(" | mem " in line and "MiB" in line and "MFU" not in line for line in lines)
    text, _, _ = train(tmp_path, 1, "--peak-tflops", "0.05")
    assert all(" | MFU " in line for line in text.splitlines() if line.startswith("step "))
