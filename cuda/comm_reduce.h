#pragma once
// The one SM pass of the copy-engine collectives (parallel/comm_ce.cpp): the copy engines bring
// every rank's piece of a chunk into this GPU's memory, and this kernel sums them, in rank order,
// into the chunk. Plain C++ header.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace pt::cuda {

// Most ranks one node's copy-engine collectives serve (the kernel's argument holds a pointer each).
constexpr int kMaxCeRanks = 8;

// dst[i] = scale · (src[0][i] + src[1][i] + … + src[n_src-1][i]), summed in fp32 in that order and
// rounded once to dtype (fp32 or bf16). A src may be dst itself. At most `blocks` CTAs of 1024
// threads (one SM each).
struct CeReduceParams {
  void* dst = nullptr;
  const void* src[kMaxCeRanks] = {};
  int n_src = 0;
  int64_t n = 0;  // elements
  DType dtype = DType::F32;
  float scale = 1.0f;
};
void ce_reduce(cudaStream_t s, const CeReduceParams& p, int blocks);

}  // namespace pt::cuda
