"""The Transformer's named sizes and its parameter and FLOP counts, the same numbers as
src/model/transformer.cpp (TransformerConfig::named, num_params, train_flops_per_token).
Shared by the report and the PyTorch reference scripts; no torch needed here."""

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


# Dense (no sparsity) peaks in TFLOP/s of the SXM parts: fp32, tf32, bf16 (vendor datasheets,
# the figures paratrain's bench/timing.cpp uses).
_PEAKS_TFLOPS = {"H100": (66.9, 494.7, 989.4), "H200": (66.9, 494.7, 989.4), "A100": (19.5, 156.0, 312.0)}


def dense_peak_flops(device_name, precision):
    """Dense peak FLOP/s of the device for a precision (fp32, tf32, bf16); 0 when unknown."""
    for key, (fp32, tf32, bf16) in _PEAKS_TFLOPS.items():
        if key in device_name:
            return {"fp32": fp32, "tf32": tf32, "bf16": bf16}.get(precision, 0.0) * 1e12
    return 0.0
