#pragma once
// CUDA launchers behind ops/embedding.h (plain C++ header).
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// out (N, C) and weight (V, C) share a dtype (fp32|bf16). An id outside [0, V) — a caller
// bug the op cannot check without a host sync — yields a NaN row instead of a wild read.
void embedding_forward(cudaStream_t s, Tensor& out, const Tensor& ids, const Tensor& weight);
// dweight (V, C) fp32|bf16 += rows of dout (N, C) fp32|bf16; out-of-range ids are skipped.
// Deterministic (no float atomics): the rows are sorted by id, each id's rows summed in fp32 in
// ascending row order and added to its dweight row once (for bf16, rounded once). Its scratch
// comes from the tracking allocator as Workspace and the call never syncs with the host, so it
// can be captured into a CUDA graph.
void embedding_backward(cudaStream_t s, Tensor& dweight, const Tensor& dout, const Tensor& ids);

}  // namespace pt::cuda
