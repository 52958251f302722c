// The memory-bound passes of the step at llm.c's working point (XL, 16 × 1024 tokens: SwiGLU on
// 16384 × 6400, RMSNorm and RoPE on 16384 × 1600) against the streaming rate of the same read/
// write mix on the same GPU. SwiGLU's forward and backward are timed in launch variants (grid,
// packs a thread, cache hints), each checked bit for bit against v0, the production structure
// (cuda/elementwise.cu: a capped grid-stride loop, one 16-byte pack a thread and iteration, the
// same arithmetic); the winner moves into cuda/elementwise.cu. The mixes carry no arithmetic:
// they are the floor a pass with that many bytes in and out can reach
// (docs/reports/2026-11-27_gemm-choice-covering-grid_h100.md).
//
//   dev/cuda/build.sh stream_variants        (here; then on the GPU machine:)
//   .devbundle/stream_variants [rows]        (default 16384; needs about 2 GB at that)
//   or dev/experiments/probes.sh dev-variants
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dev_check.h"
#include "dev_fill.cuh"
#include "dev_timing.cuh"

namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 256;
constexpr int kPack = 8;  // bf16 elements in a 16-byte word

__device__ __forceinline__ float sigmoidf(float a) { return 1.0f / (1.0f + expf(-a)); }
// The production arithmetic (cuda/elementwise.cu Swiglu, SwigluGradH1, SwigluGradH3).
__device__ __forceinline__ float swiglu(float a, float b) { return a * sigmoidf(a) * b; }
__device__ __forceinline__ float swiglu_dh1(float d, float a, float b) {
  const float s = sigmoidf(a);
  return d * b * s * (1.0f + a * (1.0f - s));
}
__device__ __forceinline__ float swiglu_dh3(float d, float a) { return d * a * sigmoidf(a); }

enum class Hint { Default, Stream };
template <Hint H>
__device__ __forceinline__ uint4 ld(const uint4* p) {
  if constexpr (H == Hint::Stream) return __ldcs(p);
  return *p;
}
template <Hint H>
__device__ __forceinline__ void st(uint4* p, uint4 v) {
  if constexpr (H == Hint::Stream)
    __stcs(p, v);
  else
    *p = v;
}
__device__ __forceinline__ void unpack(uint4 w, float (&f)[kPack]) {
  const bf16* e = reinterpret_cast<const bf16*>(&w);
#pragma unroll
  for (int i = 0; i < kPack; ++i) f[i] = __bfloat162float(e[i]);
}
__device__ __forceinline__ uint4 pack(const float (&f)[kPack]) {
  uint4 w;
  bf16* e = reinterpret_cast<bf16*>(&w);
#pragma unroll
  for (int i = 0; i < kPack; ++i) e[i] = __float2bfloat16(f[i]);
  return w;
}

// SwiGLU forward over `words` 16-byte words: U words a thread and iteration, all loads first.
// Grid-stride (the grid may be capped) or covering (stride larger than the work).
template <int U, Hint H>
__global__ void swiglu_fwd(int64_t words, uint4* g, const uint4* h1, const uint4* h3) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * U;
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x) * U + threadIdx.x; base < words; base += stride) {
    uint4 a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t w = base + int64_t(u) * blockDim.x;
      if (w < words) a[u] = ld<H>(h1 + w), b[u] = ld<H>(h3 + w);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t w = base + int64_t(u) * blockDim.x;
      if (w >= words) break;
      float x[kPack], y[kPack], r[kPack];
      unpack(a[u], x);
      unpack(b[u], y);
#pragma unroll
      for (int i = 0; i < kPack; ++i) r[i] = swiglu(x[i], y[i]);
      st<H>(g + w, pack(r));
    }
  }
}

// SwiGLU backward with the recomputed product (the `--recompute swiglu` form): dg, h1, h3 in;
// dh1, dh3, g out.
template <int U, Hint H>
__global__ void swiglu_bwd(int64_t words, uint4* dh1, uint4* dh3, uint4* g, const uint4* dg, const uint4* h1,
                           const uint4* h3) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * U;
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x) * U + threadIdx.x; base < words; base += stride) {
    uint4 d[U], a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t w = base + int64_t(u) * blockDim.x;
      if (w < words) d[u] = ld<H>(dg + w), a[u] = ld<H>(h1 + w), b[u] = ld<H>(h3 + w);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t w = base + int64_t(u) * blockDim.x;
      if (w >= words) break;
      float x[kPack], y[kPack], z[kPack], r1[kPack], r3[kPack], f[kPack];
      unpack(d[u], x);
      unpack(a[u], y);
      unpack(b[u], z);
#pragma unroll
      for (int i = 0; i < kPack; ++i) {
        r1[i] = swiglu_dh1(x[i], y[i], z[i]);
        r3[i] = swiglu_dh3(x[i], y[i]);
        f[i] = swiglu(y[i], z[i]);
      }
      st<H>(dh1 + w, pack(r1));
      st<H>(dh3 + w, pack(r3));
      st<H>(g + w, pack(f));
    }
  }
}

