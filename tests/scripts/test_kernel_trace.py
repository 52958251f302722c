"""dev/kernel_trace's summaries on a hand-made trace in kernel_trace.cpp's CSV layout: families.py
(each kernel's exclusive time on its stream, so a chained kernel's wait inside the kernel ahead is
not counted twice; the phases around the loss and the update; the memory-bound sum), gaps.py
(wall, busy and idle time a step) and compare.py (two traces' families and kernels side by side,
a kernel only one of them ran included); too few steps refused with one line and exit 1."""
import csv
import os
import subprocess
import sys

from conftest import REPO

TRACE_DIR = os.path.join(REPO, "dev", "kernel_trace")

# One step (us from its start; stream 1 main, 2 side): embedding, RMSNorm, a GEMM, RoPE chained
# 3 us early into the GEMM's tail, the loss; backward: SwiGLU's backward, RMSNorm's backward
# chained 4 us early, the clip norm on the side stream; then the update.
STEP = [
    (0, 2, 1, "gather_rows_kernel<uint4, float>"),
    (3, 9, 1, "rmsnorm_forward_rows_kernel<bf16, 8>"),
    (10, 60, 1, "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"),
    (57, 70, 1, "rope_packed_kernel<bf16>"),
    (71, 74, 1, "cross_entropy_kernel<bf16>"),
    (75, 125, 1, "swiglu_backward_kernel<bf16, bf16>"),
    (121, 141, 1, "rmsnorm_backward_rows_kernel<bf16, 7>"),
    (130, 150, 2, "squared_norm_kernel<float, bf16>"),
    (160, 260, 1, "adamw_kernel<bf16>"),
]
PERIOD = 300  # us between steps: 40 us idle at the end of each


def write_trace(path, steps, step=STEP):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["start_ns", "end_ns", "stream", "name"])
        for k in range(steps):
            for s, e, stream, name in step:
                w.writerow([(k * PERIOD + s) * 1000, (k * PERIOD + e) * 1000, stream, name])
    return path


def run(tool, *args):
    return subprocess.run([sys.executable, os.path.join(TRACE_DIR, tool), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def table(stdout):
    """families.py's phase | family | stream rows: (phase, family, stream) → (kernels, exclusive ms)."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 6 and cells[2] in ("main", "side"):
            rows[(cells[0], cells[1], cells[2])] = (int(cells[3]), float(cells[4]))
    return rows


def test_families_exclusive_time_and_phases(tmp_path):
    r = run("families.py", write_trace(tmp_path / "t.csv", 5), "--steps", "4")
    assert r.returncode == 0, r.stderr
    t = table(r.stdout)
    assert t[("forward", "elementwise", "main")] == (2, 0.012)  # gather 2 us + RoPE 10 of its 13
    assert t[("forward", "matmul", "main")] == (1, 0.050)
    assert t[("forward", "normalization", "main")] == (1, 0.006)
    assert t[("forward", "loss", "main")] == (1, 0.003)
    assert t[("backward", "elementwise", "main")] == (1, 0.050)
    assert t[("backward", "normalization", "main")] == (1, 0.016)  # 20 us from its start, 16 after SwiGLU's end
    assert t[("backward", "optimizer", "side")] == (1, 0.020)  # the clip norm beside backward
    assert t[("optimizer", "optimizer", "main")] == (1, 0.100)
    assert "= 0.084 ms a step" in r.stdout  # 0.006 + 0.012 + 0.016 + 0.050
    assert "wall 0.300 ms a step" in r.stdout


def test_gaps_wall_busy_idle(tmp_path):
    r = run("gaps.py", write_trace(tmp_path / "t.csv", 5), "--steps", "4")
    assert r.returncode == 0, r.stderr
    # Busy: 0-2, 3-9, 10-70, 71-74, 75-150, 160-260 = 2 + 6 + 60 + 3 + 75 + 100 = 246 us of 300.
    assert "| 0.300 | 0.246 | 0.054 | 8" in r.stdout
    # Main-stream idle by cause: 40 us before each step's first kernel; the side kernel ends 10 us
    # before the update starts (not a wait); otherwise four gaps of 1 us and the 19 us before it.
    assert "before the step's first kernel | 1 | 0.040" in r.stdout
    assert "ended by another stream's kernel (a wait) | 0 | 0.000" in r.stdout
    assert "other gaps | 5 | 0.023" in r.stdout


# The same step with the side stream's kernel ending 2 us before the update starts on the main
# stream: that gap (19 us) is a wait on the side stream.
STEP_WAIT = [(130, 158, 2, name) if stream == 2 else (s, e, stream, name) for s, e, stream, name in STEP]


def test_gaps_waits_on_another_stream(tmp_path):
    r = run("gaps.py", write_trace(tmp_path / "t.csv", 5, STEP_WAIT), "--steps", "4")
    assert r.returncode == 0, r.stderr
    assert "ended by another stream's kernel (a wait) | 1 | 0.019" in r.stdout
    assert "other gaps | 4 | 0.004" in r.stdout


# The same step with another GEMM kernel (as autotune may pick in another run) that ends 10 us
# sooner, so RoPE (started at 57 us) no longer waits in its tail: 13 us of its own instead of 10.
OTHER_GEMM = "nvjet_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
STEP_B = [(10, 50, 1, OTHER_GEMM) if name.startswith("nvjet") else (s, e, st, name) for s, e, st, name in STEP]


def test_compare_families_and_kernels(tmp_path):
    a, b = write_trace(tmp_path / "a.csv", 5), write_trace(tmp_path / "b.csv", 5, STEP_B)
    r = run("compare.py", a, b, "--steps", "4", "--top", "3")
    assert r.returncode == 0, r.stderr
    assert "wall ms a step: A 0.300, B 0.300, B − A +0.000" in r.stdout
    assert "forward | matmul | 0.050 | 0.040 | -0.010" in r.stdout
    assert "forward | elementwise | 0.012 | 0.015 | +0.003" in r.stdout
    assert "backward | elementwise | 0.050 | 0.050 | +0.000" in r.stdout
    kernels = r.stdout.split("top 3\n")[1].splitlines()[1:]
    assert kernels == [
        "forward | 1 | 50.00 | 0 | - | -0.050 | nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT",
        f"forward | 0 | - | 1 | 40.00 | +0.040 | {OTHER_GEMM}",
        "forward | 1 | 10.00 | 1 | 13.00 | +0.003 | rope_packed_kernel<bf16>",
    ]


def test_too_few_steps_refused(tmp_path):
    for tool in ("families.py", "gaps.py", "compare.py"):
        t = write_trace(tmp_path / "t.csv", 2)
        r = run(tool, t, *([t] if tool == "compare.py" else []), "--steps", "4")
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr.strip() == f"{tool}: 2 launches of gather_rows_kernel: need --steps + 1 = 5"
