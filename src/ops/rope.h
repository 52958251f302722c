#pragma once
// Rotary position embedding on (B, T, H, D) views: rotates dimension pairs (2i, 2i+1).
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// x_out[b,t,h,2i:2i+2] = R(t · theta^(-2i/D)) · x_in[b,t,h,2i:2i+2], positions t = 0..T-1.
// inverse = true rotates by the negative angle: that is the backward pass (R is orthogonal).
// in and out are 4-D (B, T, H, D) with stride(3) == 1, any other strides (views into a fused
// QKV buffer are fine); out may alias in. D must be even. Angles are computed in fp64 on the
// CPU and fp32 on the GPU (same as PyTorch's precomputed fp32 tables).
void rope(Context& ctx, Tensor& out, const Tensor& in, double theta, bool inverse);

}  // namespace pt::ops
