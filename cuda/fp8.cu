// Current-scaling FP8 kernels (cuda/fp8.h). The fp8 conversion is cuda_fp8.h's satfinite one:
// one cvt.rn.satfinite instruction on sm_89+, its bit-exact software path on sm_80 (where only
// the tests run it); core/fp8.h is the host twin the tests hold both to.
#include <cuda_fp8.h>

#include <type_traits>

#include "core/fp8.h"
#include "cuda/common.cuh"
#include "cuda/fp8.h"

namespace pt::cuda {

namespace {

constexpr int kThreads = 256;

// V: the type whose values are measured and cast — T itself, or bf16 for fp32 master weights read
// as the bf16 mirror would hold them (each element rounded to bf16 first).
template <typename T, typename V>
__device__ __forceinline__ float value_as(float v) {
  if constexpr (std::is_same_v<T, V>)
    return v;
  else
    return as_stored<V>(v);
}

template <typename T, typename V = T>
__global__ void amax_kernel(float* amax, const T* __restrict__ x, int64_t n, int64_t packs) {
  __shared__ float scratch[kWarpSize];
  float m = 0.0f;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x, first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t p = first; p < packs; p += stride) {
    float v[kPack];
    load_pack<kPack>(x + p * kPack, v);
#pragma unroll
    for (int i = 0; i < kPack; ++i) m = fmaxf(m, fabsf(value_as<T, V>(v[i])));
  }
  for (int64_t i = packs * kPack + first; i < n; i += stride) m = fmaxf(m, fabsf(value_as<T, V>(to_float(x[i]))));
  block_amax_into(amax, m, scratch);
}

template <Fp8Format F>
struct Fp8Traits;
template <>
struct Fp8Traits<Fp8Format::E4M3> {
  static constexpr __nv_fp8_interpretation_t kInterp = __NV_E4M3;
  static constexpr float kMax = kFp8E4M3Max;
};
template <>
struct Fp8Traits<Fp8Format::E5M2> {
  static constexpr __nv_fp8_interpretation_t kInterp = __NV_E5M2;
  static constexpr float kMax = kFp8E5M2Max;
};

// fp8_scale_from_amax on the device: one correctly rounded division, as the host's.
template <Fp8Format F>
__device__ __forceinline__ float device_scale(const float* amax) {
  const float a = *amax;
  return a > 0.0f ? __fdiv_rn(Fp8Traits<F>::kMax, a) : 1.0f;
}
template <Fp8Format F>
__device__ __forceinline__ uint8_t to_fp8(float x, float scale) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(x, scale), __NV_SATFINITE, Fp8Traits<F>::kInterp));
}
// Every block computes the same scale; the first writes its inverse for the GEMM.
__device__ __forceinline__ void write_scale_inv(float* scale_inv, float scale) {
  if (scale_inv && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv = __frcp_rn(scale);
}

// out[i] = fp8(x[i]·scale): kPack elements per thread (16 bytes of bf16 in, 8 bytes out) over
// `packs`, then the tail one element per thread.
template <typename T, Fp8Format F>
__global__ void cast_kernel(uint8_t* __restrict__ out, float* scale_inv, const T* __restrict__ x, int64_t n,
                            int64_t packs, const float* amax) {
  const float scale = device_scale<F>(amax);
  write_scale_inv(scale_inv, scale);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x, first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t p = first; p < packs; p += stride) {
    float v[kPack];
    load_pack<kPack>(x + p * kPack, v);
    uint2 word;
    auto* b = reinterpret_cast<uint8_t*>(&word);
#pragma unroll
    for (int i = 0; i < kPack; ++i) b[i] = to_fp8<F>(v[i], scale);
    reinterpret_cast<uint2*>(out)[p] = word;
  }
  for (int64_t i = packs * kPack + first; i < n; i += stride) out[i] = to_fp8<F>(to_float(x[i]), scale);
}

