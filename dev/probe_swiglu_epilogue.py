# Would SwiGLU as a GEMM epilogue pay at XL's shapes? The measurement to take before building one
# (issue 16: the largest memory-bound kernels left were SwiGLU's, 2.5 ms backward
# and 1.25 ms forward on an H100, both near the copy rate, so only fewer passes can gain).
# N 2048 tokens, C 1600, F 6400, bf16, fp32 accumulation, one layer's calls timed with CUDA events
# (x 48 for the XL step):
#   forward   cuBLAS x·[W1;W3]ᵀ then one SwiGLU pass (h1, h3 → g), as paratrain runs it, against a
#             Triton GEMM keeping both accumulators of a tile and writing h1, h3 and g (the pass's
#             52 MB of h1, h3 reads gone; g's 26 MB write moves into the epilogue)
#   backward  cuBLAS dg = dy·W2 then one pass (dg, h1, h3 → dh1, dh3, g), against a Triton GEMM whose
#             epilogue reads h1 and h3 and writes dh1, dh3 and g (dg's 26 MB write and read gone)
# Each fused form is also timed without its epilogue work (the plain Triton GEMM of that shape),
# so the two questions stay apart: does the epilogue cost little, and does Triton's GEMM match
# cuBLAS's here. The outputs are checked against PyTorch before anything is timed.
# Run on a GPU machine with the image's python3: `python3 dev/probe_swiglu_epilogue.py`.
# Not part of the tests. Its results: docs/reports/2026-11-25_swiglu-epilogue-fp32-sizes_h100.md.
import torch
import triton
import triton.language as tl
from probe_timing import time_ms  # dev/probe_timing.py

dev = "cuda"
N, C, F = 2048, 1600, 6400
LAYERS = 48

CONFIGS = [
    triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 64, "BK": 64}, num_stages=4, num_warps=4),
    triton.Config({"BM": 64, "BN": 128, "BK": 64}, num_stages=4, num_warps=4),
    triton.Config({"BM": 128, "BN": 256, "BK": 64}, num_stages=3, num_warps=8),
]


@triton.jit
def _silu_parts(h1):
    s = 1.0 / (1.0 + tl.exp(-h1))
    return s, h1 * s


# out[m, n] = Σ_k a[m, k] · b[n, k] (both row-major, b read transposed), with optional epilogues:
#   SWIGLU_FWD: a second weight b3 gives h3 beside h1 = the plain product; writes h1, h3, g
#   SWIGLU_BWD: the product is dg; reads h1, h3 at the tile, writes dh1, dh3 and g
@triton.autotune(configs=CONFIGS, key=["M", "Nn", "K", "MODE", "B_KN"])
@triton.jit
def gemm_kernel(a_ptr, b_ptr, b3_ptr, out_ptr, out3_ptr, g_ptr, h1_ptr, h3_ptr, M, Nn, K,
                sbk, MODE: tl.constexpr, B_KN: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr):
    # MODE 0: plain; 1: SwiGLU forward (two accumulators); 2: SwiGLU backward epilogue.
    # b is (Nn, K) row-major (a weight read transposed: x·Wᵀ), or with B_KN (K, Nn) row-major (dy·W2
    # with W2 (C, F)); sbk is its row stride.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    acc3 = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        if B_KN:
            b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < Nn),
                        other=0.0)
        else:
            b = tl.load(b_ptr + rn[None, :] * sbk + kk[:, None], mask=(kk[:, None] < K) & (rn[None, :] < Nn),
                        other=0.0)
        acc += tl.dot(a, b)
        if MODE == 1:
            b3 = tl.load(b3_ptr + rn[None, :] * sbk + kk[:, None], mask=(kk[:, None] < K) & (rn[None, :] < Nn),
                         other=0.0)
            acc3 += tl.dot(a, b3)
    mask = (rm[:, None] < M) & (rn[None, :] < Nn)
    at = rm[:, None] * Nn + rn[None, :]
    if MODE == 0:
        tl.store(out_ptr + at, acc.to(tl.bfloat16), mask=mask)
    elif MODE == 1:
        h1 = acc.to(tl.bfloat16).to(tl.float32)  # g from the stored (rounded) h1, h3, as the pass
        h3 = acc3.to(tl.bfloat16).to(tl.float32)
        _, silu = _silu_parts(h1)
        tl.store(out_ptr + at, acc.to(tl.bfloat16), mask=mask)
        tl.store(out3_ptr + at, acc3.to(tl.bfloat16), mask=mask)
        tl.store(g_ptr + at, (silu * h3).to(tl.bfloat16), mask=mask)
    else:
        dg = acc.to(tl.bfloat16).to(tl.float32)
        h1 = tl.load(h1_ptr + at, mask=mask, other=0.0).to(tl.float32)
        h3 = tl.load(h3_ptr + at, mask=mask, other=0.0).to(tl.float32)
        s, silu = _silu_parts(h1)
        tl.store(out_ptr + at, (dg * h3 * (s + h1 * s * (1.0 - s))).to(tl.bfloat16), mask=mask)  # dh1
        tl.store(out3_ptr + at, (dg * silu).to(tl.bfloat16), mask=mask)  # dh3
        tl.store(g_ptr + at, (silu * h3).to(tl.bfloat16), mask=mask)  # g again, for W2's gradient


