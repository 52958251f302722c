#pragma once
// Standard ("naive") attention that materialises the (Tq × Tk) scores: the baseline the
// fused FlashAttention path is compared with. Built from matmul and softmax ops.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// q (B, Tq, H, D); k, v (B, Tk, H, D); out (B, Tq, H, D): 4-D views with stride(3) == 1 and
// any other strides (slices of a fused QKV buffer are fine). Scores are scaled by 1/sqrt(D).
// probs (B, H, Tq, Tk) contiguous receives the softmax probabilities, saved for backward; its
// dtype is q's (bf16 in mixed precision, as PyTorch autocast stores them) or fp32.
// NVTX ranges: "computing attention scores", "computing softmax", "final matmul".
void naive_attention_forward(Context& ctx, Tensor& out, Tensor& probs, const Tensor& q,
                             const Tensor& k, const Tensor& v, bool causal);
// Gradients (same shapes/strides rules as the inputs) are written, not accumulated.
void naive_attention_backward(Context& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                              const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& probs, bool causal);

}  // namespace pt::ops
