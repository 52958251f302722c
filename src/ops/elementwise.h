#pragma once
// Elementwise ops: add, scale, cast between float types, bias add/grad, ReLU, SwiGLU gate.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// All tensors contiguous, same device, same shape (bias: (C)). Math in fp32 (fp64 for fp64).
// Types: on the CPU every float tensor of a call has one type, fp32 or fp64 (cast excepted);
// on the GPU each tensor is fp32 or bf16 independently (e.g. an fp32 residual stream plus a
// bf16 branch), except where a comment pairs them.

void add(Context& ctx, Tensor& out, const Tensor& a, const Tensor& b);           // out = a + b (out may alias)
void add_inplace(Context& ctx, Tensor& x, const Tensor& y, float alpha = 1.0f);  // x += alpha·y
void scale_inplace(Context& ctx, Tensor& x, float alpha);                        // x *= alpha
// Element type conversion, equal numel, round to nearest even. CPU: any of fp32, fp64, bf16,
// fp16 both ways; GPU: fp32 ↔ bf16 (same type = a copy). With scale ≠ 1, dst = src · scale,
// multiplied in fp32 (fp64 on the CPU for fp64) and rounded once: a cast and a scale in one pass.
void cast(Context& ctx, Tensor& dst, const Tensor& src, float scale = 1.0f);

// y (N, C) += bias (C) broadcast over rows; dbias (C) += column sums of dy (N, C)
// (dbias fp32 on the GPU: it is summed with atomics).
void add_bias(Context& ctx, Tensor& y, const Tensor& bias);
void bias_backward(Context& ctx, Tensor& dbias, const Tensor& dy);

// ReLU. relu_backward: dx = dy where y > 0 else 0 (y is the forward output; dx may alias dy).
void relu_forward(Context& ctx, Tensor& y, const Tensor& x);
void relu_backward(Context& ctx, Tensor& dx, const Tensor& dy, const Tensor& y);

// SwiGLU gate: g = silu(h1) ⊙ h3 with silu(a) = a·sigmoid(a); all (N, F).
// Backward: dh1 = dg ⊙ h3 ⊙ silu'(h1), dh3 = dg ⊙ silu(h1); dh1 or dh3 may alias dg.
// h1 and h3 share a type; dg, dh1 and dh3 share a type.
// The amax outputs (optional; fp32, contiguous, on the context's device) feed FP8 current scaling
// without a pass of their own: the op zeroes them, then writes max |x| over x as stored (after
// rounding to its dtype; NaN skipped; on the CPU an fp64 maximum rounded to fp32).
// g_amax: one element, max |g|.
void swiglu_forward(Context& ctx, Tensor& g, const Tensor& h1, const Tensor& h3, Tensor* g_amax = nullptr);
// With g (h1's type) the same pass also writes the forward product g = silu(h1) ⊙ h3, bit for bit
// what swiglu_forward writes: the backward that recomputes g for W2's gradient reads h1 and h3
// once instead of twice. dh_amax: two elements, max |dh1| then max |dh3| (each gets its own scale).
void swiglu_backward(Context& ctx, Tensor& dh1, Tensor& dh3, const Tensor& dg, const Tensor& h1, const Tensor& h3,
                     Tensor* g = nullptr, Tensor* dh_amax = nullptr);

}  // namespace pt::ops
