// Elementwise kernels: a grid-stride loop over 16-byte packs of kPack elements (when every
// pointer is 16-byte aligned), then the tail one element at a time. Math in fp32; each
// tensor's storage type (fp32 or bf16) is a template parameter.
// Launched with a grid that covers the work (one pack a thread, the loop runs once; any grid is
// correct), not one capped at 16 blocks an SM: short-lived blocks keep more loads in flight, which
// puts SwiGLU's passes at the rate of a pass with their bytes
// (docs/reports/2026-11-27_gemm-choice-covering-grid_h100.md).
#include <algorithm>
#include <utility>

#include "cuda/chained_launch.cuh"
#include "cuda/common.cuh"
#include "cuda/elementwise.h"

namespace pt::cuda {

namespace {

constexpr int kThreads = 256;

// f applied to element i of every input pack.
template <typename F, size_t K, size_t... I>
__device__ __forceinline__ float apply(const F& f, const float (&v)[K][kPack], int i, std::index_sequence<I...>) {
  return f(v[I][i]...);
}

// out[i] = f(in[i]...) over n elements; out may alias an input (same index, same thread). With
// kAmax, max |out| as stored also goes into *amax (zeroed by the launcher); a template flag, so a
// map without it carries no amax code at all (its amax argument is null and unread).
template <bool kAmax, typename F, typename TO, typename... TI>
__global__ void map_kernel(int64_t n, bool packed, float* amax, F f, TO* out, const TI*... in) {
  begin_chained_kernel();  // launched by launch_chained
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = packed ? n / kPack : 0;
  float m = 0.0f;
  for (int64_t p = first; p < packs; p += stride) {
    float v[sizeof...(TI)][kPack];
    int a = 0;
    (load_pack<kPack>(in + p * kPack, v[a++]), ...);
    float r[kPack];
#pragma unroll
    for (int i = 0; i < kPack; ++i) r[i] = apply(f, v, i, std::make_index_sequence<sizeof...(TI)>{});
    store_pack<kPack>(out + p * kPack, r);
    if constexpr (kAmax) {
#pragma unroll
      for (int i = 0; i < kPack; ++i) m = fmaxf(m, fabsf(r[i]));
    }
  }
  for (int64_t i = packs * kPack + first; i < n; i += stride) {
    const float r = f(to_float(in[i])...);
    out[i] = from_float<TO>(r);
    if constexpr (kAmax) m = fmaxf(m, fabsf(r));
  }
  if constexpr (kAmax) {
    __shared__ float scratch[kWarpSize];
    block_amax_into(amax, fabsf(as_stored<TO>(m)), scratch);
  }
}

// kAmax: amax is the device float that receives max |out| (zeroed here first); else unused.
template <bool kAmax, typename F, typename TO, typename... TI>
void launch_map_amax(cudaStream_t s, float* amax, int64_t n, F f, TO* out, const TI*... in) {
  if constexpr (kAmax) zero_amax(s, amax);
  if (n == 0) return;
  const bool packed = aligned16(out) && (aligned16(in) && ...);
  const int64_t work = packed ? n / kPack + n % kPack : n;
  launch_chained(map_kernel<kAmax, F, TO, TI...>, grid_covering(work, kThreads), kThreads, 0, s, n, packed, amax, f,
                 out, in...);
  PT_CUDA_CHECK_LAUNCH();
}
template <typename F, typename TO, typename... TI>
void launch_map(cudaStream_t s, int64_t n, F f, TO* out, const TI*... in) {
  launch_map_amax<false>(s, nullptr, n, f, out, in...);
}

// Functors (device lambdas would need --extended-lambda).
struct Identity {
  __device__ float operator()(float x) const { return x; }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Axpy {  // x + alpha·y
  float alpha;
  __device__ float operator()(float x, float y) const { return fmaf(alpha, y, x); }
};
struct Scale {
  float alpha;
  __device__ float operator()(float x) const { return alpha * x; }
};
struct Relu {
  __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct ReluGrad {  // (dy, y)
  __device__ float operator()(float dy, float y) const { return y > 0.0f ? dy : 0.0f; }
};
__device__ __forceinline__ float sigmoidf(float a) { return 1.0f / (1.0f + expf(-a)); }
struct Swiglu {  // (h1, h3)
  __device__ float operator()(float a, float b) const { return a * sigmoidf(a) * b; }
};
struct SwigluGradH1 {  // (dg, h1, h3): dg·h3·silu'(h1)
  __device__ float operator()(float d, float a, float b) const {
    const float s = sigmoidf(a);
    return d * b * s * (1.0f + a * (1.0f - s));
  }
};
struct SwigluGradH3 {  // (dg, h1): dg·silu(h1)
  __device__ float operator()(float d, float a) const { return d * a * sigmoidf(a); }
};

// Calls f with one typed pointer per tensor, in order, for every fp32/bf16 combination.
template <typename F>
void typed(F&& f) {
  f();
}
template <typename F, typename... Rest>
void typed(F&& f, const Tensor& t, const Rest&... rest) {
  dispatch_float(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    typed([&](auto*... ptrs) { f(static_cast<T*>(t.data()), ptrs...); }, rest...);
  });
}

}  // namespace

void cast(cudaStream_t s, Tensor& dst, const Tensor& src, float scale) {
  if (scale != 1.0f) {
    typed([&](auto* d, auto* x) { launch_map(s, dst.numel(), Scale{scale}, d, x); }, dst, src);
    return;
  }
  if (dst.dtype() == src.dtype()) {
    if (dst.data() != src.data())
      PT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDeviceToDevice, s));
    return;
  }
  typed([&](auto* d, auto* x) { launch_map(s, dst.numel(), Identity{}, d, x); }, dst, src);
}

