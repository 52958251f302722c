# XL's FFN GEMMs (N 2048, C 1600, F 6400, bf16) apart and stacked, timed with PyTorch's GEMMs on
# the GPU: the measurement behind BatchedLinear (docs/reports/2026-11-25_grad-first-write_h100.md). Run on a GPU
# machine with the image's python3: `python3 dev/probe_ffn_gemms.py`. Not part of the tests.
import torch
from probe_timing import time_ms  # dev/probe_timing.py

N, C, F = 2048, 1600, 6400
dev = "cuda"


def r(*s):
    return torch.randn(*s, device=dev, dtype=torch.bfloat16)


def row(name, fn, flops):
    ms = time_ms(fn)
    print(f"{name:48s} {ms * 1e3:9.1f} us {flops / ms / 1e9:7.1f} TFLOP/s", flush=True)
    return ms


x, W1, W3 = r(N, C), r(F, C), r(F, C)
W13 = torch.cat([W1, W3])
dh1, dh3 = r(N, F), r(N, F)
dh13 = torch.cat([dh1, dh3], 1)
f1 = 2 * N * C * F
for rnd in range(2):
    print("round", rnd)
    a = row("fwd w1,w3 apart: 2 x (N,C)(C,F)", lambda: (x @ W1.t(), x @ W3.t()), 2 * f1)
    b = row("fwd w1,w3 stacked: (N,C)(C,2F)", lambda: x @ W13.t(), 2 * f1)
    c = row("bwd dW1,dW3 apart: 2 x (F,N)(N,C)", lambda: (dh1.t() @ x, dh3.t() @ x), 2 * f1)
    d = row("bwd dW13 stacked: (2F,N)(N,C)", lambda: dh13.t() @ x, 2 * f1)
    e = row("bwd dx apart: (N,F)(F,C) + (N,F)(F,C)", lambda: (dh1 @ W1, dh3 @ W3), 2 * f1)
    f = row("bwd dx stacked: (N,2F)(2F,C)", lambda: dh13 @ W13, 2 * f1)
    print(f"stacked/apart: fwd {b / a:.3f} dW {d / c:.3f} dx {f / e:.3f}")
