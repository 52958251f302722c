#pragma once
// Standard ("naive") attention that materialises the (Tq × Tk) scores: the baseline the
// fused FlashAttention path is compared with. Built from matmul and softmax ops.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// Every attention op (naive here, flash in ops/flash_attention.h) takes 4-D views in the
// logical order (B, H, T, D) with stride(3) == 1 and any other strides: the model's fused
// QKV buffer (B, T, 3, H, D) is read in place as q = (B, H, T, D) with strides
// (T·3C, D, 3C, 1), no transpose copies. A 3-D (B, T, D) input is the H = 1 case.
// q (B, H, Tq, D); k, v (B, H, Tk, D); out (B, H, Tq, D). Scores are scaled by 1/sqrt(D).
// probs (B, H, Tq, Tk) contiguous receives the softmax probabilities, saved for backward; its
// dtype is q's (bf16 in mixed precision, as PyTorch autocast stores them) or fp32 (GPU).
// q, k, v share a dtype; out and the gradients are q's dtype or fp32 (GPU); the CPU uses one
// type throughout. Scores are fp32 even for bf16 inputs (written straight into probs when
// probs is fp32|fp64, else into a temporary (H, Tq, Tk) per batch entry); causal is
// bottom-right aligned as in ops/softmax.h.
// NVTX ranges (timed as Matmul, Softmax, Matmul): "computing attention scores",
// "computing softmax" (once per batch entry each), "final matmul"; the whole op sits in an
// untimed NVTX range "naive attention forward" / "naive attention backward".
void naive_attention_forward(Context& ctx, Tensor& out, Tensor& probs, const Tensor& q, const Tensor& k,
                             const Tensor& v, bool causal);
// Gradients (same shapes/strides rules as the inputs) are written, not accumulated. dout has
// q's dtype. Temporaries per batch entry: dP (H, Tq, Tk) fp32, plus dS in q's dtype for bf16.
void naive_attention_backward(Context& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                              const Tensor& k, const Tensor& v, const Tensor& probs, bool causal);

}  // namespace pt::ops
