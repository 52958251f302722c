// AdamW kernel variants over one flat fp32 range (XL's 2.0 B parameters by default), timed
// against the copy rate of the same GPU, each checked bit for bit against the production
// variant (v0, whose arithmetic cuda/optim_kernels.cu shares and tests/gpu checks against the
// fp64/CPU reference). The winner moves into cuda/optim_kernels.cu; this file keeps the losers'
// numbers reproducible (docs/reports/2026-11-23_optimizer-hbm-speed_h200.md).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o adamw_variants dev/cuda/adamw_variants.cu
//   ./adamw_variants [n_elements]        (needs 18 bytes per element of GPU memory)
//
// What varies: elements per thread and iteration (N = 4: one 16-byte word per array; N = 8:
// two), the cache policy of the streaming loads and stores (default, or .cs "evict first":
// every byte is touched once, so keeping it in L2 only evicts the next loads' lines), and the
// grid (16 blocks per SM with a grid-stride loop, or one group per thread).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dev_adamw.cuh"
#include "dev_check.h"

enum class Hint { Default, Stream };

template <Hint H>
__device__ __forceinline__ float4 ld4(const float* p) {
  if constexpr (H == Hint::Stream)
    return __ldcs(reinterpret_cast<const float4*>(p));
  else
    return *reinterpret_cast<const float4*>(p);
}
template <Hint H>
__device__ __forceinline__ void st4(float* p, float4 v) {
  if constexpr (H == Hint::Stream)
    __stcs(reinterpret_cast<float4*>(p), v);
  else
    *reinterpret_cast<float4*>(p) = v;
}
template <Hint H>
__device__ __forceinline__ void st_bf16x4(__nv_bfloat16* p, const float* v) {
  __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]), b = __floats2bfloat162_rn(v[2], v[3]);
  uint2 raw;
  std::memcpy(&raw.x, &a, 4);
  std::memcpy(&raw.y, &b, 4);
  if constexpr (H == Hint::Stream)
    __stcs(reinterpret_cast<uint2*>(p), raw);
  else
    *reinterpret_cast<uint2*>(p) = raw;
}

template <int N, Hint H>
__global__ void adamw(int64_t n, Scalars h, float coef, float* p, const float* g, float* m, float* v,
                      __nv_bfloat16* lowp) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * N;
  for (int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * N; c + N <= n; c += stride) {
    float pv[N], gv[N], mv[N], vv[N];
#pragma unroll
    for (int w = 0; w < N / 4; ++w) {
      *reinterpret_cast<float4*>(pv + 4 * w) = ld4<H>(p + c + 4 * w);
      *reinterpret_cast<float4*>(gv + 4 * w) = ld4<H>(g + c + 4 * w);
      *reinterpret_cast<float4*>(mv + 4 * w) = ld4<H>(m + c + 4 * w);
      *reinterpret_cast<float4*>(vv + 4 * w) = ld4<H>(v + c + 4 * w);
    }
#pragma unroll
    for (int k = 0; k < N; ++k) adamw_one(h, pv[k], __fmul_rn(gv[k], coef), mv[k], vv[k]);
#pragma unroll
    for (int w = 0; w < N / 4; ++w) {
      st4<H>(p + c + 4 * w, *reinterpret_cast<float4*>(pv + 4 * w));
      st4<H>(m + c + 4 * w, *reinterpret_cast<float4*>(mv + 4 * w));
      st4<H>(v + c + 4 * w, *reinterpret_cast<float4*>(vv + 4 * w));
      st_bf16x4<H>(lowp + c + 4 * w, pv + 4 * w);
    }
  }
}

__global__ void copy4(int64_t n, const float* __restrict__ x, float* __restrict__ y) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * 4;
  for (int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4; c + 4 <= n; c += stride)
    __stcs(reinterpret_cast<float4*>(y + c), __ldcs(reinterpret_cast<const float4*>(x + c)));
}

