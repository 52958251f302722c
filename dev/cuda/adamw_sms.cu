// How fast can k SMs alone stream the AdamW update? (issue 16: the update under the forward.)
// The kernel-trace of an XL step shows the forward's GEMMs waiting for SMs held by the update's
// blocks (docs/reports/2026-11-26_kernel-trace-chained-launch_h100.md). An update confined to k SMs would leave the
// others to the GEMMs (which --update-sms already keeps off k SMs), if k SMs can move the update's
// bytes fast enough. This probe times the production arithmetic (adamw_one, as cuda/optim_kernels.cu)
// on a persistent grid of k blocks of 1024 threads, one block an SM (its dynamic shared memory
// keeps a second block off the SM), each thread U groups of 4 elements in flight, against the
// covering grid on every SM; results checked bit for bit against the covering grid.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o adamw_sms dev/cuda/adamw_sms.cu
//   ./adamw_sms [n_elements]        (needs 18 bytes per element of GPU memory; default 500 M)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dev_adamw.cuh"
#include "dev_check.h"

__device__ __forceinline__ void store_bf16x4(__nv_bfloat16* p, const float4& v) {
  __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
  uint2 raw;
  std::memcpy(&raw.x, &a, 4);
  std::memcpy(&raw.y, &b, 4);
  *reinterpret_cast<uint2*>(p) = raw;
}

// U groups of 4 per thread per trip, every load of the trip issued before the first update.
template <int U>
__global__ void __launch_bounds__(1024, 1)
    adamw_groups(int64_t n, Scalars h, float coef, float* p, const float* g, float* m, float* v, __nv_bfloat16* lowp) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * 4;
  for (int64_t c0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4; c0 < n; c0 += stride * U) {
    float4 pv[U], gv[U], mv[U], vv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * stride;
      if (c + 4 <= n) {
        pv[u] = *reinterpret_cast<const float4*>(p + c);
        gv[u] = *reinterpret_cast<const float4*>(g + c);
        mv[u] = *reinterpret_cast<const float4*>(m + c);
        vv[u] = *reinterpret_cast<const float4*>(v + c);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * stride;
      if (c + 4 > n) continue;
      float* pp = &pv[u].x;
      float* gg = &gv[u].x;
      float* mm = &mv[u].x;
      float* vvv = &vv[u].x;
#pragma unroll
      for (int k = 0; k < 4; ++k) adamw_one(h, pp[k], __fmul_rn(gg[k], coef), mm[k], vvv[k]);
      *reinterpret_cast<float4*>(p + c) = pv[u];
      *reinterpret_cast<float4*>(m + c) = mv[u];
      *reinterpret_cast<float4*>(v + c) = vv[u];
      store_bf16x4(lowp + c, pv[u]);
    }
  }
}

int main(int argc, char** argv) {
  const int64_t n = adamw_elements(argc, argv, 500000000LL, 4);
  const cudaDeviceProp prop = dev_properties();
  const int sms = prop.multiProcessorCount;
  AdamwBuffers b(n);
  const Scalars h{0.9999f, 1e-3f, 0.5f, 0.1f, 0.95f, 0.05f, 1e-8f};
  const float coef = 0.75f;
  const double bytes = double(n) * 30;  // read p g m v; write p m v; write the bf16 copy
  const int64_t check_n = std::min<int64_t>(n, 1 << 22);
  std::vector<float> want(check_n), got(check_n);
  cudaEvent_t e0, e1;
  DEV_CHECK_CUDA(cudaEventCreate(&e0));
  DEV_CHECK_CUDA(cudaEventCreate(&e1));
  // One block an SM: a block asks for more than half the SM's shared memory.
  const int pin_smem = int(prop.sharedMemPerMultiprocessor / 2 + 1024);
  auto run = [&](const char* what, auto kernel, unsigned grid, unsigned block, int smem, bool ref) {
    DEV_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    b.reset(n);
    kernel<<<grid, block, smem>>>(n, h, coef, b.p, b.g, b.m, b.v, b.lowp);
    DEV_CHECK_CUDA(cudaGetLastError());
    DEV_CHECK_CUDA(cudaMemcpy(ref ? want.data() : got.data(), b.p, check_n * 4, cudaMemcpyDeviceToHost));
    const bool same = ref || std::memcmp(want.data(), got.data(), check_n * 4) == 0;
    DEV_CHECK_CUDA(cudaEventRecord(e0));
    const int reps = 3;
    for (int r = 0; r < reps; ++r) kernel<<<grid, block, smem>>>(n, h, coef, b.p, b.g, b.m, b.v, b.lowp);
    DEV_CHECK_CUDA(cudaEventRecord(e1));
    DEV_CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    DEV_CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    ms /= reps;
    std::printf("%-40s %9.3f ms %8.1f GB/s %8.1f GB/s an SM  %s\n", what, ms, bytes / ms / 1e6,
                bytes / ms / 1e6 / (grid < unsigned(sms) ? grid : sms), same ? "" : "BITS DIFFER");
  };
  std::printf("%s, %d SMs, n = %lld (%.2f GB an update)\n", prop.name, sms, (long long)n, bytes / 1e9);
  run("covering grid, 256 threads (production)", adamw_groups<1>, unsigned((n / 4 + 255) / 256), 256, 0, true);
  for (int k : {8, 16, 24, 32, 48, 66, 132}) {
    char name[64];
    std::snprintf(name, sizeof name, "k = %d SMs, 1024 threads, U = 1", k);
    run(name, adamw_groups<1>, k, 1024, pin_smem, false);
    std::snprintf(name, sizeof name, "k = %d SMs, 1024 threads, U = 2", k);
    run(name, adamw_groups<2>, k, 1024, pin_smem, false);
    std::snprintf(name, sizeof name, "k = %d SMs, 1024 threads, U = 4", k);
    run(name, adamw_groups<4>, k, 1024, pin_smem, false);
  }
  return 0;
}
