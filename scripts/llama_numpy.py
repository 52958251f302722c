"""A Hugging Face Llama folder (config.json, model.safetensors) read and run with NumPy alone:
LlamaForCausalLM's forward as transformers computes it (RMSNorm, rotate-half RoPE, causal
attention, SwiGLU), in fp64, on the CPU. It is the reference the export's test checks
paratrain's logits against, and scripts/sample.py's backend where torch is not installed.
Multi-head attention only (num_key_value_heads == num_attention_heads), untied head."""
import json
import os

import numpy as np


def load(folder):
    """(config, weights): config.json as a dict, every tensor of model.safetensors (F32 or BF16)
    as fp64. The file is parsed here: NumPy has no bf16."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header, data = json.loads(f.read(n)), f.read()
    header.pop("__metadata__", None)
    weights = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        if h["dtype"] == "F32":
            v = np.frombuffer(data[begin:end], dtype="<f4")
        elif h["dtype"] == "BF16":
            v = (np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"llama_numpy: {folder}: tensor {name} has dtype {h['dtype']} (F32 or BF16 only)")
        weights[name] = v.reshape(h["shape"]).astype(np.float64)
    return cfg, weights


def rms_norm(x, w, eps):
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def logits(cfg, w, ids):
    """The logits (T, V) of the token sequence `ids`, in fp64."""
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    D = cfg.get("head_dim", C // H)
    if cfg["num_key_value_heads"] != H or cfg["tie_word_embeddings"] or cfg["hidden_act"] != "silu":
        raise ValueError("llama_numpy: only untied multi-head SwiGLU Llama models (paratrain's shape)")
    eps, T = cfg["rms_norm_eps"], len(ids)
    inv_freq = 1.0 / cfg["rope_theta"] ** (np.arange(0, D, 2) / D)
    angles = np.outer(np.arange(T), inv_freq)
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles, angles], -1))
    mask = np.triu(np.full((T, T), -np.inf), 1)
    x = w["model.embed_tokens.weight"][np.asarray(ids)]
    for layer in range(cfg["num_hidden_layers"]):
        def p(name, layer=layer):
            return w[f"model.layers.{layer}.{name}.weight"]

        h = rms_norm(x, p("input_layernorm"), eps)
        q, k, v = ((h @ p(f"self_attn.{n}_proj").T).reshape(T, H, D).transpose(1, 0, 2) for n in "qkv")
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D) + mask
        prob = np.exp(s - s.max(-1, keepdims=True))
        prob /= prob.sum(-1, keepdims=True)
        x = x + (prob @ v).transpose(1, 0, 2).reshape(T, H * D) @ p("self_attn.o_proj").T
        h = rms_norm(x, p("post_attention_layernorm"), eps)
        gate, up = h @ p("mlp.gate_proj").T, h @ p("mlp.up_proj").T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ p("mlp.down_proj").T
    return rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T


def generate(cfg, w, ids, max_new_tokens, temperature, rng):
    """ids followed by max_new_tokens sampled tokens (temperature 0: the most likely each time).
    The context keeps the last max_position_embeddings tokens, as the model was trained."""
    out = list(ids)
    window = cfg["max_position_embeddings"]
    for _ in range(max_new_tokens):
        last = logits(cfg, w, out[-window:])[-1]
        if temperature == 0:
            out.append(int(np.argmax(last)))
            continue
        z = (last - last.max()) / temperature
        prob = np.exp(z)
        out.append(int(rng.choice(len(prob), p=prob / prob.sum())))
    return out
