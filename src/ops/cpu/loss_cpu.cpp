// CPU losses: fused softmax cross-entropy (max-subtracted) and mean/sum squared error.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops::cpu {

void cross_entropy(Tensor& loss, Tensor* dlogits, const Tensor& logits, const Tensor& targets, float grad_scale) {
  detail::dispatch_cpu_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = logits.size(0), v = logits.size(1);
    const T* x = logits.data_as<const T>();
    T* dx = dlogits ? dlogits->data_as<T>() : nullptr;
    const int32_t* target = targets.data_as<const int32_t>();
    T total = 0;
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * v;
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < v; ++j) mx = std::max(mx, xr[j]);
      T sum = 0;
      for (int64_t j = 0; j < v; ++j) sum += std::exp(xr[j] - mx);
      const T lse = mx + std::log(sum);
      total += lse - xr[target[r]];
      if (!dx) continue;
      // (softmax − onehot) / N; each element is read before it is written (in place is fine).
      for (int64_t j = 0; j < v; ++j)
        dx[r * v + j] = (std::exp(xr[j] - lse) - (j == target[r] ? T(1) : T(0))) / T(n) * T(grad_scale);
    }
    loss.data_as<T>()[0] = total / T(n);
  });
}

void mse_loss(Tensor& loss, Tensor* dpred, const Tensor& pred, const Tensor& target, Reduction reduction) {
  detail::dispatch_cpu_float(pred.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = pred.numel();
    const T *p = pred.data_as<const T>(), *t = target.data_as<const T>();
    T* dp = dpred ? dpred->data_as<T>() : nullptr;
    const T norm = reduction == Reduction::Mean ? T(n) : T(1);
    T total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T d = p[i] - t[i];
      total += d * d;
      if (dp) dp[i] = T(2) * d / norm;
    }
    loss.data_as<T>()[0] = total / norm;
  });
}

}  // namespace pt::ops::cpu
