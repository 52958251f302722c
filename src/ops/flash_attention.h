#pragma once
// FlashAttention-2 forward and backward (CUDA), and the tiled CPU implementation of the same
// two algorithms (the readable reference). Same layout rules as ops/attention.h.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// q (B, H, Tq, D); k, v (B, H, Tk, D); out (B, H, Tq, D): views with stride(3) == 1.
// lse (B, H, Tq) fp32 contiguous: logsumexp of the scaled scores per query, kept for backward.
// D ∈ {16, 32, 64, 128}; bf16 or fp32 on the GPU (fp32|fp64 on the CPU). Causal requires
// Tq == Tk; non-causal allows Tq != Tk. Scores are scaled by 1/sqrt(D).
void flash_attention_forward(Context& ctx, Tensor& out, Tensor& lse, const Tensor& q,
                             const Tensor& k, const Tensor& v, bool causal);
// Gradients written (not accumulated), same layout rules as the inputs.
void flash_attention_backward(Context& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, bool causal);

}  // namespace pt::ops
