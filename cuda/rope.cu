// Rotary embedding on strided (B, H, T, D) views. A pair's angle depends on its token and
// frequency only: thread (i, t, b, head group) computes sincos once and rotates pair i of
// token t in kHeads heads of batch b, their loads issued together; the block's 32 inverse
// frequencies are computed once into shared memory; a warp covers 32 consecutive pairs of a
// row, so loads coalesce whatever the outer strides are; index arithmetic is 32-bit.
//
// Measured per call on XL's q (6.5 MB: 2048 tokens × 25 heads × 64, ncu on an H200): the first
// version (one thread per pair and row, its own powf, sincos and 64-bit divisions, 2-byte
// loads) 20.7 us, 317 GB/s; this one 17.7 us at 83 registers and 22 % occupancy, 9.9 us capped
// at 64 registers (41 %): each thread's chain of latencies (sincos, then its loads) is what
// bounds it, so more threads in flight is what pays. A block-per-token-pair variant with the
// angles in shared memory ran 18.4 us (127 instructions per pair: its index divisions).
#include <algorithm>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/rope.h"

namespace pt::cuda {

namespace {

constexpr int kHeads = 8;  // heads a thread rotates per token

struct RopeParams {
  int heads, tokens, head_groups, half;  // head_groups = ceil(H / kHeads); half = D / 2 pairs
  int64_t in_b, in_h, in_t;              // strides of in (elements); stride of D is 1
  int64_t out_b, out_h, out_t;
  float theta;
  float sign;  // +1 forward, -1 inverse
};

// A pair's two elements as floats, and back: one 4- or 8-byte word when kWord (the pair is
// aligned to twice the element size), else two element accesses.
template <bool kWord, typename T>
__device__ __forceinline__ void load_two(const T* x, float& a, float& b) {
  if constexpr (kWord) {
    using W = std::conditional_t<sizeof(T) == 2, uint32_t, uint2>;
    const W raw = *reinterpret_cast<const W*>(x);
    const T* e = reinterpret_cast<const T*>(&raw);
    a = to_float(e[0]);
    b = to_float(e[1]);
  } else {
    a = to_float(x[0]);
    b = to_float(x[1]);
  }
}
template <bool kWord, typename T>
__device__ __forceinline__ void store_two(T* y, float a, float b) {
  if constexpr (kWord) {
    using W = std::conditional_t<sizeof(T) == 2, uint32_t, uint2>;
    W raw;
    T* e = reinterpret_cast<T*>(&raw);
    e[0] = from_float<T>(a);
    e[1] = from_float<T>(b);
    *reinterpret_cast<W*>(y) = raw;
  } else {
    y[0] = from_float<T>(a);
    y[1] = from_float<T>(b);
  }
}

// At most 64 registers a thread (4 blocks of 256 per SM): see the top of the file.
template <typename T, bool kWord>
__global__ void __launch_bounds__(256, 4) rope_kernel(RopeParams p, T* out, const T* in) {
  __shared__ float inv_freq[32];
  const int i = blockIdx.x * 32 + threadIdx.x;
  // As PyTorch's tables: inv_freq = 1 / theta^(2i/D) and angle = t · inv_freq, both fp32.
  if (threadIdx.y == 0) inv_freq[threadIdx.x] = 1.0f / powf(p.theta, float(2 * i) / float(2 * p.half));
  __syncthreads();
  if (i >= p.half) return;
  const int b = blockIdx.z / p.head_groups, h0 = (blockIdx.z % p.head_groups) * kHeads;
  const int heads = min(kHeads, p.heads - h0);
  const T* in_bh = in + b * p.in_b + h0 * p.in_h + 2 * i;
  T* out_bh = out + b * p.out_b + h0 * p.out_h + 2 * i;
  for (int t = blockIdx.y * blockDim.y + threadIdx.y; t < p.tokens; t += gridDim.y * blockDim.y) {
    float s, c;
    sincosf(float(t) * inv_freq[threadIdx.x], &s, &c);
    s *= p.sign;
    float x0[kHeads], x1[kHeads];
#pragma unroll
    for (int k = 0; k < kHeads; ++k)  // every load first: y may be x
      if (k < heads) load_two<kWord>(in_bh + k * p.in_h + t * p.in_t, x0[k], x1[k]);
#pragma unroll
    for (int k = 0; k < kHeads; ++k)
      if (k < heads) store_two<kWord>(out_bh + k * p.out_h + t * p.out_t, x0[k] * c - x1[k] * s, x0[k] * s + x1[k] * c);
  }
}

}  // namespace

void rope(cudaStream_t s, Tensor& out, const Tensor& in, double theta, bool inverse) {
  const int64_t B = in.size(0), H = in.size(1), T = in.size(2), half = in.size(3) / 2;
  if (B == 0 || H == 0 || T == 0 || half == 0) return;
  const int64_t groups = ceil_div(H, int64_t(kHeads));
  PT_CHECK(T <= INT32_MAX && half <= INT32_MAX && B * groups <= 65535,
           "rope: at most 2^31 tokens and pairs, and 65535 batches × head groups of " + std::to_string(kHeads));
  RopeParams p;
  p.heads = int(H);
  p.tokens = int(T);
  p.head_groups = int(groups);
  p.half = int(half);
  p.in_b = in.stride(0);
  p.in_h = in.stride(1);
  p.in_t = in.stride(2);
  p.out_b = out.stride(0);
  p.out_h = out.stride(1);
  p.out_t = out.stride(2);
  p.theta = float(theta);
  p.sign = inverse ? -1.0f : 1.0f;
  const dim3 block(32, 8);
  const dim3 grid(unsigned(ceil_div(half, int64_t(32))), unsigned(std::min<int64_t>(ceil_div(T, int64_t(8)), 65535)),
                  unsigned(B * groups));
  dispatch_float(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto word_aligned = [](const Tensor& x) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(x.data());
      return a % (2 * sizeof(T)) == 0 && x.stride(0) % 2 == 0 && x.stride(1) % 2 == 0 && x.stride(2) % 2 == 0;
    };
    const bool word = word_aligned(in) && word_aligned(out);
    auto kernel = word ? rope_kernel<T, true> : rope_kernel<T, false>;
    kernel<<<grid, block, 0, s>>>(p, static_cast<T*>(out.data()), static_cast<const T*>(in.data()));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::cuda