int main(int argc, char** argv) {
  const int64_t n = adamw_elements(argc, argv, 2000000000LL, 8);
  const cudaDeviceProp prop = dev_properties();
  const int sms = prop.multiProcessorCount;
  AdamwBuffers b(n);
  const int64_t check_n = std::min<int64_t>(n, 1 << 24);  // bits compared on the first 16 M
  std::vector<float> want_p(check_n), got_p(check_n);
  Scalars h{float(1.0 - 1e-3 * 0.1),
            float(1e-3 / (1.0 - std::pow(0.9, 10.0))),
            float(std::sqrt(1.0 - std::pow(0.95, 10.0))),
            0.1f,
            0.95f,
            0.05f,
            1e-8f};
  const float coef = 0.75f;
  cudaEvent_t e0, e1;
  DEV_CHECK_CUDA(cudaEventCreate(&e0));
  DEV_CHECK_CUDA(cudaEventCreate(&e1));
  const double bytes = double(n) * (16 + 12 + 2);  // read p g m v; write p m v; write the bf16 copy
  std::printf("%s, %d SMs, n = %lld (%.1f GB per step)\n", prop.name, sms, (long long)n, bytes / 1e9);

  auto time_ms = [&](auto launch, int reps) {
    launch();  // warm
    DEV_CHECK_CUDA(cudaEventRecord(e0));
    for (int r = 0; r < reps; ++r) launch();
    DEV_CHECK_CUDA(cudaEventRecord(e1));
    DEV_CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    DEV_CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    return double(ms) / reps;
  };

  // The copy rate: p -> m, 8 bytes per element.
  {
    const double ms = time_ms([&] { copy4<<<sms * 16, 256>>>(n, b.p, b.m); }, 5);
    std::printf("%-34s %8.3f ms  %7.1f GB/s\n", "copy (ldcs/stcs float4)", ms, 8.0 * n / ms / 1e6);
    const double ms2 = time_ms([&] { DEV_CHECK_CUDA(cudaMemcpyAsync(b.m, b.p, n * 4, cudaMemcpyDeviceToDevice)); }, 5);
    std::printf("%-34s %8.3f ms  %7.1f GB/s\n", "cudaMemcpy D2D", ms2, 8.0 * n / ms2 / 1e6);
  }

  auto run = [&](const char* name, auto kernel, int n_per, unsigned grid, bool is_ref) {
    b.reset(n);
    kernel<<<grid, 256>>>(n, h, coef, b.p, b.g, b.m, b.v, b.lowp);  // one step: the bits checked
    DEV_CHECK_CUDA(cudaGetLastError());
    DEV_CHECK_CUDA(cudaMemcpy(is_ref ? want_p.data() : got_p.data(), b.p, check_n * 4, cudaMemcpyDeviceToHost));
    const bool same = is_ref || std::memcmp(want_p.data(), got_p.data(), check_n * 4) == 0;
    const double ms = time_ms([&] { kernel<<<grid, 256>>>(n, h, coef, b.p, b.g, b.m, b.v, b.lowp); }, 5);
    std::printf("%-34s %8.3f ms  %7.1f GB/s  %s\n", name, ms, bytes / ms / 1e6, same ? "bits equal v0" : "BITS DIFFER");
    (void)n_per;
  };
  const unsigned capped = sms * 16;
  auto full = [&](int N) { return unsigned((n / N + 255) / 256); };
  run("v0 N8 default, 16 blk/SM (prod)", adamw<8, Hint::Default>, 8, capped, true);
  run("v1 N4 default, 16 blk/SM", adamw<4, Hint::Default>, 4, capped, false);
  run("v2 N8 stream (.cs), 16 blk/SM", adamw<8, Hint::Stream>, 8, capped, false);
  run("v3 N4 stream (.cs), 16 blk/SM", adamw<4, Hint::Stream>, 4, capped, false);
  run("v4 N4 stream (.cs), full grid", adamw<4, Hint::Stream>, 4, full(4), false);
  run("v5 N8 stream (.cs), full grid", adamw<8, Hint::Stream>, 8, full(8), false);
  run("v6 N4 default, full grid", adamw<4, Hint::Default>, 4, full(4), false);
  run("v7 N4 stream (.cs), 8 blk/SM", adamw<4, Hint::Stream>, 4, sms * 8, false);
  return 0;
}