constexpr int kTile = 64;
// x (rows, cols) → out (cols, rows), one 64×64 tile per block. The tile is converted to fp8 as
// it is read (rows of x, 16-byte packs when `vec`) and written out by its columns (16 bytes of
// one output row per thread when `vec`); partial tiles at the edges go element by element.
// With `plain` the converted values also go out as x is laid out (rows, cols), from the same
// read: a gradient that feeds both dX (plain) and dW (transposed) is read once.
template <typename T, Fp8Format F, typename V = T>
__global__ void cast_transpose_kernel(uint8_t* __restrict__ out, uint8_t* __restrict__ plain, float* scale_inv,
                                      const T* __restrict__ x, int64_t rows, int64_t cols, bool vec,
                                      const float* amax) {
  __shared__ uint8_t tile[kTile][kTile + 4];  // [row of x][column of x]; the pad spreads banks
  const float scale = device_scale<F>(amax);
  write_scale_inv(scale_inv, scale);
  const int64_t r0 = int64_t(blockIdx.y) * kTile, c0 = int64_t(blockIdx.x) * kTile;
  const bool full = vec && r0 + kTile <= rows && c0 + kTile <= cols;
  if (full) {
    for (int p = threadIdx.x; p < kTile * kTile / kPack; p += blockDim.x) {
      const int r = p / (kTile / kPack), c = (p % (kTile / kPack)) * kPack;
      float v[kPack];
      load_pack<kPack>(x + (r0 + r) * cols + c0 + c, v);
      uint2 word;
      auto* b = reinterpret_cast<uint8_t*>(&word);
#pragma unroll
      for (int i = 0; i < kPack; ++i) b[i] = tile[r][c + i] = to_fp8<F>(value_as<T, V>(v[i]), scale);
      if (plain) *reinterpret_cast<uint2*>(plain + (r0 + r) * cols + c0 + c) = word;
    }
  } else {
    for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
      const int r = e / kTile, c = e % kTile;
      if (r0 + r < rows && c0 + c < cols) {
        tile[r][c] = to_fp8<F>(value_as<T, V>(to_float(x[(r0 + r) * cols + c0 + c])), scale);
        if (plain) plain[(r0 + r) * cols + c0 + c] = tile[r][c];
      }
    }
  }
  __syncthreads();
  if (full) {
    constexpr int kBytes = 16;
    for (int p = threadIdx.x; p < kTile * kTile / kBytes; p += blockDim.x) {
      const int c = p / (kTile / kBytes), r = (p % (kTile / kBytes)) * kBytes;
      uint4 word;
      auto* b = reinterpret_cast<uint8_t*>(&word);
#pragma unroll
      for (int i = 0; i < kBytes; ++i) b[i] = tile[r + i][c];
      *reinterpret_cast<uint4*>(out + (c0 + c) * rows + r0 + r) = word;
    }
  } else {
    for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
      const int c = e / kTile, r = e % kTile;
      if (r0 + r < rows && c0 + c < cols) out[(c0 + c) * rows + r0 + r] = tile[r][c];
    }
  }
}

// f(TypeTag<T>, std::integral_constant<Fp8Format, F>) for x's type and out's format.
template <typename Fn>
void dispatch_cast(DType in, DType out, Fn&& f) {
  dispatch_float(in, [&](auto tag) {
    if (fp8_format(out) == Fp8Format::E4M3)
      f(tag, std::integral_constant<Fp8Format, Fp8Format::E4M3>{});
    else
      f(tag, std::integral_constant<Fp8Format, Fp8Format::E5M2>{});
  });
}

// 16-byte packs of x when it sits on 16 bytes (the tail runs element by element).
int64_t pack_count(const Tensor& x) { return aligned16(x.data()) ? x.numel() / kPack : 0; }

}  // namespace

