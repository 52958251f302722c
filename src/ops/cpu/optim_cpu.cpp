// CPU optimizer arithmetic over flat ranges (torch.optim formulas, in the storage type).
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops::cpu {

using detail::dispatch_cpu_float;

namespace {
void store_lowp(Tensor* p_lowp, int64_t i, double v) {
  p_lowp->data_as<uint16_t>()[i] = float_to_bf16_bits(static_cast<float>(v));
}

// min(1, max_norm / (norm + 1e-6)) from a 1-element fp32|fp64 squared norm.
double clip_coefficient(const Tensor& sumsq, float max_norm) {
  double s = 0;
  dispatch_cpu_float(sumsq.dtype(), [&](auto tag) { s = double(sumsq.data_as<const decltype(tag)>()[0]); });
  return std::min(1.0, double(max_norm) / (std::sqrt(s) + 1e-6));
}

// The update's guard (GradClip): false when a folded squared norm is not finite.
bool update_allowed(const GradClip& clip) {
  if (!clip.sumsq) return true;
  double s = 0;
  dispatch_cpu_float(clip.sumsq->dtype(), [&](auto tag) { s = double(clip.sumsq->data_as<const decltype(tag)>()[0]); });
  return std::isfinite(s);
}

// The gradient as an update reads it: scaled by the clip coefficient (rounded to T as
// clip_by_norm stores it) when a clip is folded in.
template <typename T>
struct ClippedGrad {
  ClippedGrad(const T* g, const GradClip& clip)
      : g_(g),
        scaled_(clip.sumsq != nullptr),
        coef_(scaled_ ? T(clip_coefficient(*clip.sumsq, clip.max_norm)) : T(1)) {}
  T operator[](int64_t i) const { return scaled_ ? T(g_[i] * coef_) : g_[i]; }

 private:
  const T* g_;
  bool scaled_;
  T coef_;
};
}  // namespace

void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWHyper& h, Tensor* p_lowp,
                const GradClip& clip) {
  if (!update_allowed(clip)) return;
  dispatch_cpu_float(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Scalars as torch forms them: in double on the host, then in the parameter's type.
    const double t = double(h.step);
    const T decay = T(1.0 - double(h.lr) * double(h.weight_decay));
    const T step_size = T(double(h.lr) / (1.0 - std::pow(double(h.beta1), t)));
    const T bc2_sqrt = T(std::sqrt(1.0 - std::pow(double(h.beta2), t)));
    const T b1 = T(h.beta1), b2 = T(h.beta2), eps = T(h.eps);
    T *pp = p.data_as<T>(), *pm = m.data_as<T>(), *pv = v.data_as<T>();
    const ClippedGrad<T> pg(g.data_as<const T>(), clip);
    for (int64_t i = 0, n = p.numel(); i < n; ++i) {
      const T gi = pg[i];
      T pi = pp[i] * decay;
      const T mi = pm[i] + (T(1) - b1) * (gi - pm[i]);  // torch's lerp(m, g, 1 − β1)
      const T vi = b2 * pv[i] + (T(1) - b2) * gi * gi;
      pi -= step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
      pp[i] = pi;
      pm[i] = mi;
      pv[i] = vi;
      if (p_lowp) store_lowp(p_lowp, i, double(pi));
    }
  });
}

void sgd_step(Tensor& p, const Tensor& g, float lr, float weight_decay, Tensor* p_lowp, const GradClip& clip) {
  if (!update_allowed(clip)) return;
  dispatch_cpu_float(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pp = p.data_as<T>();
    const ClippedGrad<T> pg(g.data_as<const T>(), clip);
    for (int64_t i = 0, n = p.numel(); i < n; ++i) {
      pp[i] -= T(lr) * (pg[i] + T(weight_decay) * pp[i]);
      if (p_lowp) store_lowp(p_lowp, i, double(pp[i]));
    }
  });
}

void squared_norm_accumulate(Tensor& sumsq, const Tensor& x) {
  dispatch_cpu_float(sumsq.dtype(), [&](auto acc_tag) {
    using S = decltype(acc_tag);
    dispatch_cpu_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* px = x.data_as<const T>();
      S sum = 0;
      for (int64_t i = 0, n = x.numel(); i < n; ++i) sum += S(px[i]) * S(px[i]);
      sumsq.data_as<S>()[0] += sum;
    });
  });
}

void clip_by_norm(Tensor& x, const Tensor& sumsq, float max_norm) {
  const double coef = clip_coefficient(sumsq, max_norm);
  dispatch_cpu_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* px = x.data_as<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) px[i] *= T(coef);
  });
}

}  // namespace pt::ops::cpu
