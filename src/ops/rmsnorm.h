#pragma once
// RMSNorm: y = x · rsqrt(mean(x²) + eps) · w, computed in fp32 whatever the storage type.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// x (N, C) fp32|fp64 on the CPU, fp32|bf16 on the GPU (bf16: the residual stream stored in bf16,
// --residual-dtype); w (C) and rstd (N, saved for backward) fp32 on the GPU, x's dtype on the
// CPU; y (N, C) any float dtype the device stores (bf16 in mixed precision: the GEMM operand
// that follows; x's dtype on the CPU). All contiguous.
// y_amax (optional): fp32, one element, on ctx's device; receives max |y| over y as stored (after
// rounding to y's dtype; NaN skipped), from the same pass: FP8 current scaling's amax of the
// GEMM operand y without a pass of its own. The op zeroes it first.
void rmsnorm_forward(Context& ctx, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps,
                     Tensor* y_amax = nullptr);
// y = x·rstd·w with the rstd rmsnorm_forward saved: forward's y again, bit for bit (the same
// products in the same order), in one elementwise pass without the row sums — for a backward
// that recomputes the norm's output instead of keeping it. Arguments as rmsnorm_forward's.
void rmsnorm_apply(Context& ctx, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& rstd);
// dy (N, C) any float dtype (x's on the CPU). dx (N, C) in w's dtype: written, or added to
// when accumulate (the pre-norm residual branch adds its gradient to the stream's); dx may
// alias dy. dw (C, w's dtype; bf16 too on the GPU) += Σ_rows dy⊙x·rstd, or = when dw_accumulate
// is false (dw not read: the step's first contribution, ParamStore::grad_beta). GPU: one pass
// over the rows makes dx and per-block fp32 column sums of dw's terms (workspace of N/8 × C
// fp32, taken per call), a second kernel adds them into dw in a fixed order: run to run bit for
// bit; a bf16 dw gets the fp32 total rounded in once.
// dx_lowp (GPU, optional): bf16 (N, C), receives the final dx rounded to bf16 in the same pass
// (the next GEMM's operand, instead of a cast pass).
// dx_amax (optional): as y_amax, max |value| of dx_lowp as stored when dx_lowp is given, else of dx
// as stored (after accumulate).
void rmsnorm_backward(Context& ctx, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, bool accumulate, Tensor* dx_lowp = nullptr, bool dw_accumulate = true,
                      Tensor* dx_amax = nullptr);

}  // namespace pt::ops
