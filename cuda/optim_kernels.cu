// Optimizer arithmetic over flat fp32 ranges (the gradient fp32 or bf16): one pass per update,
// 16-byte packs, the bf16 GEMM copy written in the same pass (or, for kept FP8 weight runs, their
// amax measured instead); the norm and clip read/write device scalars only.
//
// The updates move 4 fp32 elements per thread (one 16-byte word of each of p, g, m, v) on a
// grid that covers the range once: the fastest of dev/cuda/adamw_variants.cu's forms, near the
// copy rate; cache hints changed nothing (docs/reports/2026-11-23_optimizer-hbm-speed_h200.md).
#include <cmath>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/optim_kernels.h"

namespace pt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kUpdatePack = 4;  // fp32 elements per thread in adamw_kernel and sgd_kernel

// A global-norm clip folded into an update (GradClip) as the kernels see it: the squared
// norm in fp32 or fp64 on the device, or neither (no clip).
struct ClipScalars {
  const float* sumsq_f32 = nullptr;
  const double* sumsq_f64 = nullptr;
  float max_norm = 0;
};

template <typename S>
__device__ __forceinline__ float clip_coefficient(const S* sumsq, float max_norm) {
  return fminf(1.0f, max_norm / (sqrtf(float(*sumsq)) + 1e-6f));
}
__device__ __forceinline__ float clip_coefficient(const ClipScalars& c) {
  if (c.sumsq_f32) return clip_coefficient(c.sumsq_f32, c.max_norm);
  if (c.sumsq_f64) return clip_coefficient(c.sumsq_f64, c.max_norm);
  return 1.0f;
}

// The update's guard: a non-finite squared norm (a NaN or Inf gradient somewhere) leaves
// every element as it is (GradClip).
__device__ __forceinline__ bool update_allowed(const ClipScalars& c) {
  if (c.sumsq_f32) return isfinite(*c.sumsq_f32);
  if (c.sumsq_f64) return isfinite(*c.sumsq_f64);
  return true;
}

ClipScalars clip_scalars(const GradClip& clip) {
  ClipScalars c;
  if (!clip.sumsq) return c;
  if (clip.sumsq->dtype() == DType::F64)
    c.sumsq_f64 = clip.sumsq->data_as<const double>();
  else
    c.sumsq_f32 = clip.sumsq->data_as<const float>();
  c.max_norm = clip.max_norm;
  return c;
}

