#pragma once
// CUDA launcher behind ops/rope.h (plain C++ header).
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// in, out: 4-D (B, H, T, D) strided views, stride(3) == 1, one dtype (fp32|bf16); out may be in.
void rope(cudaStream_t s, Tensor& out, const Tensor& in, double theta, bool inverse);
// table: (positions, D/2, 2) fp32, contiguous: the (cos, sin) of every angle rope() rotates by.
void rope_table(cudaStream_t s, Tensor& table, double theta);

}  // namespace pt::cuda
