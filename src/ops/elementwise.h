#pragma once
// Elementwise ops: add, scale, cast between float types, bias add/grad, ReLU, SwiGLU gate.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// All tensors contiguous, same device. Unless a comment says otherwise, float inputs may be
// fp32, fp64 (CPU only) or bf16 (CUDA only) and math is done in fp32 (fp64 for fp64).

void add(Context& ctx, Tensor& out, const Tensor& a, const Tensor& b);  // out = a + b (out may alias)
void add_inplace(Context& ctx, Tensor& x, const Tensor& y, float alpha = 1.0f);  // x += alpha·y
void scale_inplace(Context& ctx, Tensor& x, float alpha);                       // x *= alpha
void cast(Context& ctx, Tensor& dst, const Tensor& src);  // element type conversion, equal numel

// y (N, C) += bias (C) broadcast over rows; dbias (C) += column sums of dy (N, C).
void add_bias(Context& ctx, Tensor& y, const Tensor& bias);
void bias_backward(Context& ctx, Tensor& dbias, const Tensor& dy);

// ReLU. relu_backward: dx = dy where y > 0 else 0 (y is the forward output; dx may alias dy).
void relu_forward(Context& ctx, Tensor& y, const Tensor& x);
void relu_backward(Context& ctx, Tensor& dx, const Tensor& dy, const Tensor& y);

// SwiGLU gate: g = silu(h1) ⊙ h3 with silu(a) = a·sigmoid(a); all (N, F).
// Backward: dh1 = dg ⊙ h3 ⊙ silu'(h1), dh3 = dg ⊙ silu(h1).
void swiglu_forward(Context& ctx, Tensor& g, const Tensor& h1, const Tensor& h3);
void swiglu_backward(Context& ctx, Tensor& dh1, Tensor& dh3, const Tensor& dg, const Tensor& h1,
                     const Tensor& h3);

}  // namespace pt::ops