// Grid-stride walk over whole groups of N elements; the launcher sends the tail (n % N)
// through an N == 1 launch.
template <int N>
__device__ __forceinline__ int64_t group_stride() {
  return int64_t(gridDim.x) * blockDim.x * N;
}
template <int N>
__device__ __forceinline__ int64_t group_start() {
  return (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * N;
}

// The update's bf16 copies and, with kept FP8 weight runs (Fp8WeightRuns), their amax: each
// thread's N elements either get their copy or fold into their run's max. A block folds the run
// it begins in with one atomic (block_amax_into); an element of a later run in the same block (a
// block straddling a run's end) folds with its own atomic.
template <bool kRuns>
struct LowpOut {
  __nv_bfloat16* lowp;  // the range's bf16 copy, or null
  Fp8WeightRuns runs;   // kRuns: base is this launch's element 0
  int block_run = 0;    // the first run ending after the block's first element (runs.count: none)
  int cursor = 0;       // this thread's: the first run ending after its last element seen
  float block_max = 0;  // of the block's elements in run block_run, rounded to bf16

  // Every thread of the block, before its elements (a covering grid: blocks of blockDim.x·N).
  template <int N>
  __device__ void begin_block() {
    if constexpr (kRuns) {
      __shared__ int first;
      if (threadIdx.x == 0) {
        const int64_t g = runs.base + int64_t(blockIdx.x) * blockDim.x * N;
        int lo = 0, hi = runs.count;
        while (lo < hi) {
          const int mid = (lo + hi) / 2;
          if (runs.bounds[2 * mid + 1] <= g)
            lo = mid + 1;
          else
            hi = mid;
        }
        first = lo;
      }
      __syncthreads();
      block_run = cursor = first;
    }
  }
  // The run element i (launch index) falls in, or -1; the cursor only moves forward.
  __device__ int run_of(int64_t i) {
    const int64_t g = runs.base + i;
    while (cursor < runs.count && runs.bounds[2 * cursor + 1] <= g) ++cursor;
    return cursor < runs.count && g >= runs.bounds[2 * cursor] ? cursor : -1;
  }
  // a: |value| rounded to bf16 (as the mirror would hold it) of run `run`'s elements.
  __device__ void fold(int run, float a) {
    if (run == block_run)
      block_max = fmaxf(block_max, a);
    else
      atomic_max_nonnegative(runs.amax + int64_t(run) * runs.amax_stride, a);
  }
  // Elements [i, i + N) with updated values v; write_copy: the update changed them.
  template <int N>
  __device__ void put(int64_t i, const float (&v)[N], bool write_copy) {
    const bool copy = lowp != nullptr && write_copy;
    if constexpr (kRuns) {
      const int run = run_of(i);
      if (run >= 0 && runs.base + i + N <= runs.bounds[2 * run + 1]) {  // all in one run: the weights
        float a = 0;
#pragma unroll
        for (int k = 0; k < N; ++k) a = fmaxf(a, fabsf(v[k]));
        fold(run, as_stored<__nv_bfloat16>(a));  // rounding is monotone: the max of the rounded values
        return;
      }
      if (run >= 0 || (cursor < runs.count && runs.bounds[2 * cursor] < runs.base + i + N)) {  // a run's edge
#pragma unroll
        for (int k = 0; k < N; ++k) {
          const int r = run_of(i + k);
          if (r >= 0)
            fold(r, fabsf(as_stored<__nv_bfloat16>(v[k])));
          else if (copy)
            lowp[i + k] = __float2bfloat16_rn(v[k]);
        }
        return;
      }
    }
    if (copy) store_n<N>(lowp + i, v);  // no run here
  }
  // Every thread of the block, after its elements.
  __device__ void end_block() {
    if constexpr (kRuns) {
      __shared__ float scratch[kWarpSize];
      block_amax_into(block_run < runs.count ? runs.amax + int64_t(block_run) * runs.amax_stride : nullptr, block_max,
                      scratch);
    }
  }
};

// G: the gradient's type (fp32, or bf16 with --grad-dtype bf16: read as float, the same arithmetic).
template <int N, typename G, bool kRuns>
__global__ void adamw_kernel(int64_t n, AdamWStepScalars hv, const AdamWStepScalars* hd, ClipScalars clip, float* p,
                             const G* g, float* m, float* v, LowpOut<kRuns> out) {
  const bool allowed = update_allowed(clip);
  if (!kRuns && !allowed) return;  // with runs the amax is measured all the same
  const AdamWStepScalars h = hd ? *hd : hv;
  const float coef = clip_coefficient(clip);
  out.template begin_block<N>();
  for (int64_t c = group_start<N>(); c + N <= n; c += group_stride<N>()) {
    float pv[N], gv[N], mv[N], vv[N];
    load_n<N>(p + c, pv);
    if (allowed) {
      load_n<N>(g + c, gv);
#pragma unroll
      for (int k = 0; k < N; ++k) gv[k] = __fmul_rn(gv[k], coef);  // clip_kernel's rounding
      load_n<N>(m + c, mv);
      load_n<N>(v + c, vv);
      // Every rounding is spelled out (no compiler FMA contraction): the packed and the scalar
      // instantiation then give bit-identical results, so a sharded optimizer, whose ranges fall
      // on different alignments than the unsharded one's, updates each element the same way.
#pragma unroll
      for (int k = 0; k < N; ++k) {
        // torch's lerp(m, g, 1 − β1) and v·β2 + (1 − β2)·g²
        mv[k] = __fmaf_rn(h.one_minus_beta1, __fsub_rn(gv[k], mv[k]), mv[k]);
        vv[k] = __fmaf_rn(h.beta2, vv[k], __fmul_rn(__fmul_rn(h.one_minus_beta2, gv[k]), gv[k]));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vv[k]), h.bc2_sqrt), h.eps);
        pv[k] = __fsub_rn(__fmul_rn(pv[k], h.decay), __fdiv_rn(__fmul_rn(h.step_size, mv[k]), denom));
      }
      store_n<N>(p + c, pv);
      store_n<N>(m + c, mv);
      store_n<N>(v + c, vv);
    }
    out.template put<N>(c, pv, allowed);
  }
  out.end_block();
}

