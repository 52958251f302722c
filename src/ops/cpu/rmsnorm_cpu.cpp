// CPU RMSNorm, one row at a time, accumulating in the storage type.
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops::cpu {

void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps, float* amax) {
  detail::dispatch_cpu_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = x.size(0), cols = x.size(1);
    const T *px = x.data_as<const T>(), *pw = w.data_as<const T>();
    T *py = y.data_as<T>(), *pr = rstd.data_as<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = px + r * cols;
      T ss = 0;
      for (int64_t c = 0; c < cols; ++c) ss += xr[c] * xr[c];
      const T inv = T(1) / std::sqrt(ss / T(cols) + T(eps));
      pr[r] = inv;
      for (int64_t c = 0; c < cols; ++c) py[r * cols + c] = xr[c] * inv * pw[c];
    }
  });
  if (amax) *amax = detail::host_amax(y);
}

void rmsnorm_apply(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  detail::dispatch_cpu_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = x.size(0), cols = x.size(1);
    const T *px = x.data_as<const T>(), *pw = w.data_as<const T>(), *pr = rstd.data_as<const T>();
    T* py = y.data_as<T>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) py[r * cols + c] = px[r * cols + c] * pr[r] * pw[c];
  });
}

void rmsnorm_backward(Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                      bool accumulate, bool dw_accumulate, float* amax) {
  detail::dispatch_cpu_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = x.size(0), cols = x.size(1);
    const T *px = x.data_as<const T>(), *pw = w.data_as<const T>(), *pdy = dy.data_as<const T>(),
            *pr = rstd.data_as<const T>();
    T *pdx = dx.data_as<T>(), *pdw = dw.data_as<T>();
    if (!dw_accumulate) std::fill(pdw, pdw + cols, T(0));
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = px + r * cols, *dyr = pdy + r * cols;
      T* dxr = pdx + r * cols;
      const T inv = pr[r];
      // With g = dy ⊙ w: dx = inv·g − inv³/C · x · Σ(g ⊙ x). Element c of dy is read before
      // element c of dx is written, so dx may alias dy.
      T dot = 0;
      for (int64_t c = 0; c < cols; ++c) dot += dyr[c] * pw[c] * xr[c];
      const T k = inv * inv * inv * dot / T(cols);
      for (int64_t c = 0; c < cols; ++c) {
        const T d = inv * dyr[c] * pw[c] - k * xr[c];
        pdw[c] += dyr[c] * xr[c] * inv;
        dxr[c] = accumulate ? dxr[c] + d : d;
      }
    }
  });
  if (amax) *amax = detail::host_amax(dx);
}

}  // namespace pt::ops::cpu
