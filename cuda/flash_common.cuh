#pragma once
// What every flash-attention kernel family shares (mma.sync, wgmma, fp32): the masking
// convention, quad reductions over an accumulator row, and the per-(batch, head) pointers into
// the strided (B, H, T, D) views of FlashParams.
#include "cuda/common.cuh"
#include "cuda/flash_params.h"

namespace pt::cuda {

constexpr float kLog2e = 1.4426950408889634f;
// Masked (key after query) scores get this added: the reference implementation's convention.
constexpr float kMaskedScoreBias = -1e6f;

// Max and sum over the 4 lanes (one quad) that hold the same accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Row `row` of head h of batch b in a (B, H, T, D) view with strides s (D contiguous).
template <typename T>
__device__ __forceinline__ T* head_row(const void* base, const RowStrides& s, int b, int h, int64_t row = 0) {
  return static_cast<T*>(const_cast<void*>(base)) + b * s.batch + h * s.head + row * s.row;
}

}  // namespace pt::cuda