# The passes paratrain runs beside cuBLAS (one kernel each, as cuda/elementwise.cu's).
@triton.jit
def swiglu_fwd_pass(h1_ptr, h3_ptr, g_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    h1 = tl.load(h1_ptr + offs, mask=m).to(tl.float32)
    h3 = tl.load(h3_ptr + offs, mask=m).to(tl.float32)
    _, silu = _silu_parts(h1)
    tl.store(g_ptr + offs, (silu * h3).to(tl.bfloat16), mask=m)


@triton.jit
def swiglu_bwd_pass(dg_ptr, h1_ptr, h3_ptr, dh1_ptr, dh3_ptr, g_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    dg = tl.load(dg_ptr + offs, mask=m).to(tl.float32)
    h1 = tl.load(h1_ptr + offs, mask=m).to(tl.float32)
    h3 = tl.load(h3_ptr + offs, mask=m).to(tl.float32)
    s, silu = _silu_parts(h1)
    tl.store(dh1_ptr + offs, (dg * h3 * (s + h1 * s * (1.0 - s))).to(tl.bfloat16), mask=m)
    tl.store(dh3_ptr + offs, (dg * silu).to(tl.bfloat16), mask=m)
    tl.store(g_ptr + offs, (silu * h3).to(tl.bfloat16), mask=m)


def r(*s):
    return torch.randn(*s, device=dev, dtype=torch.bfloat16) * 0.5


def grid(M, Nn):
    return lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(Nn, meta["BN"]))


def check(name, got, want):
    err = ((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-6)).item()
    print(f"  check {name:10s} max|err|/max|ref| {err:.2e}", flush=True)
    assert err < 3e-2, f"{name}: the probe's kernel disagrees with PyTorch"


x, W2, dy = r(N, C), r(C, F) * 0.05, r(N, C)
# As paratrain's BatchedLinear: W1 and W3 one (2, F, C) tensor, h1 and h3 one (2, N, F) buffer.
W13 = r(2, F, C) * 0.05
W1, W3 = W13[0], W13[1]
x2 = x.unsqueeze(0).expand(2, N, C).contiguous()  # bmm's operand, copied once here (not per call)
h13 = torch.empty(2, N, F, device=dev, dtype=torch.bfloat16)
h1, h3 = h13[0], h13[1]
g, dg, dh1, dh3 = (torch.empty(N, F, device=dev, dtype=torch.bfloat16) for _ in range(4))
NF, BLOCK = N * F, 1024


def fwd_cublas():
    torch.matmul(x2, W13.transpose(1, 2), out=h13)
    swiglu_fwd_pass[(triton.cdiv(NF, BLOCK),)](h1, h3, g, NF, BLOCK=BLOCK)


def fwd_cublas_gemm_only():
    torch.matmul(x2, W13.transpose(1, 2), out=h13)


def fwd_pass_only():
    swiglu_fwd_pass[(triton.cdiv(NF, BLOCK),)](h1, h3, g, NF, BLOCK=BLOCK)


def fwd_fused():
    gemm_kernel[grid(N, F)](x, W1, W3, h1, h3, g, h1, h3, N, F, C, C, MODE=1, B_KN=False)


def fwd_triton_plain():  # the same two products without the epilogue (two plain GEMMs)
    gemm_kernel[grid(N, F)](x, W1, W1, h1, h1, h1, h1, h1, N, F, C, C, MODE=0, B_KN=False)
    gemm_kernel[grid(N, F)](x, W3, W3, h3, h3, h3, h3, h3, N, F, C, C, MODE=0, B_KN=False)


def bwd_cublas():
    torch.matmul(dy, W2, out=dg)
    swiglu_bwd_pass[(triton.cdiv(NF, BLOCK),)](dg, h1, h3, dh1, dh3, g, NF, BLOCK=BLOCK)


def bwd_cublas_gemm_only():
    torch.matmul(dy, W2, out=dg)


def bwd_pass_only():
    swiglu_bwd_pass[(triton.cdiv(NF, BLOCK),)](dg, h1, h3, dh1, dh3, g, NF, BLOCK=BLOCK)


def bwd_fused():
    gemm_kernel[grid(N, F)](dy, W2, W2, dh1, dh3, g, h1, h3, N, F, C, F, MODE=2, B_KN=True)


def bwd_triton_plain():  # dg alone, no epilogue
    gemm_kernel[grid(N, F)](dy, W2, W2, dg, dg, dg, dg, dg, N, F, C, F, MODE=0, B_KN=True)


def main():
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__, flush=True)
    # Correctness first: the fused kernels against PyTorch.
    ref_h1, ref_h3 = (x @ W1.t()), (x @ W3.t())
    ref_g = (torch.nn.functional.silu(ref_h1.float()) * ref_h3.float()).bfloat16()
    fwd_fused()
    torch.cuda.synchronize()
    check("h1", h1, ref_h1)
    check("h3", h3, ref_h3)
    check("g", g, ref_g)
    ref_dg = (dy @ W2).float()
    s = torch.sigmoid(h1.float())
    bwd_fused()
    torch.cuda.synchronize()
    check("dh1", dh1, (ref_dg * h3.float() * (s + h1.float() * s * (1 - s))).bfloat16())
    check("dh3", dh3, (ref_dg * h1.float() * s).bfloat16())
    flops = 2 * N * C * F
    for rnd in range(2):
        print("round", rnd, "(us per layer; XL step = 48 layers)", flush=True)
        rows = [
            ("fwd cuBLAS [W1;W3] + SwiGLU pass", fwd_cublas, 2 * flops),
            ("fwd cuBLAS [W1;W3] alone", fwd_cublas_gemm_only, 2 * flops),
            ("fwd SwiGLU pass alone (h1, h3 -> g)", fwd_pass_only, 0),
            ("fwd Triton, SwiGLU epilogue (h1, h3, g)", fwd_fused, 2 * flops),
            ("fwd Triton, two plain GEMMs", fwd_triton_plain, 2 * flops),
            ("bwd cuBLAS dy.W2 + SwiGLU backward pass", bwd_cublas, flops),
            ("bwd cuBLAS dy.W2 alone", bwd_cublas_gemm_only, flops),
            ("bwd SwiGLU backward pass alone", bwd_pass_only, 0),
            ("bwd Triton, SwiGLU-backward epilogue", bwd_fused, flops),
            ("bwd Triton, plain dy.W2", bwd_triton_plain, flops),
        ]
        t = {}
        for name, fn, fl in rows:
            ms = time_ms(fn)
            t[name] = ms
            rate = f"{fl / ms / 1e9:7.1f} TFLOP/s" if fl else ""
            print(f"  {name:44s} {ms * 1e3:8.1f} us {rate}", flush=True)
        fwd_gain = (t[rows[0][0]] - t[rows[3][0]]) * LAYERS
        bwd_gain = (t[rows[5][0]] - t[rows[8][0]]) * LAYERS
        print(f"  XL step, fused against cuBLAS + pass: forward {fwd_gain:+.2f} ms, backward {bwd_gain:+.2f} ms "
              f"(positive: the fused form is faster)", flush=True)


if __name__ == "__main__":
    main()
