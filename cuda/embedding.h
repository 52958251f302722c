#pragma once
// CUDA launchers behind ops/embedding.h (plain C++ header).
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// out (N, C) and weight (V, C) share a dtype (fp32|bf16). An id outside [0, V) — a caller
// bug the op cannot check without a host sync — yields a NaN row instead of a wild read.
void embedding_forward(cudaStream_t s, Tensor& out, const Tensor& ids, const Tensor& weight);
// Scratch of a bf16 dweight's backward: first (V) int32 and sums (N, C) fp32, any contents.
struct EmbeddingBf16Scratch {
  const Tensor* first = nullptr;
  const Tensor* sums = nullptr;
};
// dweight (V, C) fp32|bf16 += rows of dout (N, C) fp32|bf16; out-of-range ids are skipped. A
// bf16 dweight needs the scratch: each id's rows are summed in fp32 and rounded in once.
void embedding_backward(cudaStream_t s, Tensor& dweight, const Tensor& dout, const Tensor& ids,
                        const EmbeddingBf16Scratch& scratch = {});

}  // namespace pt::cuda
