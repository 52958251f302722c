#pragma once
// CUDA launchers behind ops/rmsnorm.h (plain C++ header).
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// x, w, rstd fp32; y fp32|bf16. One warp per row.
void rmsnorm_forward(cudaStream_t s, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps);
// dy fp32|bf16; dx, x, w, rstd fp32; dw fp32|bf16. A warp per row; dw summed per block in shared
// memory, then one fp32 atomic per block and column — into dw, or for a bf16 dw into
// dw_scratch's sums, rounded into dw once by each column strip's last block. dw_scratch (bf16 dw
// only): rmsnorm_dw_scratch_numel(C) fp32 elements, zero on entry and left zero. dx_lowp
// (optional, bf16, dx's shape): the final dx rounded to bf16 in the same pass.
int64_t rmsnorm_dw_scratch_numel(int64_t cols);
void rmsnorm_backward(cudaStream_t s, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, bool accumulate, float* dw_scratch = nullptr, Tensor* dx_lowp = nullptr);

}  // namespace pt::cuda
