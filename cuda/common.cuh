#pragma once
// Shared device helpers: type conversions for fp32/bf16/fp64 storage, warp and block
// reductions, launch arithmetic. Included only by .cu files.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace pt::cuda {

constexpr int kWarpSize = 32;

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Load any storage type as float (or double for double), store back converting.
// clang-format off
template <typename T> __device__ __forceinline__ float to_float(T x) { return static_cast<float>(x); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x) { return static_cast<T>(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
// clang-format on

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces v over the block with warp_reduce (a reduction over the warp that every lane gets);
// the lanes past the last warp contribute `identity`. `scratch` holds one T per warp (32 suffice
// for 1024 threads). Every thread gets the result. Contains __syncthreads: call from all threads.
template <typename T, typename WarpReduce>
__device__ __forceinline__ T block_reduce(T v, T* scratch, T identity, WarpReduce warp_reduce) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int nwarps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_reduce(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : identity;
  return warp_reduce(v);
}
// Sum and maximum over the block (block_reduce).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, 0.0f, [](float x) { return warp_sum(x); });
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, -INFINITY, [](float x) { return warp_max(x); });
}

// FP8 current scaling's amax, as an epilogue of the kernel that writes a tensor: each block
// folds max |value| of what it stored into *amax with one atomic. Non-negative floats order as
// their bit patterns read as ints, so the result is exact and does not depend on which block
// finishes first. *amax must be 0 (or a lower bound) before the kernel.
__device__ __forceinline__ void atomic_max_nonnegative(float* addr, float v) {
  atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
}
// The block's max of every thread's m (non-negative; fmaxf drops NaN) into *amax when amax is
// set. Call from all threads (block_reduce syncs); scratch: kWarpSize floats.
__device__ __forceinline__ void block_amax_into(float* amax, float m, float* scratch) {
  if (amax == nullptr) return;  // uniform over the block: every thread returns or none
  m = block_max(m, scratch);
  if (threadIdx.x == 0) atomic_max_nonnegative(amax, m);
}
// v as it reads back from storage T (v rounded to T). Rounding to nearest is monotonic and
// symmetric, so the largest stored |value| is the largest |value| rounded: a kernel keeps max |v|
// of what it computes in fp32 and rounds it once, before block_amax_into.
template <typename T>
__device__ __forceinline__ float as_stored(float v) {
  return to_float(from_float<T>(v));
}
// The launcher's side: *amax (count floats) zeroed on s before the kernel's atomic max (and left
// 0 for an empty tensor); dispatch_amax calls f(std::true_type) when amax is set, else
// f(std::false_type), the kernels' kAmax template flag (no amax code in the kernels without it).
inline void zero_amax(cudaStream_t s, float* amax, int count = 1) {
  if (amax) PT_CUDA_CHECK(cudaMemsetAsync(amax, 0, size_t(count) * sizeof(float), s));
}
template <typename F>
void dispatch_amax(const float* amax, F&& f) {
  if (amax)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// ---- 16-byte packs ----------------------------------------------------------------------
// Elementwise and row-wise kernels move kPack consecutive elements per thread as 16-byte
// words (one LDG.128 for bf16, two for fp32) when every pointer is 16-byte aligned and the
// length allows; otherwise they fall back to one element at a time.
constexpr int kPack = 8;

// A pack is moved as whole machine words: 16-byte words (uint4) when the pack is a multiple
// of 16 bytes, else one 8-byte word (uint2: four bf16, the optimizer's mirror copy).
template <int Bytes>
struct PackWord {
  using type = uint4;
};
template <>
struct PackWord<8> {
  using type = uint2;
};

// A pack of N elements of T as machine words: kWords Words of kPerWord elements each.
template <int N, typename T>
struct PackLayout {
  static constexpr int kBytes = int(N * sizeof(T));
  static_assert(kBytes % 16 == 0 || kBytes == 8, "a pack is 8 bytes or whole 16-byte words");
  using Word = typename PackWord<(kBytes % 16 == 0) ? 16 : 8>::type;
  static constexpr int kWords = int(kBytes / sizeof(Word)), kPerWord = int(sizeof(Word) / sizeof(T));
};

// A pack as loaded, its elements still in T: a kernel that holds many packs in registers until it
// uses them (a row of bf16 takes half the registers of its floats) converts each where it is read.
template <int N, typename T>
struct RawPack {
  using L = PackLayout<N, T>;
  typename L::Word words[L::kWords];
  __device__ __forceinline__ void load(const T* p) {
#pragma unroll
    for (int w = 0; w < L::kWords; ++w) words[w] = reinterpret_cast<const typename L::Word*>(p)[w];
  }
  __device__ __forceinline__ void to_floats(float (&out)[N]) const {
#pragma unroll
    for (int w = 0; w < L::kWords; ++w) {
      const T* e = reinterpret_cast<const T*>(&words[w]);
#pragma unroll
      for (int i = 0; i < L::kPerWord; ++i) out[w * L::kPerWord + i] = to_float(e[i]);
    }
  }
};

template <int N, typename T>
__device__ __forceinline__ void load_pack(const T* p, float (&out)[N]) {
  RawPack<N, T> raw;
  raw.load(p);
  raw.to_floats(out);
}

template <int N, typename T>
__device__ __forceinline__ void store_pack(T* p, const float (&in)[N]) {
  using L = PackLayout<N, T>;
#pragma unroll
  for (int w = 0; w < L::kWords; ++w) {
    typename L::Word raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < L::kPerWord; ++i) e[i] = from_float<T>(in[w * L::kPerWord + i]);
    reinterpret_cast<typename L::Word*>(p)[w] = raw;
  }
}

