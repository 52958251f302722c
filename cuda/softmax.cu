// Row softmax (forward: online max/sum in one pass, then one write pass) and its backward,
// one warp per row. Causal rows read only their visible prefix. Math in fp32.
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/softmax.h"

namespace pt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;  // rows per block

template <typename TI, typename TO, int N>
__global__ void softmax_forward_kernel(int64_t rows, int64_t tq, int64_t tk, float scale, bool causal, TO* probs,
                                       const TI* scores) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  // Keys j < valid are visible (bottom-right aligned mask); none visible → a row of zeros.
  const int64_t i = row % tq;
  const int64_t valid = causal ? std::min(std::max(i + 1 + tk - tq, int64_t(0)), tk) : tk;
  const TI* sr = scores + row * tk;
  TO* pr = probs + row * tk;

  MaxSum st = empty_stats();
  for (int64_t c = int64_t(lane) * N; c < valid; c += kWarpSize * N) {
    float v[N];
    load_n<N>(sr + c, v);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = c + k < valid ? scale * v[k] : -INFINITY;
    st = fold(st, v);
  }
  st = warp_combine(st);
  const float inv_sum = st.s > 0.0f ? 1.0f / st.s : 0.0f;

  // probs may alias scores: every element is read by the lane that writes it, in this pass.
  for (int64_t c = int64_t(lane) * N; c < tk; c += kWarpSize * N) {
    float v[N];
    if (c < valid) load_n<N>(sr + c, v);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = c + k < valid ? expf(scale * v[k] - st.m) * inv_sum : 0.0f;
    store_n<N>(pr + c, v);
  }
}

template <typename TDS, typename TDP, typename TP, int N>
__global__ void softmax_backward_kernel(int64_t rows, int64_t tk, float scale, TDS* dscores, const TDP* dprobs,
                                        const TP* probs) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const TDP* dpr = dprobs + row * tk;
  const TP* pr = probs + row * tk;
  TDS* dsr = dscores + row * tk;
  float dot = 0.0f;
  for (int64_t c = int64_t(lane) * N; c < tk; c += kWarpSize * N) {
    float dp[N], p[N];
    load_n<N>(dpr + c, dp);
    load_n<N>(pr + c, p);
#pragma unroll
    for (int k = 0; k < N; ++k) dot += dp[k] * p[k];
  }
  dot = warp_sum(dot);
  // dscores may alias dprobs: same lane, same elements.
  for (int64_t c = int64_t(lane) * N; c < tk; c += kWarpSize * N) {
    float dp[N], p[N], ds[N];
    load_n<N>(dpr + c, dp);
    load_n<N>(pr + c, p);
#pragma unroll
    for (int k = 0; k < N; ++k) ds[k] = scale * p[k] * (dp[k] - dot);
    store_n<N>(dsr + c, ds);
  }
}

}  // namespace

void softmax_forward(cudaStream_t s, Tensor& probs, const Tensor& scores, double scale, bool causal) {
  const int64_t tk = scores.size(-1), tq = scores.size(-2), rows = scores.numel() / tk;
  const unsigned blocks = unsigned(ceil_div(rows, kWarps));
  dispatch_float(scores.dtype(), [&](auto itag) {
    using TI = typename decltype(itag)::type;
    dispatch_float(probs.dtype(), [&](auto otag) {
      using TO = typename decltype(otag)::type;
      const TI* in = static_cast<const TI*>(scores.data());
      TO* out = static_cast<TO*>(probs.data());
      if (tk % kPack == 0 && aligned16(in) && aligned16(out))
        softmax_forward_kernel<TI, TO, kPack><<<blocks, kThreads, 0, s>>>(rows, tq, tk, float(scale), causal, out, in);
      else
        softmax_forward_kernel<TI, TO, 1><<<blocks, kThreads, 0, s>>>(rows, tq, tk, float(scale), causal, out, in);
      PT_CUDA_CHECK_LAUNCH();
    });
  });
}

void softmax_backward(cudaStream_t s, Tensor& dscores, const Tensor& dprobs, const Tensor& probs, double scale) {
  const int64_t tk = probs.size(-1), rows = probs.numel() / tk;
  const unsigned blocks = unsigned(ceil_div(rows, kWarps));
  dispatch_float(dscores.dtype(), [&](auto a) {
    using TDS = typename decltype(a)::type;
    dispatch_float(dprobs.dtype(), [&](auto b) {
      using TDP = typename decltype(b)::type;
      dispatch_float(probs.dtype(), [&](auto c) {
        using TP = typename decltype(c)::type;
        TDS* ds = static_cast<TDS*>(dscores.data());
        const TDP* dp = static_cast<const TDP*>(dprobs.data());
        const TP* p = static_cast<const TP*>(probs.data());
        if (tk % kPack == 0 && aligned16(ds) && aligned16(dp) && aligned16(p))
          softmax_backward_kernel<TDS, TDP, TP, kPack><<<blocks, kThreads, 0, s>>>(rows, tk, float(scale), ds, dp, p);
        else
          softmax_backward_kernel<TDS, TDP, TP, 1><<<blocks, kThreads, 0, s>>>(rows, tk, float(scale), ds, dp, p);
        PT_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

}  // namespace pt::cuda
