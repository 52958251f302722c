"""The Transformer's named sizes and its parameter and FLOP counts, the same numbers as
src/model/transformer.cpp (TransformerConfig::named, num_params, train_flops_per_token).
Shared by the report and the PyTorch reference scripts; no torch needed here."""
import os
import re

VOCAB_SIZE = 10000

# name: (d_model, d_ff, num_layers, num_heads)
SIZES = {
    "tiny": (128, 384, 4, 4),  # not a reference size: CPU smoke runs
    "small": (768, 3072, 12, 12),
    "medium": (1024, 4096, 24, 16),
    "large": (1280, 5120, 36, 20),
    "xl": (1600, 6400, 48, 25),
    "2.7b": (2560, 10240, 32, 32),
}
SIZE_ORDER = list(SIZES)


def num_params(vocab_size, d_model, num_layers, d_ff):
    per_layer = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model
    return 2 * vocab_size * d_model + num_layers * per_layer + d_model


def train_flops_per_token(vocab_size, d_model, num_layers, d_ff, seq_len):
    """6 FLOPs per GEMM parameter per token (the embedding lookup is no GEMM) plus attention's
    score and value products: 2·2·T·d_model per layer forward, three times that with backward."""
    n_gemm = num_params(vocab_size, d_model, num_layers, d_ff) - vocab_size * d_model
    return 6.0 * n_gemm + 12.0 * num_layers * seq_len * d_model


def _accelerators_tsv():
    """src/core/accelerators.tsv: beside this package when installed, else in the source tree."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "accelerators.tsv"), os.path.join(here, "..", "..", "src", "core", "accelerators.tsv")):
        if os.path.exists(path):
            return path
    raise FileNotFoundError("accelerators.tsv is neither beside paratrain_report nor in src/core/")


def accelerators():
    """The accelerator table paratrain compiles in: one dict per row, in match order."""
    rows = []
    with open(_accelerators_tsv()) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            preset, desc, cc, mem, fp32, tf32, bf16, fp8, hbm, link, match = line.split("\t")
            rows.append({"preset": preset, "description": desc, "cc": cc, "memory_gb": float(mem),
                         "fp32": float(fp32), "tf32": float(tf32), "bf16": float(bf16), "fp8": float(fp8),
                         "hbm_gbps": float(hbm), "link_gbps": float(link),
                         "match": [] if match == "-" else match.upper().split()})
    return rows


def dense_peak_flops(device_name, precision):
    """Dense peak FLOP/s of a CUDA device (by its name) for a precision (fp32, tf32, bf16, fp8); 0
    when the table does not know it, or for fp8 without FP8 tensor cores. Matching as
    core/accelerator_specs.cpp: every word of a row's pattern among the name's words (letters and
    digits), first row wins."""
    words = set(re.findall(r"[A-Z0-9]+", device_name.upper()))
    for row in accelerators():
        if row["match"] and all(w in words for w in row["match"]):
            return row.get(precision, 0.0) * 1e12
    return 0.0
