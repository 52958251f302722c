// The dev programs' input pattern: x[i] = offset + scale·(a hash of i and seed, uniform in
// [−0.5, 0.5)), so every program and run sees the same values without a host copy.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

__global__ void fill(int64_t n, float* x, uint32_t seed, float scale, float offset) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t s = uint32_t(i) * 2654435761u ^ seed;
    s ^= s >> 13;
    s *= 0x5bd1e995u;
    s ^= s >> 15;
    x[i] = offset + scale * (float(s & 0xffffff) / float(0x1000000) - 0.5f);
  }
}

// The same pattern in bf16: a float fill rounded once to nearest even.
__global__ void to_bf16(int64_t n, __nv_bfloat16* out, const float* in) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(in[i]);
}