template <int N, typename G, bool kRuns>
__global__ void sgd_kernel(int64_t n, float lr_value, const float* lr_device, float wd, ClipScalars clip, float* p,
                           const G* g, LowpOut<kRuns> out) {
  const bool allowed = update_allowed(clip);
  if (!kRuns && !allowed) return;
  const float lr = lr_device ? *lr_device : lr_value;
  const float coef = clip_coefficient(clip);
  out.template begin_block<N>();
  for (int64_t c = group_start<N>(); c + N <= n; c += group_stride<N>()) {
    float pv[N], gv[N];
    load_n<N>(p + c, pv);
    if (allowed) {
      load_n<N>(g + c, gv);
#pragma unroll
      for (int k = 0; k < N; ++k) gv[k] = __fmul_rn(gv[k], coef);
#pragma unroll
      for (int k = 0; k < N; ++k) pv[k] = __fsub_rn(pv[k], __fmul_rn(lr, __fmaf_rn(wd, pv[k], gv[k])));
      store_n<N>(p + c, pv);
    }
    out.template put<N>(c, pv, allowed);
  }
  out.end_block();
}

// partials[block] = this block's Σ x² (fp32). add_partials_kernel then adds the blocks' sums in
// a fixed order: atomics would add them in whatever order the blocks finish, and the bits of
// the norm (and so of a clipped step) would vary from run to run.
template <typename T, int N>
__global__ void squared_norm_kernel(int64_t n, float* partials, const T* x) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int64_t c = group_start<N>(); c + N <= n; c += group_stride<N>()) {
    float v[N];
    load_n<N>(x + c, v);
#pragma unroll
    for (int k = 0; k < N; ++k) sum += v[k] * v[k];
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// *sumsq += Σ partials[0, blocks), one block: strided sums per thread, then a fixed tree, in S.
template <typename S>
__global__ void add_partials_kernel(int blocks, const float* partials, S* sumsq) {
  __shared__ S tree[kThreads];
  S v = 0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) v += S(partials[i]);
  tree[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) tree[threadIdx.x] += tree[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *sumsq += tree[0];
}

template <typename S, typename T, int N>
__global__ void clip_kernel(int64_t n, float max_norm, T* x, const S* sumsq) {
  const float coef = clip_coefficient(sumsq, max_norm);
  for (int64_t c = group_start<N>(); c + N <= n; c += group_stride<N>()) {
    float v[N];
    load_n<N>(x + c, v);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = __fmul_rn(v[k], coef);
    store_n<N>(x + c, v);
  }
}

// run(TypeTag<G>{}) for the gradient's type: fp32 or bf16 (ops/optim_kernels.cpp checks it).
template <typename F>
void dispatch_grad(const Tensor& g, F&& run) {
  if (g.dtype() == DType::BF16)
    run(TypeTag<__nv_bfloat16>{});
  else
    run(TypeTag<float>{});
}

// Splits [0, n) into a packed head of Pack-element groups (when every pointer is 16-byte
// aligned) and a scalar tail, launching launch(N-tag, offset, count) for each non-empty part.
template <int Pack = kPack, typename Launch>
void packed_then_tail(int64_t n, bool aligned, Launch&& launch) {
  const int64_t head = aligned ? n / Pack * Pack : 0;
  if (head > 0) launch(std::integral_constant<int, Pack>{}, int64_t(0), head);
  if (head < n) launch(std::integral_constant<int, 1>{}, head, n - head);
}

// f(LowpOut<kRuns>) for the launch of elements [off, ...): kRuns when the update meets kept runs.
template <typename F>
void with_lowp_out(__nv_bfloat16* lowp, const Fp8WeightRuns& runs, int64_t off, F&& f) {
  if (runs.count > 0) {
    LowpOut<true> out{lowp ? lowp + off : nullptr, runs};
    out.runs.base += off;
    f(out);
  } else {
    f(LowpOut<false>{lowp ? lowp + off : nullptr, runs});
  }
}

// The amax of the runs that begin in the range, zeroed before the update folds into them.
void zero_run_amax(cudaStream_t s, const Fp8WeightRuns& runs) {
  if (runs.count > runs.zero_from)
    zero_amax(s, runs.amax + int64_t(runs.zero_from) * runs.amax_stride,
              (runs.count - runs.zero_from) * runs.amax_stride);
}

}  // namespace

