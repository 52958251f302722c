// Rotary embedding on strided (B, H, T, D) views: rope_packed_kernel where every row starts on a
// 16-byte boundary and D is a multiple of 8 (the model's q and k), rope_kernel elsewhere.
//
// rope_kernel: a pair's angle depends on its token and
// frequency only: thread (i, t, b, head group) computes sincos once and rotates pair i of
// token t in kHeads heads of batch b, their loads issued together; the block's 32 inverse
// frequencies are computed once into shared memory; a warp covers 32 consecutive pairs of a
// row, so loads coalesce whatever the outer strides are; index arithmetic is 32-bit.
//
// Each thread's chain of latencies (sincos, then its loads) bounds it, so more threads in flight
// pay more than fewer instructions; a block-per-token-pair variant with the angles in shared
// memory lost to its index divisions.
#include <algorithm>
#include <type_traits>

#include "cuda/chained_launch.cuh"
#include "cuda/common.cuh"
#include "cuda/rope.h"

namespace pt::cuda {

namespace {

constexpr int kHeads = 8;  // heads a thread rotates per token

// Pair i's inverse frequency, as PyTorch's fp32 tables: 1 / theta^(2i/D) (D = 2·half); the angle
// at position t is t · inv_freq. Every kernel here (and the angle table) computes it this way,
// so the table's (cos, sin) are the rotating kernels' bit for bit.
__device__ __forceinline__ float rope_inv_freq(int pair, int half, float theta) {
  return 1.0f / powf(theta, float(2 * pair) / float(2 * half));
}

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
  begin_chained_kernel();  // launched by launch_chained
  __shared__ float inv_freq[32];
  const int i = blockIdx.x * 32 + threadIdx.x;
  if (threadIdx.y == 0) inv_freq[threadIdx.x] = rope_inv_freq(i, p.half, p.theta);
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

// Packed rows (D a multiple of 8, every row 16-byte aligned): thread (j, t) rotates pairs
// 4j..4j+3 of token t — one 16-byte pack of bf16 — in kHeads heads, its four sincos computed
// once for all of them, q and k in one launch: rope_kernel's 4-byte loads ran at under half the
// copy rate; 128-thread blocks with the packs kept as loaded beat 256 threads holding floats
// (docs/reports/2026-11-24_memory-bound-kernels_h100-h200.md).
template <typename T>
__global__ void __launch_bounds__(128) rope_packed_kernel(RopeParams p, T* out, const T* in) {
  begin_chained_kernel();  // launched by launch_chained
  constexpr int kPairs = kPack / 2;
  const int t = blockIdx.x * blockDim.y + threadIdx.y;
  if (t >= p.tokens) return;
  const int j = threadIdx.x;  // pack of the row: pairs kPairs·j …
  const int b = blockIdx.z, h0 = blockIdx.y * kHeads;
  const int heads = min(kHeads, p.heads - h0);
  float s[kPairs], c[kPairs];
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {  // as rope_kernel's angles, bit for bit
    sincosf(float(t) * rope_inv_freq(kPairs * j + i, p.half, p.theta), &s[i], &c[i]);
    s[i] *= p.sign;
  }
  const T* in_t = in + b * p.in_b + h0 * p.in_h + t * p.in_t + kPack * j;
  T* out_t = out + b * p.out_b + h0 * p.out_h + t * p.out_t + kPack * j;
  // Every load first (out may be in), kept as loaded (bf16: 4 registers a pack, not 8 floats).
  RawPack<kPack, T> raw[kHeads];
#pragma unroll
  for (int k = 0; k < kHeads; ++k)
    if (k < heads) raw[k].load(in_t + k * p.in_h);
#pragma unroll
  for (int k = 0; k < kHeads; ++k)
    if (k < heads) {
      float x[kPack], y[kPack];
      raw[k].to_floats(x);
#pragma unroll
      for (int i = 0; i < kPairs; ++i) {
        y[2 * i] = x[2 * i] * c[i] - x[2 * i + 1] * s[i];
        y[2 * i + 1] = x[2 * i] * s[i] + x[2 * i + 1] * c[i];
      }
      store_pack<kPack>(out_t + k * p.out_h, y);
    }
}

// table[t][i] = (cos, sin) of pair i's angle at position t: one thread per entry.
__global__ void rope_table_kernel(int64_t entries, int half, float theta, float2* table) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= entries) return;
  const int t = int(idx / half), pair = int(idx % half);
  float s, c;
  sincosf(float(t) * rope_inv_freq(pair, half, theta), &s, &c);
  table[idx] = make_float2(c, s);
}

}  // namespace

void rope_table(cudaStream_t s, Tensor& table, double theta) {
  const int64_t positions = table.size(0), half = table.size(1), entries = positions * half;
  PT_CHECK(positions <= INT32_MAX && half <= INT32_MAX, "rope table: at most 2^31 positions and pairs");
  if (entries == 0) return;
  rope_table_kernel<<<grid_covering(entries, 256), 256, 0, s>>>(entries, int(half), float(theta),
                                                                static_cast<float2*>(table.data()));
  PT_CUDA_CHECK_LAUNCH();
}

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
  dispatch_float(in.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    // 16-byte packs of kPack elements: every row of in and out starts on one.
    const auto packed_rows = [](const Tensor& x) {
      return aligned16(x.data()) && x.stride(0) % kPack == 0 && x.stride(1) % kPack == 0 && x.stride(2) % kPack == 0;
    };
    if (half % (kPack / 2) == 0 && packed_rows(in) && packed_rows(out) && B <= 65535) {
      const int packs = int(half / (kPack / 2));
      const dim3 block(unsigned(packs), unsigned(std::max(1, 128 / packs)));
      const dim3 grid(unsigned(ceil_div(T, int64_t(block.y))), unsigned(groups), unsigned(B));
      if (packs <= 128) {
        launch_chained(rope_packed_kernel<E>, grid, block, 0, s, p, static_cast<E*>(out.data()),
                       static_cast<const E*>(in.data()));
        PT_CUDA_CHECK_LAUNCH();
        return;
      }
    }
    const dim3 block(32, 8);
    const dim3 grid(unsigned(ceil_div(half, int64_t(32))), unsigned(std::min<int64_t>(ceil_div(T, int64_t(8)), 65535)),
                    unsigned(B * groups));
    const auto word_aligned = [](const Tensor& x) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(x.data());
      return a % (2 * sizeof(E)) == 0 && x.stride(0) % 2 == 0 && x.stride(1) % 2 == 0 && x.stride(2) % 2 == 0;
    };
    const bool word = word_aligned(in) && word_aligned(out);
    auto kernel = word ? rope_kernel<E, true> : rope_kernel<E, false>;
    launch_chained(kernel, grid, block, 0, s, p, static_cast<E*>(out.data()), static_cast<const E*>(in.data()));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::cuda
