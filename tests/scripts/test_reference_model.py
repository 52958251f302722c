"""The PyTorch reference model against the architecture of issue 2, checked on the CPU in fp64
where it matters: names, shapes and order of the parameters; initialisation; RMSNorm, RoPE,
causality; the whole forward against an independent fp64 recomputation written here; naive
attention equal to SDPA; the HDF5 state_dict round trip. Skipped where PyTorch is absent."""
import math

import pytest

torch = pytest.importorskip("torch")

import reference_model as rm  # noqa: E402
from paratrain_report.model_sizes import num_params  # noqa: E402

TINY = dict(vocab_size=50, context_length=16, d_model=16, num_layers=2, num_heads=4, d_ff=24)


def tiny_model(seed=0, **kw):
    torch.manual_seed(seed)
    return rm.TransformerLM(**{**TINY, **kw}).double()


def test_parameter_names_shapes_and_order():
    m = tiny_model()
    d, f, v = TINY["d_model"], TINY["d_ff"], TINY["vocab_size"]
    expected = [("token_embeddings.weight", (v, d))]
    for i in range(TINY["num_layers"]):
        p = f"layers.{i}."
        expected += [(p + "ln1.weight", (d,)), (p + "attn.q_proj.weight", (d, d)), (p + "attn.k_proj.weight", (d, d)),
                     (p + "attn.v_proj.weight", (d, d)), (p + "attn.output_proj.weight", (d, d)),
                     (p + "ln2.weight", (d,)), (p + "ffn.w1.weight", (f, d)), (p + "ffn.w2.weight", (d, f)),
                     (p + "ffn.w3.weight", (f, d))]
    expected += [("ln_final.weight", (d,)), ("lm_head.weight", (v, d))]
    assert [(k, tuple(t.shape)) for k, t in m.state_dict().items()] == expected
    assert sum(t.numel() for t in m.parameters()) == num_params(v, d, TINY["num_layers"], f)


def test_initialisation():
    torch.manual_seed(1)
    m = rm.TransformerLM(vocab_size=4000, context_length=8, d_model=256, num_layers=1, num_heads=4, d_ff=512)
    emb = m.token_embeddings.weight
    assert emb.abs().max() <= 3.0 and emb.std().item() == pytest.approx(0.986, abs=0.02)
    w1 = m.layers[0].ffn.w1.weight  # (512, 256)
    std = math.sqrt(2.0 / (256 + 512))
    assert w1.abs().max() <= 3 * std + 1e-7 and w1.std().item() == pytest.approx(0.986 * std, rel=0.03)
    assert torch.equal(m.layers[0].ln1.weight, torch.ones(256)) and torch.equal(m.ln_final.weight, torch.ones(256))


def test_rmsnorm_is_fp32_and_returns_the_input_dtype():
    norm = rm.RMSNorm(8)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 8))
    x = torch.randn(3, 8, dtype=torch.float64)
    ref = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * norm.weight.double()
    assert torch.allclose(norm(x.float()).double(), ref, rtol=1e-5, atol=1e-6)
    y = norm(x.to(torch.bfloat16))
    assert y.dtype == torch.bfloat16


def test_rope_rotates_pairs():
    rope = rm.RotaryEmbedding(d_head=6, context_length=5, theta=10000.0)
    x = torch.randn(1, 2, 5, 6, dtype=torch.float64)
    out = rope(x.float()).double()
    ref = x.clone()
    for t in range(5):
        for i in range(3):
            a = t * 10000.0 ** (-2 * i / 6)
            x0, x1 = x[..., t, 2 * i], x[..., t, 2 * i + 1]
            ref[..., t, 2 * i] = x0 * math.cos(a) - x1 * math.sin(a)
            ref[..., t, 2 * i + 1] = x0 * math.sin(a) + x1 * math.cos(a)
    assert torch.allclose(out, ref, atol=1e-6)


