# Does an AdamW update overlapped with the next step's forward shorten the step? A probe with
# PyTorch's GEMMs and SDPA and a Triton AdamW at XL's shapes (N 2048 tokens, C 1600, F 6400,
# 48 layers of 41 M parameters, bf16 compute, fp32 master weights/moments, bf16 gradients and
# mirror), timed with CUDA events:
#   fwd      the forward-like sequence alone (per layer: QKV, causal SDPA, proj, w1|w3, SiLU·mul,
#            w2, two adds; the memory-bound work of the real step is only partly here)
#   opt      48 AdamW launches, one per layer (28 bytes a parameter)
#   serial   opt then fwd, one stream
#   overlap  opt on a side stream, layer i's update recorded as an event the forward's layer i
#            waits for (the design: the update of step k runs under step k+1's forward)
# with the side stream at the default priority, at low priority, and the AdamW grid capped.
# Run on a GPU machine with the image's python3: `python3 dev/probe_optimizer_overlap.py`.
# Not part of the tests.
import statistics

import torch
import torch.nn.functional as Fn
import triton
import triton.language as tl

dev = "cuda"
B, T, C, F, L, H = 4, 512, 1600, 6400, 48, 25
N = B * T
P_LAYER = 4 * C * C + 3 * C * F


@triton.jit
def adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, lowp_ptr, n, lr, b1, b2, eps, wd, bc1, bc2,
                 BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for it in range(ITERS):
        offs = (pid + it * nprog).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(p_ptr + offs, mask=mask)
        g = tl.load(g_ptr + offs, mask=mask).to(tl.float32)
        m = tl.load(m_ptr + offs, mask=mask)
        v = tl.load(v_ptr + offs, mask=mask)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p * (1 - lr * wd) - lr * (m / bc1) / (tl.sqrt(v / bc2) + eps)
        tl.store(p_ptr + offs, p, mask=mask)
        tl.store(m_ptr + offs, m, mask=mask)
        tl.store(v_ptr + offs, v, mask=mask)
        tl.store(lowp_ptr + offs, p.to(tl.bfloat16), mask=mask)


def adamw(st, grid_cap):
    BLOCK = 1024
    blocks = triton.cdiv(P_LAYER, BLOCK)
    grid = blocks if grid_cap is None else min(blocks, grid_cap)
    iters = triton.cdiv(blocks, grid)
    adamw_kernel[(grid,)](st["p"], st["g"], st["m"], st["v"], st["lowp"], P_LAYER, 1e-4, 0.9, 0.95,
                          1e-8, 0.1, 0.5, 0.5, BLOCK=BLOCK, ITERS=iters, num_warps=4)


def r(*s, dtype=torch.bfloat16):
    return torch.randn(*s, device=dev, dtype=dtype)


layers = []
for _ in range(L):
    st = {"p": r(P_LAYER, dtype=torch.float32), "g": r(P_LAYER), "m": r(P_LAYER, dtype=torch.float32).abs(),
          "v": r(P_LAYER, dtype=torch.float32).abs()}
    st["lowp"] = st["p"].to(torch.bfloat16)
    w = st["lowp"]
    o = 0
    st["wqkv"] = w[o:o + 3 * C * C].view(3 * C, C); o += 3 * C * C
    st["wo"] = w[o:o + C * C].view(C, C); o += C * C
    st["w13"] = w[o:o + 2 * C * F].view(2 * F, C); o += 2 * C * F
    st["w2"] = w[o:o + C * F].view(C, F)
    layers.append(st)
x0 = r(N, C)


def forward_layer(st, x):
    qkv = x @ st["wqkv"].t()
    q, k, v = qkv.view(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
    a = Fn.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + a.transpose(1, 2).reshape(N, C) @ st["wo"].t()
    h = x @ st["w13"].t()
    h = Fn.silu(h[:, :F]) * h[:, F:]
    return x + h @ st["w2"].t()


def fwd():
    x = x0
    for st in layers:
        x = forward_layer(st, x)


def opt(grid_cap=None):
    for st in layers:
        adamw(st, grid_cap)


side_default = torch.cuda.Stream()
side_low = torch.cuda.Stream(priority=0)
main_high = torch.cuda.Stream(priority=-1)


def overlap(side, grid_cap=None):
    main = torch.cuda.current_stream()
    start = torch.cuda.Event()
    start.record(main)
    side.wait_event(start)
    events = []
    with torch.cuda.stream(side):
        for st in layers:
            adamw(st, grid_cap)
            e = torch.cuda.Event()
            e.record(side)
            events.append(e)
    x = x0
    for st, e in zip(layers, events):
        main.wait_event(e)
        x = forward_layer(st, x)
    main.wait_stream(side)


def time_ms(fn, stream=None, reps=5):
    s = stream or torch.cuda.current_stream()
    with torch.cuda.stream(s):
        fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(s)
            fn()
            b.record(s)
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b))
    return statistics.median(out), min(out)


print(f"{torch.cuda.get_device_name()}  layers {L} x {P_LAYER / 1e6:.1f} M parameters, N {N}", flush=True)
for rnd in range(2):
    rows = {
        "fwd": time_ms(fwd),
        "opt": time_ms(opt),
        "serial": time_ms(lambda: (opt(), fwd())),
        "overlap, side default priority": time_ms(lambda: overlap(side_default)),
        "overlap, main high / side low": time_ms(lambda: overlap(side_low), stream=main_high),
        "overlap, AdamW grid 132": time_ms(lambda: overlap(side_default, 132)),
        "overlap, AdamW grid 264, main high": time_ms(lambda: overlap(side_low, 264), stream=main_high),
        "opt, grid 132": time_ms(lambda: opt(132)),
    }
    print(f"round {rnd}")
    for k, (med, mn) in rows.items():
        print(f"  {k:40s} median {med:7.2f} ms  min {mn:7.2f} ms", flush=True)
    print(f"  serial - overlap(best) = {rows['serial'][0] - min(v[0] for k, v in rows.items() if k.startswith('overlap')):.2f} ms")