// A read/write mix with no arithmetic: R streams in, W streams out, one word each a thread
// (covering grid). Output o aliases input o when o < inplace (a read-modify-write stream).
template <int R, int W>
struct Streams {
  const uint4* in[R];
  uint4* out[W];
};
template <int R, int W>
__global__ void mix(int64_t words, Streams<R, W> s) {
  const int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= words) return;
  uint4 v[R];
#pragma unroll
  for (int r = 0; r < R; ++r) v[r] = s.in[r][w];
  uint4 acc = v[0];
#pragma unroll
  for (int r = 1; r < R; ++r) acc.x ^= v[r].x, acc.y ^= v[r].y, acc.z ^= v[r].z, acc.w ^= v[r].w;
#pragma unroll
  for (int o = 0; o < W; ++o) s.out[o][w] = make_uint4(acc.x + o, acc.y, acc.z, acc.w);
}

void report(const char* name, float ms, double bytes, const char* check) {
  std::printf("%-46s %9.1f us %7.3f TB/s  %s\n", name, ms * 1e3, bytes / (ms * 1e-3) / 1e12, check);
}

bool same(const bf16* x, const bf16* y, size_t n) {
  std::vector<uint16_t> hx(n), hy(n);
  DEV_CHECK_CUDA(cudaMemcpy(hx.data(), x, n * 2, cudaMemcpyDeviceToHost));
  DEV_CHECK_CUDA(cudaMemcpy(hy.data(), y, n * 2, cudaMemcpyDeviceToHost));
  return hx == hy;
}

unsigned capped_grid(int64_t words, int sms) {
  return unsigned(std::min<int64_t>((words + kThreads - 1) / kThreads, int64_t(sms) * 16));
}
unsigned covering_grid(int64_t words, int u) { return unsigned((words + int64_t(kThreads) * u - 1) / (kThreads * u)); }