// N elements at p as floats, and back: a 16-byte pack (N·sizeof(T) a multiple of 16) or, with
// N = 1, a single element (the scalar tail of a row or range).
template <int N, typename T>
__device__ __forceinline__ void load_n(const T* p, float (&v)[N]) {
  if constexpr (N == 1)
    v[0] = to_float(*p);
  else
    load_pack<N>(p, v);
}
template <int N, typename T>
__device__ __forceinline__ void store_n(T* p, const float (&v)[N]) {
  if constexpr (N == 1)
    *p = from_float<T>(v[0]);
  else
    store_pack<N>(p, v);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
inline bool aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; }

// ---- online softmax statistics ----------------------------------------------------------
// Running max m and sum s of exp(x - m) over a set of values; two sets combine exactly.
// Trivially constructible so that it can live in __shared__ memory; start from empty_stats().
struct MaxSum {
  float m, s;
};
__device__ __forceinline__ MaxSum empty_stats() { return {-INFINITY, 0.0f}; }
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};  // both empty (fully masked)
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
// Folds N values (already scaled; -inf for masked) into the running statistics.
template <int N>
__device__ __forceinline__ MaxSum fold(MaxSum acc, const float (&v)[N]) {
  float m = acc.m;
#pragma unroll
  for (int i = 0; i < N; ++i) m = fmaxf(m, v[i]);
  if (m == -INFINITY) return acc;
  float s = acc.s * expf(acc.m - m);
#pragma unroll
  for (int i = 0; i < N; ++i) s += expf(v[i] - m);
  return {m, s};
}
__device__ __forceinline__ MaxSum warp_combine(MaxSum v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o >>= 1) {
    MaxSum other{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = combine(v, other);
  }
  return v;
}
// Over the block (block_reduce); every thread gets the result. `scratch` holds 32 MaxSums.
__device__ __forceinline__ MaxSum block_combine(MaxSum v, MaxSum* scratch) {
  return block_reduce(v, scratch, empty_stats(), [](MaxSum x) { return warp_combine(x); });
}

// ---- launch arithmetic --------------------------------------------------------------------
// A device attribute of the current device, read once per device ordinal (an attribute's values
// are never 0 for the ones asked here, so 0 marks "not read yet").
template <cudaDeviceAttr kAttr>
int device_attribute() {
  static int cached[64] = {};
  int dev = 0;
  PT_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 64 && cached[dev] != 0) return cached[dev];
  int v = 0;
  PT_CUDA_CHECK(cudaDeviceGetAttribute(&v, kAttr, dev));
  if (dev < 64) cached[dev] = v;
  return v;
}
// Streaming multiprocessors of the current device.
inline int sm_count() { return device_attribute<cudaDevAttrMultiProcessorCount>(); }
// Blocks for a grid-stride loop over `work` items with `threads` per block: enough to fill
// the device several times over, never more than the work needs.
inline unsigned grid_for(int64_t work, int threads) {
  const int64_t cap = int64_t(sm_count()) * 16;
  const int64_t need = ceil_div(work, threads);
  return static_cast<unsigned>(need < 1 ? 1 : (need < cap ? need : cap));
}
// Blocks for one item per thread, uncapped: for kernels that stream each byte once (the
// optimizer, the elementwise passes), where one short-lived block per 256·N elements beat a
// capped grid-stride loop (docs/reports/2026-11-27_gemm-choice-covering-grid_h100.md).
inline unsigned grid_covering(int64_t work, int threads) {
  const int64_t need = ceil_div(work, threads);
  return static_cast<unsigned>(need < 1 ? 1 : need);
}

// ---- dtype dispatch -------------------------------------------------------------------------
template <typename T>
struct TypeTag {
  using type = T;
};
// Calls f(TypeTag<float>) or f(TypeTag<__nv_bfloat16>) for the GPU storage types.
template <typename F>
void dispatch_float(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(TypeTag<float>{}); return;
    case DType::BF16: f(TypeTag<__nv_bfloat16>{}); return;
    default: PT_FAIL(std::string("GPU op called with unsupported dtype ") + dtype_name(t));
  }
}
// f(TypeTag<A>{}, TypeTag<B>{}) for two tensors' types, each fp32 or bf16 (an output and an input).
template <typename F>
void dispatch_float_pair(DType a, DType b, F&& f) {
  dispatch_float(a, [&](auto a_tag) { dispatch_float(b, [&](auto b_tag) { f(a_tag, b_tag); }); });
}

}  // namespace pt::cuda
