#pragma once
// CUDA launchers behind ops/softmax.h (plain C++ header). One warp per row.
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// scores, probs: contiguous (..., Tq, Tk), each fp32|bf16; probs may alias scores.
void softmax_forward(cudaStream_t s, Tensor& probs, const Tensor& scores, double scale, bool causal);
// dscores, dprobs, probs: contiguous, same shape, each fp32|bf16; dscores may alias dprobs.
void softmax_backward(cudaStream_t s, Tensor& dscores, const Tensor& dprobs, const Tensor& probs, double scale);

}  // namespace pt::cuda
