// What the AdamW dev programs share: the update's scalars, its arithmetic as the production kernel
// does it (cuda/optim_kernels.cu adamw_kernel, every rounding explicit), and the five arrays an
// update touches, allocated and refilled with the same values before every checked run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "dev_check.h"
#include "dev_fill.cuh"

struct Scalars {
  float decay, step_size, bc2_sqrt, one_minus_beta1, beta2, one_minus_beta2, eps;
};

__device__ __forceinline__ void adamw_one(const Scalars& h, float& p, float g, float& m, float& v) {
  m = __fmaf_rn(h.one_minus_beta1, __fsub_rn(g, m), m);
  v = __fmaf_rn(h.beta2, v, __fmul_rn(__fmul_rn(h.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), h.bc2_sqrt), h.eps);
  p = __fsub_rn(__fmul_rn(p, h.decay), __fdiv_rn(__fmul_rn(h.step_size, m), denom));
}

// Parameters, gradients, both moments (fp32) and the parameters' bf16 copy: 18 bytes an element.
struct AdamwBuffers {
  float *p, *g, *m, *v;
  __nv_bfloat16* lowp;
  explicit AdamwBuffers(int64_t n) {
    DEV_CHECK_CUDA(cudaMalloc(&p, n * 4));
    DEV_CHECK_CUDA(cudaMalloc(&g, n * 4));
    DEV_CHECK_CUDA(cudaMalloc(&m, n * 4));
    DEV_CHECK_CUDA(cudaMalloc(&v, n * 4));
    DEV_CHECK_CUDA(cudaMalloc(&lowp, n * 2));
  }
  // The inputs of a checked run: the same values every time.
  void reset(int64_t n) {
    fill<<<1024, 256>>>(n, p, 1, 0.2f, 0.0f);
    fill<<<1024, 256>>>(n, g, 2, 0.02f, 0.0f);
    fill<<<1024, 256>>>(n, m, 3, 0.01f, 0.0f);
    fill<<<1024, 256>>>(n, v, 4, 1e-4f, 1e-4f);
    DEV_CHECK_CUDA(cudaGetLastError());
  }
};

// The elements to update: argv[1], or `fallback` without it; one that is not a positive multiple of
// `multiple` (the elements a thread takes at once) ends the program with a line on stderr.
inline int64_t adamw_elements(int argc, char** argv, int64_t fallback, int multiple) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : fallback;
  if (n <= 0 || n % multiple) {
    std::fprintf(stderr, "n must be a positive multiple of %d\n", multiple);
    std::exit(2);
  }
  return n;
}
