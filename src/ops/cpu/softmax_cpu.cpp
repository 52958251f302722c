// CPU row softmax with scale and bottom-right-aligned causal mask, in the storage type.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops::cpu {

void softmax_forward(Tensor& probs, const Tensor& scores, double scale, bool causal) {
  detail::dispatch_cpu_float(scores.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t tk = scores.size(-1), tq = scores.size(-2), rows = scores.numel() / std::max<int64_t>(tk, 1);
    const T* s = scores.data_as<const T>();
    T* p = probs.data_as<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % tq;
      // Keys j < valid are visible; a fully masked row (Tq > Tk) comes out all zeros.
      const int64_t valid = causal ? std::clamp<int64_t>(i + 1 + tk - tq, 0, tk) : tk;
      const T* sr = s + r * tk;
      T* pr = p + r * tk;
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < valid; ++j) mx = std::max(mx, T(scale) * sr[j]);
      T sum = 0;
      for (int64_t j = 0; j < valid; ++j) sum += std::exp(T(scale) * sr[j] - mx);
      for (int64_t j = 0; j < tk; ++j)  // reads sr[j] before writing pr[j]: in place is fine
        pr[j] = j < valid ? std::exp(T(scale) * sr[j] - mx) / sum : T(0);
    }
  });
}

void softmax_backward(Tensor& dscores, const Tensor& dprobs, const Tensor& probs, double scale) {
  detail::dispatch_cpu_float(probs.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t tk = probs.size(-1), rows = probs.numel() / std::max<int64_t>(tk, 1);
    const T *dp = dprobs.data_as<const T>(), *p = probs.data_as<const T>();
    T* ds = dscores.data_as<T>();
    for (int64_t r = 0; r < rows; ++r) {
      T dot = 0;
      for (int64_t j = 0; j < tk; ++j) dot += dp[r * tk + j] * p[r * tk + j];
      for (int64_t j = 0; j < tk; ++j) ds[r * tk + j] = T(scale) * p[r * tk + j] * (dp[r * tk + j] - dot);
    }
  });
}

}  // namespace pt::ops::cpu
