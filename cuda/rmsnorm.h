#pragma once
// CUDA launchers behind ops/rmsnorm.h (plain C++ header).
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// x, w, rstd fp32; y fp32|bf16. One warp per row.
void rmsnorm_forward(cudaStream_t s, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps);
// dy fp32|bf16; dx, dw, x, w, rstd fp32. A warp per row; dw summed per block in shared memory,
// then one fp32 atomic per block and column.
void rmsnorm_backward(cudaStream_t s, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, bool accumulate);

}  // namespace pt::cuda