namespace {
// The value type V of the launchers below: void for x's own type T, else V (bf16: fp32 weights as
// the mirror holds them).
template <typename V, typename T>
using ValueOf = std::conditional_t<std::is_void_v<V>, T, V>;

// amax_kernel's launch, *amax zeroed on s first.
template <typename V>
void launch_amax(cudaStream_t s, float* amax, const Tensor& x) {
  zero_amax(s, amax);
  const int64_t n = x.numel(), packs = pack_count(x);
  if (n == 0) return;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    amax_kernel<T, ValueOf<V, T>>
        <<<grid_for(packs > 0 ? packs : n, kThreads), kThreads, 0, s>>>(amax, x.data_as<T>(), n, packs);
  });
  PT_CUDA_CHECK_LAUNCH();
}
}  // namespace

void fp8_amax(cudaStream_t s, float* amax, const Tensor& x) { launch_amax<void>(s, amax, x); }

void fp8_cast(cudaStream_t s, Tensor& out, float* scale_inv, const Tensor& x, const float* amax) {
  const int64_t n = x.numel();
  // Packs store 8 bytes of out per thread: both sides must allow it.
  const int64_t packs = aligned8(out.data()) ? pack_count(x) : 0;
  dispatch_cast(x.dtype(), out.dtype(), [&](auto tag, auto fmt) {
    using T = typename decltype(tag)::type;
    // One block at least, so that scale_inv is written for an empty tensor too.
    cast_kernel<T, decltype(fmt)::value><<<grid_covering(packs > 0 ? packs : n, kThreads), kThreads, 0, s>>>(
        out.data_as<uint8_t>(), scale_inv, x.data_as<T>(), n, packs, amax);
  });
  PT_CUDA_CHECK_LAUNCH();
}

namespace {
// fp8_cast_transpose's launch; V as in launch_amax.
template <typename V>
void launch_cast_transpose(cudaStream_t s, Tensor& out, Tensor* plain, float* scale_inv, const Tensor& x,
                           const float* amax) {
  const int64_t rows = x.size(0), cols = x.size(1);
  // Full tiles move 16-byte packs: x's rows must start on 16 bytes (cols % 8), out's too (rows % 16),
  // and plain's 8-byte packs on 8 bytes.
  const bool vec = aligned16(x.data()) && aligned16(out.data()) && cols % kPack == 0 && rows % 16 == 0 &&
                   (!plain || aligned8(plain->data()));
  uint8_t* plain_out = plain ? plain->data_as<uint8_t>() : nullptr;
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(ceil_div(cols, kTile), 1)),
                  static_cast<unsigned>(std::max<int64_t>(ceil_div(rows, kTile), 1)));
  PT_CHECK(grid.y <= 65535u, "fp8_cast_transpose: more than 65535·64 rows");
  dispatch_cast(x.dtype(), out.dtype(), [&](auto tag, auto fmt) {
    using T = typename decltype(tag)::type;
    cast_transpose_kernel<T, decltype(fmt)::value, ValueOf<V, T>>
        <<<grid, kThreads, 0, s>>>(out.data_as<uint8_t>(), plain_out, scale_inv, x.data_as<T>(), rows, cols, vec, amax);
  });
  PT_CUDA_CHECK_LAUNCH();
}
}  // namespace

void fp8_cast_transpose(cudaStream_t s, Tensor& out, Tensor* plain, float* scale_inv, const Tensor& x,
                        const float* amax) {
  launch_cast_transpose<void>(s, out, plain, scale_inv, x, amax);
}

void fp8_cast_weight(cudaStream_t s, Tensor& stored, Tensor& transposed, float* scale_inv, float* amax, const Tensor& w,
                     bool amax_measured) {
  PT_CHECK(w.dtype() == DType::F32 && w.dim() == 2, "fp8_cast_weight: w must be 2-D fp32, got " + w.describe());
  if (!amax_measured) launch_amax<__nv_bfloat16>(s, amax, w);
  launch_cast_transpose<__nv_bfloat16>(s, transposed, &stored, scale_inv, w, amax);
}

}  // namespace pt::cuda
