// The sum kernel of the copy-engine collectives (comm_reduce.h).
#include "cuda/comm_reduce.h"

#include "cuda/common.cuh"

namespace pt::cuda {

namespace {

constexpr int kThreads = 1024;
// Packs a thread loads from one source before it adds any: a few CTAs must keep enough bytes in
// flight to run near the memory's rate (one load at a time held them to a quarter of it).
constexpr int kUnroll = 4;

struct Srcs {
  const void* p[kMaxCeRanks];
};

// 16-byte packs when every pointer is 16-byte aligned, one element a thread otherwise. The sum
// runs in rank order, so every rank that reduces the same chunk gets the same bits.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    ce_reduce_kernel(T* __restrict__ dst, Srcs srcs, int n_src, int64_t n, float scale, bool packed) {
  constexpr int kPack = 16 / sizeof(T);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t tail_from = 0;
  if (packed) {
    const int64_t packs = n / kPack;
    for (int64_t base = first; base < packs; base += stride * kUnroll) {
      float acc[kUnroll][kPack];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int k = 0; k < kPack; ++k) acc[u][k] = 0.0f;
      for (int s = 0; s < n_src; ++s) {
        const uint4* src = reinterpret_cast<const uint4*>(srcs.p[s]);
        uint4 raw[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t i = base + u * stride;
          raw[u] = i < packs ? src[i] : uint4{};
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const T* v = reinterpret_cast<const T*>(&raw[u]);
#pragma unroll
          for (int k = 0; k < kPack; ++k) acc[u][k] += to_float(v[k]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + u * stride;
        if (i >= packs) break;
        uint4 out;
        T* o = reinterpret_cast<T*>(&out);
#pragma unroll
        for (int k = 0; k < kPack; ++k) o[k] = from_float<T>(acc[u][k] * scale);
        reinterpret_cast<uint4*>(dst)[i] = out;
      }
    }
    tail_from = packs * kPack;
  }
  for (int64_t i = tail_from + first; i < n; i += stride) {
    float acc = 0.0f;
    for (int s = 0; s < n_src; ++s) acc += to_float(static_cast<const T*>(srcs.p[s])[i]);
    dst[i] = from_float<T>(acc * scale);
  }
}

}  // namespace

void ce_reduce(cudaStream_t s, const CeReduceParams& p, int blocks) {
  PT_CHECK(p.n_src >= 1 && p.n_src <= kMaxCeRanks, "ce_reduce: " + std::to_string(p.n_src) + " sources");
  if (p.n <= 0) return;
  Srcs srcs{};
  bool packed = aligned16(p.dst);
  for (int i = 0; i < p.n_src; ++i) {
    srcs.p[i] = p.src[i];
    packed = packed && aligned16(p.src[i]);
  }
  const int64_t needed = ceil_div(p.n, int64_t(kThreads) * (packed ? kUnroll * 16 / dtype_size(p.dtype) : 1));
  const int grid = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, needed)));
  switch (p.dtype) {
    case DType::F32:
      ce_reduce_kernel<float>
          <<<grid, kThreads, 0, s>>>(static_cast<float*>(p.dst), srcs, p.n_src, p.n, p.scale, packed);
      break;
    case DType::BF16:
      ce_reduce_kernel<__nv_bfloat16>
          <<<grid, kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(p.dst), srcs, p.n_src, p.n, p.scale, packed);
      break;
    default: PT_FAIL(std::string("ce_reduce: fp32 or bf16 buffers only, got ") + dtype_name(p.dtype));
  }
  PT_CUDA_CHECK_LAUNCH();
}

}  // namespace pt::cuda
