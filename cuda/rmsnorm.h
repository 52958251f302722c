#pragma once
// CUDA launchers behind ops/rmsnorm.h (plain C++ header).
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// x fp32|bf16; w, rstd fp32; y fp32|bf16. One warp per row. amax (optional, device fp32): zeroed
// on s, then max |y| over y as stored (NaN skipped), from the same pass (FP8 current scaling).
void rmsnorm_forward(cudaStream_t s, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps, float* amax);
// y = x·rstd·w with rstd from rmsnorm_forward: its y again, bit for bit. Elementwise.
void rmsnorm_apply(cudaStream_t s, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& rstd);
// dy, x fp32|bf16; dx, w, rstd fp32; dw fp32|bf16. A warp per row computes dx, and each block's
// share of dw (its rows' sums, in a fixed order) goes to its row of `partial`: fp32, at most
// rmsnorm_dw_partial_rows(N) × C, written before it is read (no zeroing). A second kernel adds
// those rows into dw in a fixed order (a bf16 dw: the fp32 total rounded in once), so dw is the
// same bit for bit from run to run. dx_lowp (optional, bf16, dx's shape): the final dx rounded
// to bf16 in the same pass. dw_accumulate false: dw written, not read. amax (optional, device
// fp32): zeroed on s, then max |value| (NaN skipped) of dx_lowp as stored when given, else of dx.
int64_t rmsnorm_dw_partial_rows(int64_t rows);
void rmsnorm_backward(cudaStream_t s, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, bool accumulate, float* partial, Tensor* dx_lowp, bool dw_accumulate,
                      float* amax);

}  // namespace pt::cuda
