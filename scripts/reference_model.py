"""The PyTorch reference Transformer LM: the architecture paratrain implements (issue 2), with the
same parameter names, shapes, order and initialisation, so state_dicts move between the two
through HDF5 (docs/HDF5_SCHEMA.md, "Checkpoints").

    pre-norm blocks: h = x + Attention(RMSNorm(x)); out = h + SwiGLU(RMSNorm(h))
    RMSNorm: eps 1e-5, computed in fp32 whatever the input type, weight initialised to ones
    attention: causal, q/k/v/output projections (d_model, d_model) without bias, RoPE (theta
               10000) on q and k rotating dimension pairs (2i, 2i+1), scores scaled by 1/sqrt(d_head)
    SwiGLU: w2(silu(w1·x) ⊙ w3·x), w1 and w3 (d_ff, d_model), w2 (d_model, d_ff)
    final RMSNorm ln_final, untied lm_head (vocab, d_model)
    init: embedding truncated normal std 1 cut at ±3; Linear weights (d_out, d_in) truncated
          normal std sqrt(2/(d_in + d_out)) cut at ±3 std
    loss: cross-entropy averaged over all positions, in fp32

Import it from another script in scripts/:
    from reference_model import TransformerLM, ModelConfig, cross_entropy
    model = TransformerLM.from_config(ModelConfig.named("small", context_length=512)).cuda()
"""
import math
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paratrain_report.model_sizes import SIZES, VOCAB_SIZE, train_flops_per_token  # noqa: E402

# naive: the scores materialised, as the reference writes it; sdpa: F.scaled_dot_product_attention
ATTENTION_IMPLS = ("naive", "sdpa")


@dataclass
class ModelConfig:
    vocab_size: int = VOCAB_SIZE
    context_length: int = 512
    d_model: int = 768
    num_layers: int = 12
    num_heads: int = 12
    d_ff: int = 3072
    rope_theta: float = 10000.0
    attention: str = "naive"

    @classmethod
    def named(cls, size, **overrides):
        if size not in SIZES:
            raise ValueError(f"unknown model size '{size}' (expected one of {', '.join(SIZES)})")
        d_model, d_ff, num_layers, num_heads = SIZES[size]
        return cls(**{"d_model": d_model, "d_ff": d_ff, "num_layers": num_layers, "num_heads": num_heads,
                      **overrides})

    def train_flops_per_token(self, seq_len):
        return train_flops_per_token(self.vocab_size, self.d_model, self.num_layers, self.d_ff, seq_len)


def trunc_normal_(t, std):
    return nn.init.trunc_normal_(t, mean=0.0, std=std, a=-3.0 * std, b=3.0 * std)


class Linear(nn.Module):
    """y = x Wᵀ, W (d_out, d_in), no bias."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        trunc_normal_(self.weight, math.sqrt(2.0 / (d_in + d_out)))

    def forward(self, x):
        return F.linear(x, self.weight)


class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        trunc_normal_(self.weight, 1.0)

    def forward(self, ids):
        return self.weight[ids]


def _at_least_fp32(x):
    return x.to(torch.promote_types(x.dtype, torch.float32))


class RMSNorm(nn.Module):
    """x · rsqrt(mean(x²) + eps) · weight in fp32 (or wider), returned in the input's dtype."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        in_dtype = x.dtype
        x = _at_least_fp32(x)
        y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight.to(x.dtype)
        return y.to(in_dtype)


class RotaryEmbedding(nn.Module):
    """Rotates each pair (2i, 2i+1) of a head's dimensions by position · theta^(−2i/d_head)."""

    def __init__(self, d_head, context_length, theta):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (d_head/2,)
        angles = torch.arange(context_length, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T, d/2)
        # Buffers, not parameters, and not persistent: the state_dict holds only the weights.
        # Kept in fp64 and cast to the input's dtype per call, so an fp64 model is exact.
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):  # x (B, H, T, d_head)
        t = x.shape[-2]
        if t > self.cos.shape[0]:
            raise ValueError(f"sequence length {t} exceeds the context length {self.cos.shape[0]}")
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.d_model % cfg.num_heads:
            raise ValueError(f"d_model {cfg.d_model} is not a multiple of num_heads {cfg.num_heads}")
        if cfg.attention not in ATTENTION_IMPLS:
            raise ValueError(f"attention must be one of {', '.join(ATTENTION_IMPLS)} (got '{cfg.attention}')")
        self.num_heads, self.impl = cfg.num_heads, cfg.attention
        d_head = cfg.d_model // cfg.num_heads
        self.q_proj = Linear(cfg.d_model, cfg.d_model)
        self.k_proj = Linear(cfg.d_model, cfg.d_model)
        self.v_proj = Linear(cfg.d_model, cfg.d_model)
        self.output_proj = Linear(cfg.d_model, cfg.d_model)
        self.rope = RotaryEmbedding(d_head, cfg.context_length, cfg.rope_theta)

    def forward(self, x):  # x (B, T, C)
        b, t, c = x.shape
        heads = lambda y: y.view(b, t, self.num_heads, c // self.num_heads).transpose(1, 2)  # noqa: E731
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))  # (B, H, T, d)
        q, k = self.rope(q), self.rope(k)
        if self.impl == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T, T)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            y = probs @ v
        return self.output_proj(y.transpose(1, 2).reshape(b, t, c))


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = Linear(d_model, d_ff)
        self.w2 = Linear(d_ff, d_model)
        self.w3 = Linear(d_model, d_ff)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        # Registration order = state_dict order = paratrain's ParamStore order.
        self.ln1 = RMSNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = RMSNorm(cfg.d_model)
        self.ffn = SwiGLU(cfg.d_model, cfg.d_ff)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.ffn(self.ln2(h))


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta=10000.0,
                 attention="naive"):
        super().__init__()
        self.config = ModelConfig(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                                  attention)
        self.token_embeddings = Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(TransformerBlock(self.config) for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model)
        self.lm_head = Linear(d_model, vocab_size)

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.vocab_size, cfg.context_length, cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.d_ff,
                   cfg.rope_theta, cfg.attention)

    def forward(self, ids):  # ids (B, T) int → logits (B, T, vocab)
        x = self.token_embeddings(ids)
        for block in self.layers:
            x = block(x)
        return self.lm_head(self.ln_final(x))


def cross_entropy(logits, targets):
    """Mean cross-entropy over all positions, computed in fp32 (or wider)."""
    return F.cross_entropy(_at_least_fp32(logits).reshape(-1, logits.shape[-1]), targets.reshape(-1))


def save_state_dict_h5(model, path):
    """The model's weights in paratrain's checkpoint layout (loadable with --init-from)."""
    import h5py
    with h5py.File(path, "w") as f:
        for name, value in model.state_dict().items():
            f[name] = value.detach().float().cpu().numpy()


def load_state_dict_h5(model, path):
    """Weights from a paratrain checkpoint (or save_state_dict_h5) into the model."""
    import h5py
    with h5py.File(path, "r") as f:
        names = list(model.state_dict())
        missing = [n for n in names if n not in f]
        if missing:
            raise KeyError(f"{path}: missing tensors {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}")
        state = {n: torch.from_numpy(f[n][()]) for n in names}
    model.load_state_dict(state)