void add(cudaStream_t s, Tensor& out, const Tensor& a, const Tensor& b) {
  typed([&](auto* o, auto* x, auto* y) { launch_map(s, out.numel(), Add{}, o, x, y); }, out, a, b);
}

void add_inplace(cudaStream_t s, Tensor& x, const Tensor& y, float alpha) {
  typed([&](auto* px, auto* py) { launch_map(s, x.numel(), Axpy{alpha}, px, px, py); }, x, y);
}

void scale_inplace(cudaStream_t s, Tensor& x, float alpha) {
  typed([&](auto* px) { launch_map(s, x.numel(), Scale{alpha}, px, px); }, x);
}

void relu_forward(cudaStream_t s, Tensor& y, const Tensor& x) {
  typed([&](auto* py, auto* px) { launch_map(s, y.numel(), Relu{}, py, px); }, y, x);
}

void relu_backward(cudaStream_t s, Tensor& dx, const Tensor& dy, const Tensor& y) {
  typed([&](auto* pdx, auto* pdy, auto* py) { launch_map(s, dx.numel(), ReluGrad{}, pdx, pdy, py); }, dx, dy, y);
}

// The generic map with its amax flag: the same kernel as every map, so no second loop to keep in step.
void swiglu_forward(cudaStream_t s, Tensor& g, const Tensor& h1, const Tensor& h3, float* g_amax) {
  typed(
      [&](auto* pg, auto* p1, auto* p3) {
        dispatch_amax(g_amax, [&](auto amax_tag) {
          launch_map_amax<decltype(amax_tag)::value>(s, g_amax, g.numel(), Swiglu{}, pg, p1, p3);
        });
      },
      g, h1, h3);
}

namespace {
// Both gradients in one pass: dh1/dh3 may alias dg, so each element reads everything first.
// With g (the recompute backward) the forward product too, with swiglu_forward's arithmetic.
// With kAmax, max |dh1| and max |dh3| as stored go into dh_amax[0] and dh_amax[1].
template <bool kAmax, typename TG, typename TH>
__global__ void swiglu_backward_kernel(int64_t n, bool packed, TG* dh1, TG* dh3, TH* g, float* dh_amax, const TG* dg,
                                       const TH* h1, const TH* h3) {
  begin_chained_kernel();  // launched by launch_chained
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t packs = packed ? n / kPack : 0;
  float m1 = 0.0f, m3 = 0.0f;
  for (int64_t p = first; p < packs; p += stride) {
    float d[kPack], a[kPack], b[kPack], r1[kPack], r3[kPack], f[kPack];
    load_pack<kPack>(dg + p * kPack, d);
    load_pack<kPack>(h1 + p * kPack, a);
    load_pack<kPack>(h3 + p * kPack, b);
#pragma unroll
    for (int i = 0; i < kPack; ++i) {
      r1[i] = SwigluGradH1{}(d[i], a[i], b[i]);
      r3[i] = SwigluGradH3{}(d[i], a[i]);
      f[i] = Swiglu{}(a[i], b[i]);
    }
    store_pack<kPack>(dh1 + p * kPack, r1);
    store_pack<kPack>(dh3 + p * kPack, r3);
    if (g) store_pack<kPack>(g + p * kPack, f);
    if constexpr (kAmax) {
#pragma unroll
      for (int i = 0; i < kPack; ++i) {
        m1 = fmaxf(m1, fabsf(r1[i]));
        m3 = fmaxf(m3, fabsf(r3[i]));
      }
    }
  }
  for (int64_t i = packs * kPack + first; i < n; i += stride) {
    const float d = to_float(dg[i]), a = to_float(h1[i]), b = to_float(h3[i]);
    const float r1 = SwigluGradH1{}(d, a, b);
    dh1[i] = from_float<TG>(r1);
    const float r3 = SwigluGradH3{}(d, a);
    dh3[i] = from_float<TG>(r3);
    if (g) g[i] = from_float<TH>(Swiglu{}(a, b));
    if constexpr (kAmax) {
      m1 = fmaxf(m1, fabsf(r1));
      m3 = fmaxf(m3, fabsf(r3));
    }
  }
  if constexpr (kAmax) {
    __shared__ float scratch[kWarpSize];
    block_amax_into(dh_amax, fabsf(as_stored<TG>(m1)), scratch);
    block_amax_into(dh_amax + 1, fabsf(as_stored<TG>(m3)), scratch);
  }
}

template <bool kAmax, typename TG, typename TH>
void launch_swiglu_backward(cudaStream_t s, Tensor& dh1, Tensor& dh3, const Tensor& dg, const Tensor& h1,
                            const Tensor& h3, Tensor* g, float* dh_amax) {
  const int64_t n = dg.numel();
  const bool packed = aligned16(dh1.data()) && aligned16(dh3.data()) && aligned16(dg.data()) && aligned16(h1.data()) &&
                      aligned16(h3.data()) && (!g || aligned16(g->data()));
  const int64_t work = packed ? n / kPack + n % kPack : n;
  launch_chained(swiglu_backward_kernel<kAmax, TG, TH>, grid_covering(work, kThreads), kThreads, 0, s, n, packed,
                 static_cast<TG*>(dh1.data()), static_cast<TG*>(dh3.data()), g ? static_cast<TH*>(g->data()) : nullptr,
                 dh_amax, static_cast<const TG*>(dg.data()), static_cast<const TH*>(h1.data()),
                 static_cast<const TH*>(h3.data()));
  PT_CUDA_CHECK_LAUNCH();
}
}  // namespace

