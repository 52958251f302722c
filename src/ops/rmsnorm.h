#pragma once
// RMSNorm: y = x · rsqrt(mean(x²) + eps) · w, computed in fp32 whatever the storage type.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// x (N, C) fp32|fp64; w (C) same dtype as x; y (N, C) any float dtype (bf16 in mixed
// precision: the GEMM operand that follows); rstd (N) fp32|fp64 (x's dtype), saved for backward.
void rmsnorm_forward(Context& ctx, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps);
// dy (N, C) any float dtype. dx (N, C) in x's dtype: written, or added to when accumulate
// (the pre-norm residual branch adds its gradient to the stream's). dw (C) += always.
void rmsnorm_backward(Context& ctx, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool accumulate);

}  // namespace pt::ops
