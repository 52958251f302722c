#pragma once
// Rotary position embedding on (B, H, T, D) views: rotates dimension pairs (2i, 2i+1).
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// Views in the attention ops' logical order (B, H, T, D), any strides with stride(3) == 1.
// x_out[b,h,t,2i:2i+2] = R(t · theta^(-2i/D)) · x_in[b,h,t,2i:2i+2], positions t = 0..T-1.
// inverse = true rotates by the negative angle: that is the backward pass (R is orthogonal).
// out may alias in (in-place on a slice of the fused QKV buffer). D must be even. Angles are computed in fp64 on the
// CPU and fp32 on the GPU (same as PyTorch's precomputed fp32 tables).
void rope(Context& ctx, Tensor& out, const Tensor& in, double theta, bool inverse);

}  // namespace pt::ops