void adamw_step(cudaStream_t s, Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWStepScalars& sc,
                Tensor* p_lowp, const GradClip& clip, const void* device_scalars, const Fp8WeightRuns& runs) {
  zero_run_amax(s, runs);
  const auto* hd = static_cast<const AdamWStepScalars*>(device_scalars);
  float *pp = p.data_as<float>(), *pm = m.data_as<float>(), *pv = v.data_as<float>();
  __nv_bfloat16* lowp = p_lowp ? static_cast<__nv_bfloat16*>(p_lowp->data()) : nullptr;
  dispatch_grad(g, [&](auto gtag) {
    using G = typename decltype(gtag)::type;
    const G* pg = static_cast<const G*>(g.data());
    const bool aligned = aligned16(pp) && aligned16(pg) && aligned16(pm) && aligned16(pv) && (!lowp || aligned16(lowp));
    packed_then_tail<kUpdatePack>(p.numel(), aligned, [&](auto n_tag, int64_t off, int64_t count) {
      constexpr int N = decltype(n_tag)::value;
      with_lowp_out(lowp, runs, off, [&](auto out) {
        adamw_kernel<N, G><<<grid_covering(count / N, kThreads), kThreads, 0, s>>>(
            count, sc, hd, clip_scalars(clip), pp + off, pg + off, pm + off, pv + off, out);
        PT_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

void sgd_step(cudaStream_t s, Tensor& p, const Tensor& g, float lr, float weight_decay, Tensor* p_lowp,
              const GradClip& clip, const void* device_scalars, const Fp8WeightRuns& runs) {
  zero_run_amax(s, runs);
  const float* lr_device = device_scalars ? &static_cast<const SgdStepScalars*>(device_scalars)->lr : nullptr;
  float* pp = p.data_as<float>();
  __nv_bfloat16* lowp = p_lowp ? static_cast<__nv_bfloat16*>(p_lowp->data()) : nullptr;
  dispatch_grad(g, [&](auto gtag) {
    using G = typename decltype(gtag)::type;
    const G* pg = static_cast<const G*>(g.data());
    const bool aligned = aligned16(pp) && aligned16(pg) && (!lowp || aligned16(lowp));
    packed_then_tail<kUpdatePack>(p.numel(), aligned, [&](auto n_tag, int64_t off, int64_t count) {
      constexpr int N = decltype(n_tag)::value;
      with_lowp_out(lowp, runs, off, [&](auto out) {
        sgd_kernel<N, G><<<grid_covering(count / N, kThreads), kThreads, 0, s>>>(
            count, lr, lr_device, weight_decay, clip_scalars(clip), pp + off, pg + off, out);
        PT_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

namespace {
// run(TypeTag<S>{}, TypeTag<T>{}) for the squared norm's type S (fp32 or fp64) and x's type T.
template <typename F>
void dispatch_sumsq_and_x(const Tensor& sumsq, const Tensor& x, F&& run) {
  dispatch_float(x.dtype(), [&](auto xtag) {
    if (sumsq.dtype() == DType::F64)
      run(TypeTag<double>{}, xtag);
    else
      run(TypeTag<float>{}, xtag);
  });
}
}  // namespace

int64_t squared_norm_partials() { return int64_t(grid_for(INT64_MAX / 2, kThreads)); }

void squared_norm_accumulate(cudaStream_t s, Tensor& sumsq, const Tensor& x, Tensor& partials) {
  PT_CHECK(partials.dtype() == DType::F32 && partials.numel() >= squared_norm_partials(),
           "squared_norm_accumulate: partials must hold squared_norm_partials() floats");
  auto run = [&](auto stag, auto xtag) {
    using S = typename decltype(stag)::type;
    using T = typename decltype(xtag)::type;
    const T* px = static_cast<const T*>(x.data());
    packed_then_tail(x.numel(), aligned16(px), [&](auto n_tag, int64_t off, int64_t count) {
      constexpr int N = decltype(n_tag)::value;
      const unsigned blocks = grid_for(count / N, kThreads);
      squared_norm_kernel<T, N><<<blocks, kThreads, 0, s>>>(count, partials.data_as<float>(), px + off);
      PT_CUDA_CHECK_LAUNCH();
      add_partials_kernel<S><<<1, kThreads, 0, s>>>(int(blocks), partials.data_as<const float>(), sumsq.data_as<S>());
      PT_CUDA_CHECK_LAUNCH();
    });
  };
  dispatch_sumsq_and_x(sumsq, x, run);
}

void clip_by_norm(cudaStream_t s, Tensor& x, const Tensor& sumsq, float max_norm) {
  auto run = [&](auto stag, auto xtag) {
    using S = typename decltype(stag)::type;
    using T = typename decltype(xtag)::type;
    T* px = static_cast<T*>(x.data());
    packed_then_tail(x.numel(), aligned16(px), [&](auto n_tag, int64_t off, int64_t count) {
      constexpr int N = decltype(n_tag)::value;
      clip_kernel<S, T, N>
          <<<grid_for(count / N, kThreads), kThreads, 0, s>>>(count, max_norm, px + off, sumsq.data_as<const S>());
      PT_CUDA_CHECK_LAUNCH();
    });
  };
  dispatch_sumsq_and_x(sumsq, x, run);
}

}  // namespace pt::cuda