void swiglu_backward(cudaStream_t s, Tensor& dh1, Tensor& dh3, const Tensor& dg, const Tensor& h1, const Tensor& h3,
                     Tensor* g, float* dh_amax) {
  zero_amax(s, dh_amax, 2);
  if (dg.numel() == 0) return;
  dispatch_float_pair(dg.dtype(), h1.dtype(), [&](auto gtag, auto htag) {
    using TG = typename decltype(gtag)::type;
    using TH = typename decltype(htag)::type;
    dispatch_amax(dh_amax, [&](auto amax_tag) {
      launch_swiglu_backward<decltype(amax_tag)::value, TG, TH>(s, dh1, dh3, dg, h1, h3, g, dh_amax);
    });
  });
}

namespace {
// y (N, C) += bias (C). Packs need C % kPack == 0 so that a pack stays inside one row.
template <typename TY, typename TB>
__global__ void add_bias_kernel(int64_t rows, int64_t cols, bool packed, TY* y, const TB* bias) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (packed) {
    const int64_t packs = rows * cols / kPack;
    for (int64_t p = first; p < packs; p += stride) {
      const int64_t c = (p * kPack) % cols;
      float v[kPack], b[kPack];
      load_pack<kPack>(y + p * kPack, v);
      load_pack<kPack>(bias + c, b);
#pragma unroll
      for (int i = 0; i < kPack; ++i) v[i] += b[i];
      store_pack<kPack>(y + p * kPack, v);
    }
    return;
  }
  for (int64_t i = first; i < rows * cols; i += stride)
    y[i] = from_float<TY>(to_float(y[i]) + to_float(bias[i % cols]));
}

// dbias (C) += column sums of dy (N, C). A (32 × 8) block covers 32 columns and strides over
// the rows in 8 lanes; partial sums meet in shared memory, then one atomic per column.
template <typename TD>
__global__ void bias_backward_kernel(int64_t rows, int64_t cols, float* dbias, const TD* dy) {
  __shared__ float part[8][33];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float sum = 0.0f;
  if (c < cols)
    for (int64_t r = int64_t(blockIdx.y) * 8 + threadIdx.y; r < rows; r += int64_t(gridDim.y) * 8)
      sum += to_float(dy[r * cols + c]);
  part[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int j = 1; j < 8; ++j) sum += part[j][threadIdx.x];
    atomicAdd(dbias + c, sum);
  }
}
}  // namespace

void add_bias(cudaStream_t s, Tensor& y, const Tensor& bias) {
  const int64_t rows = y.size(0), cols = y.size(1);
  if (rows * cols == 0) return;
  typed(
      [&](auto* py, auto* pb) {
        const bool packed = cols % kPack == 0 && aligned16(py) && aligned16(pb);
        const int64_t work = packed ? rows * cols / kPack : rows * cols;
        add_bias_kernel<<<grid_for(work, kThreads), kThreads, 0, s>>>(rows, cols, packed, py, pb);
        PT_CUDA_CHECK_LAUNCH();
      },
      y, bias);
}

void bias_backward(cudaStream_t s, Tensor& dbias, const Tensor& dy) {
  const int64_t rows = dy.size(0), cols = dy.size(1);
  if (rows * cols == 0) return;
  typed(
      [&](auto* pdy) {
        const unsigned col_blocks = unsigned(ceil_div(cols, 32));
        // Enough row slices to fill the device, each at least 64 rows deep.
        const int64_t want = std::max<int64_t>(1, int64_t(sm_count()) * 4 / col_blocks);
        const unsigned row_blocks = unsigned(std::min<int64_t>(want, ceil_div(rows, 64)));
        bias_backward_kernel<<<dim3(col_blocks, std::max(row_blocks, 1u)), dim3(32, 8), 0, s>>>(
            rows, cols, dbias.data_as<float>(), pdy);
        PT_CUDA_CHECK_LAUNCH();
      },
      dy);
}

}  // namespace pt::cuda
