#pragma once
// CUDA launchers behind ops/loss.h (plain C++ header). The cross-entropy's rows are summed in a
// fixed order (the same loss bit for bit from run to run); the MSE's with fp32 atomics into the
// device scalar (zeroed first on the stream), so its last bits may vary.
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// logits (N, V) fp32|bf16; dlogits (optional) same dtype, may alias logits, scaled by
// grad_scale; loss fp32 (1). One block per row. A target outside [0, V) gives a NaN loss (no
// host check possible).
void cross_entropy(cudaStream_t s, Tensor& loss, Tensor* dlogits, const Tensor& logits, const Tensor& targets,
                   float grad_scale);
// pred, target fp32|bf16, same numel; dpred (optional) pred's dtype; loss fp32 (1): the mean
// of the squared differences when `mean`, else their sum.
void mse_loss(cudaStream_t s, Tensor& loss, Tensor* dpred, const Tensor& pred, const Tensor& target, bool mean);

}  // namespace pt::cuda