template <int R, int W>
void time_mix(const char* name, int64_t words, std::vector<uint4*> in, std::vector<uint4*> out) {
  Streams<R, W> s;
  for (int r = 0; r < R; ++r) s.in[r] = in[r];
  for (int o = 0; o < W; ++o) s.out[o] = out[o];
  const float ms = dev_median_ms([&] { mix<R, W><<<covering_grid(words, 1), kThreads>>>(words, s); });
  report(name, ms, double(words) * 16 * (R + W), "");
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 16384, F = 6400, C = 1600;
  int dev = 0, sms = 0;
  DEV_CHECK_CUDA(cudaGetDevice(&dev));
  DEV_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const cudaDeviceProp prop = dev_properties(dev);
  std::printf("%s, %d SMs; rows %lld, F %lld, C %lld\n", prop.name, sms, (long long)rows, (long long)F, (long long)C);

  const int64_t n = rows * F, words = n / kPack;
  std::vector<bf16*> buf(9);
  for (auto& p : buf) DEV_CHECK_CUDA(cudaMalloc(&p, size_t(n) * 2));
  float* tmp;
  DEV_CHECK_CUDA(cudaMalloc(&tmp, size_t(n) * 4));
  for (size_t i = 0; i < buf.size(); ++i) {
    fill<<<1024, 256>>>(n, tmp, uint32_t(i * 7919 + 1), 8.0f, 0.0f);
    to_bf16<<<1024, 256>>>(n, buf[i], tmp);
  }
  DEV_CHECK_CUDA(cudaFree(tmp));
  DEV_CHECK_CUDA(cudaDeviceSynchronize());
  auto w = [&](int i) { return reinterpret_cast<uint4*>(buf[i]); };
  // h1 = 0, h3 = 1, dg = 2; outputs 3.. (reference), 6.. (variant)
  const double fwd_bytes = double(n) * 2 * 3, bwd_bytes = double(n) * 2 * 6;

  std::printf("\nSwiGLU forward (h1, h3 in; g out), %.0f MB\n", fwd_bytes / 1e6);
  const float f0 = dev_median_ms(
      [&] { swiglu_fwd<1, Hint::Default><<<capped_grid(words, sms), kThreads>>>(words, w(3), w(0), w(1)); });
  report("v0 capped grid-stride, 1 word (production)", f0, fwd_bytes, "reference");
  auto fwd_variant = [&](const char* name, auto launch) {
    DEV_CHECK_CUDA(cudaMemset(buf[6], 0, size_t(n) * 2));
    const float ms = dev_median_ms(launch);
    report(name, ms, fwd_bytes, same(buf[3], buf[6], size_t(n)) ? "bit for bit" : "DIFFERS");
  };
  fwd_variant("v1 covering, 1 word",
              [&] { swiglu_fwd<1, Hint::Default><<<covering_grid(words, 1), kThreads>>>(words, w(6), w(0), w(1)); });
  fwd_variant("v2 covering, 2 words",
              [&] { swiglu_fwd<2, Hint::Default><<<covering_grid(words, 2), kThreads>>>(words, w(6), w(0), w(1)); });
  fwd_variant("v3 covering, 4 words",
              [&] { swiglu_fwd<4, Hint::Default><<<covering_grid(words, 4), kThreads>>>(words, w(6), w(0), w(1)); });
  fwd_variant("v4 covering, 1 word, evict-first",
              [&] { swiglu_fwd<1, Hint::Stream><<<covering_grid(words, 1), kThreads>>>(words, w(6), w(0), w(1)); });
  fwd_variant("v5 capped grid-stride, 2 words",
              [&] { swiglu_fwd<2, Hint::Default><<<capped_grid(words, sms), kThreads>>>(words, w(6), w(0), w(1)); });
  fwd_variant("v6 covering, 2 words, evict-first",
              [&] { swiglu_fwd<2, Hint::Stream><<<covering_grid(words, 2), kThreads>>>(words, w(6), w(0), w(1)); });
  time_mix<2, 1>("mix 2 in, 1 out (no arithmetic)", words, {w(0), w(1)}, {w(7)});

  std::printf("\nSwiGLU backward, g recomputed (dg, h1, h3 in; dh1, dh3, g out), %.0f MB\n", bwd_bytes / 1e6);
  const float b0 = dev_median_ms([&] {
    swiglu_bwd<1, Hint::Default><<<capped_grid(words, sms), kThreads>>>(words, w(3), w(4), w(5), w(2), w(0), w(1));
  });
  report("v0 capped grid-stride, 1 word (production)", b0, bwd_bytes, "reference");
  auto bwd_variant = [&](const char* name, auto launch) {
    for (int i = 6; i < 9; ++i) DEV_CHECK_CUDA(cudaMemset(buf[i], 0, size_t(n) * 2));
    const float ms = dev_median_ms(launch);
    const bool ok =
        same(buf[3], buf[6], size_t(n)) && same(buf[4], buf[7], size_t(n)) && same(buf[5], buf[8], size_t(n));
    report(name, ms, bwd_bytes, ok ? "bit for bit" : "DIFFERS");
  };
  bwd_variant("v1 covering, 1 word", [&] {
    swiglu_bwd<1, Hint::Default><<<covering_grid(words, 1), kThreads>>>(words, w(6), w(7), w(8), w(2), w(0), w(1));
  });
  bwd_variant("v2 covering, 2 words", [&] {
    swiglu_bwd<2, Hint::Default><<<covering_grid(words, 2), kThreads>>>(words, w(6), w(7), w(8), w(2), w(0), w(1));
  });
  bwd_variant("v4 covering, 1 word, evict-first", [&] {
    swiglu_bwd<1, Hint::Stream><<<covering_grid(words, 1), kThreads>>>(words, w(6), w(7), w(8), w(2), w(0), w(1));
  });
  bwd_variant("v5 capped grid-stride, 2 words", [&] {
    swiglu_bwd<2, Hint::Default><<<capped_grid(words, sms), kThreads>>>(words, w(6), w(7), w(8), w(2), w(0), w(1));
  });
  time_mix<3, 3>("mix 3 in, 3 out (no arithmetic)", words, {w(0), w(1), w(2)}, {w(6), w(7), w(8)});

  // RMSNorm and RoPE on rows × C: a unit is rows × C bf16 (an fp32 tensor is two units).
  const int64_t unit = rows * C / kPack;
  std::printf("\nRMSNorm and RoPE mixes on %lld × %lld (unit %.1f MB)\n", (long long)rows, (long long)C,
              unit * 16 / 1e6);
  std::vector<uint4*> u;
  for (int i = 0; i < 16; ++i) u.push_back(w(i / 4 + 3) + (i % 4) * unit);  // 16 disjoint units of scratch
  time_mix<1, 1>("copy 1 in, 1 out", 4 * unit, {u[0]}, {u[4]});
  time_mix<2, 1>("RMSNorm forward: fp32 x in, bf16 out", unit, {u[0], u[1]}, {u[2]});
  time_mix<5, 3>("RMSNorm backward: x, dy, dx in; dx, bf16 dx out", unit, {u[0], u[1], u[2], u[3], u[4]},
                 {u[3], u[4], u[5]});
  time_mix<2, 2>("RoPE: q, k in place", unit, {u[0], u[1]}, {u[0], u[1]});
  for (auto p : buf) DEV_CHECK_CUDA(cudaFree(p));
  return 0;
}
