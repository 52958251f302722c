#pragma once
// Rotary position embedding on (B, H, T, D) views: rotates dimension pairs (2i, 2i+1).
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// Views in the attention ops' logical order (B, H, T, D), any strides with stride(3) == 1;
// a 3-D (B, T, D) view is the H = 1 case. in and out share a dtype (fp32|fp64 on the CPU,
// fp32|bf16 on the GPU).
// x_out[b,h,t,2i:2i+2] = R(t · theta^(-2i/D)) · x_in[b,h,t,2i:2i+2], positions t = 0..T-1.
// inverse = true rotates by the negative angle: that is the backward pass (R is orthogonal).
// out may alias in exactly (in place on a slice of the fused QKV buffer), not partially.
// D must be even. Angles are computed in fp64 on the CPU and fp32 on the GPU (as PyTorch's
// precomputed fp32 tables), so at position t they differ by ~t·2^-23 radians.
void rope(Context& ctx, Tensor& out, const Tensor& in, double theta, bool inverse);

// The (cos, sin) of every angle rope() rotates by at positions 0..positions-1, for kernels that
// rotate as they store (flash attention's backward turns dQ and dK back): cos_sin is a
// (positions, D/2, 2) fp32 tensor, on the GPU bit for bit the angles of rope(); on the CPU from
// fp64 angles. theta is kept for the paths that run rope() itself instead.
struct RopeTable {
  Tensor cos_sin;
  double theta = 0;
  int64_t positions() const { return cos_sin.defined() ? cos_sin.size(0) : 0; }
  int64_t head_dim() const { return cos_sin.defined() ? 2 * cos_sin.size(1) : 0; }
};
RopeTable rope_table(Context& ctx, int64_t positions, int64_t head_dim, double theta);

}  // namespace pt::ops