def reference_forward(sd, ids, cfg):
    """fp64 forward of the architecture, from the state_dict alone."""
    d, h, L = cfg["d_model"], cfg["num_heads"], cfg["num_layers"]
    dh = d // h
    t = ids.shape[1]

    def norm(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w

    def rope(x):  # (B, H, T, dh)
        out = torch.empty_like(x)
        pos = torch.arange(t, dtype=torch.float64)[:, None]
        ang = pos * 10000.0 ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)[None, :]
        out[..., 0::2] = x[..., 0::2] * ang.cos() - x[..., 1::2] * ang.sin()
        out[..., 1::2] = x[..., 0::2] * ang.sin() + x[..., 1::2] * ang.cos()
        return out

    x = sd["token_embeddings.weight"][ids]
    for i in range(L):
        p = lambda n: sd[f"layers.{i}.{n}.weight"]  # noqa: E731
        a = norm(x, p("ln1"))
        split = lambda y: y.view(ids.shape[0], t, h, dh).transpose(1, 2)  # noqa: E731
        q, k = rope(split(a @ p("attn.q_proj").T)), rope(split(a @ p("attn.k_proj").T))
        v = split(a @ p("attn.v_proj").T)
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), -math.inf)
        y = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(ids.shape[0], t, d)
        x = x + y @ p("attn.output_proj").T
        b = norm(x, p("ln2"))
        g = b @ p("ffn.w1").T
        x = x + ((g * torch.sigmoid(g)) * (b @ p("ffn.w3").T)) @ p("ffn.w2").T
    return norm(x, sd["ln_final.weight"]) @ sd["lm_head.weight"].T


def test_forward_matches_an_independent_fp64_recomputation():
    m = tiny_model()
    ids = torch.randint(0, TINY["vocab_size"], (2, 12))
    got = m(ids)
    want = reference_forward({k: v.double() for k, v in m.state_dict().items()}, ids, TINY)
    assert torch.allclose(got, want, rtol=1e-10, atol=1e-10)
    targets = torch.randint(0, TINY["vocab_size"], (2, 12))
    loss = rm.cross_entropy(got, targets)
    manual = -torch.log_softmax(want, -1).gather(-1, targets[..., None]).mean()
    assert loss.item() == pytest.approx(manual.item(), rel=1e-10)


def test_attention_is_causal():
    m = tiny_model()
    ids = torch.randint(0, TINY["vocab_size"], (1, 10))
    changed = ids.clone()
    changed[0, 6:] = (changed[0, 6:] + 1) % TINY["vocab_size"]
    a, b = m(ids), m(changed)
    assert torch.allclose(a[:, :6], b[:, :6], atol=1e-12)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_naive_attention_equals_sdpa():
    naive, sdpa = tiny_model(seed=3), tiny_model(seed=3, attention="sdpa")
    ids = torch.randint(0, TINY["vocab_size"], (2, 16))
    assert torch.allclose(naive(ids), sdpa(ids), atol=1e-10)


def test_bad_configuration_is_one_clear_error():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        rm.TransformerLM(vocab_size=10, context_length=4, d_model=10, num_layers=1, num_heads=3, d_ff=8)
    with pytest.raises(ValueError, match="unknown model size"):
        rm.ModelConfig.named("huge")
    m = tiny_model()
    with pytest.raises(ValueError, match="exceeds the context length"):
        m(torch.zeros(1, TINY["context_length"] + 1, dtype=torch.long))


def test_named_sizes():
    cfg = rm.ModelConfig.named("xl", context_length=512)
    assert (cfg.d_model, cfg.d_ff, cfg.num_layers, cfg.num_heads, cfg.vocab_size) == (1600, 6400, 48, 25, 10000)


def test_hdf5_state_dict_round_trip(tmp_path):
    a, b = tiny_model(seed=0).float(), tiny_model(seed=1).float()
    ids = torch.randint(0, TINY["vocab_size"], (1, 8))
    assert not torch.allclose(a(ids), b(ids))
    path = tmp_path / "weights.h5"
    rm.save_state_dict_h5(a, path)
    rm.load_state_dict_h5(b, path)
    assert torch.equal(a(ids), b(ids))
