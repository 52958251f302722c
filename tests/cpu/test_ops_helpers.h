#pragma once
// Shared by the CPU op tests: fp64 tensors from host vectors and a finite-difference check of
// a backward pass (the gradient of the scalar Σ w ⊙ forward(x) for random weights w).
#include <functional>
#include <vector>

#include "common/test_util.h"

namespace pt::test {

inline Tensor f64(Context& ctx, const Shape& shape, const std::vector<double>& v) {
  return make_tensor(ctx, shape, DType::F64, v);
}
inline Tensor f32(Context& ctx, const Shape& shape, const std::vector<double>& v) {
  return make_tensor(ctx, shape, DType::F32, v);
}
inline std::vector<double> host(Context& ctx, const Tensor& t) { return t.to_host_f64(ctx); }

// Σ_i w_i · y_i: the scalar whose gradient a backward pass with dy = w computes.
inline double weighted_sum(const std::vector<double>& y, const std::vector<double>& w) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

// Expects `analytic` to equal d/dx Σ w ⊙ forward(x) by central differences in fp64.
inline void expect_gradient(const std::function<std::vector<double>(const std::vector<double>&)>& forward,
                            const std::vector<double>& x, const std::vector<double>& w,
                            const std::vector<double>& analytic, double rtol = 1e-6, double atol = 1e-8) {
  auto f = [&](const std::vector<double>& xv) { return weighted_sum(forward(xv), w); };
  const std::vector<double> numeric = finite_difference(f, x);
  PT_EXPECT_ALLCLOSE(analytic, numeric, rtol, atol);
}

}  // namespace pt::test
