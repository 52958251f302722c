// RMSNorm on the CPU: forward against the formula in fp64, backward (dx, dw, accumulated into or
// written) against central finite differences, fp32 against fp64.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "cpu/test_ops_helpers.h"
#include "ops/rmsnorm.h"

namespace pt::test {
namespace {

constexpr float kEps = 1e-5f;

// y = x · rsqrt(mean(x²) + eps) · w, row by row.
std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w, int64_t rows, int64_t cols,
                                std::vector<double>* rstd = nullptr) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < cols; ++c) ms += x[r * cols + c] * x[r * cols + c] / double(cols);
    const double inv = 1.0 / std::sqrt(ms + double(kEps));
    if (rstd) rstd->push_back(inv);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * inv * w[c];
  }
  return y;
}

TEST(RMSNorm, ForwardMatchesFormula) {
  Context ctx(Device::cpu());
  const int64_t rows = 3, cols = 7;
  const auto xv = randn(rows * cols, 1, 3.0), wv = uniform(cols, 2, 0.5, 1.5);
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor x = make_tensor(ctx, {rows, cols}, dt, xv), w = make_tensor(ctx, {cols}, dt, wv);
    Tensor y = Tensor::empty({rows, cols}, dt, ctx.device()), rstd = Tensor::empty({rows}, dt, ctx.device());
    poison(ctx, y);
    poison(ctx, rstd);
    ops::rmsnorm_forward(ctx, y, rstd, x, w, kEps);
    // Reference from the values actually stored (fp32 inputs are rounded).
    std::vector<double> ref_rstd;
    const auto ref = rmsnorm_ref(host(ctx, x), host(ctx, w), rows, cols, &ref_rstd);
    const double tol = dt == DType::F64 ? 1e-14 : 1e-6;
    PT_EXPECT_ALLCLOSE(host(ctx, y), ref, tol, tol);
    PT_EXPECT_ALLCLOSE(host(ctx, rstd), ref_rstd, tol, 0);
    // The recompute from the saved rstd gives forward's y again, bit for bit.
    Tensor again = Tensor::empty({rows, cols}, dt, ctx.device());
    poison(ctx, again);
    ops::rmsnorm_apply(ctx, again, x, w, rstd);
    EXPECT_EQ(host(ctx, again), host(ctx, y));
  }
}

TEST(RMSNorm, BackwardMatchesFiniteDifferences) {
  Context ctx(Device::cpu());
  const int64_t rows = 3, cols = 6;
  const auto xv = randn(rows * cols, 3), wv = uniform(cols, 4, 0.5, 1.5), g = randn(rows * cols, 5);
  const auto dx0 = randn(rows * cols, 6), dw0 = randn(cols, 7);
  Tensor x = f64(ctx, {rows, cols}, xv), w = f64(ctx, {cols}, wv);
  Tensor y = Tensor::empty({rows, cols}, DType::F64, ctx.device()),
         rstd = Tensor::empty({rows}, DType::F64, ctx.device());
  ops::rmsnorm_forward(ctx, y, rstd, x, w, kEps);
  Tensor dy = f64(ctx, {rows, cols}, g);

  for (bool accumulate : {false, true})
    for (bool dw_accumulate : {true, false}) {
      Tensor dx = f64(ctx, {rows, cols}, dx0), dw = f64(ctx, {cols}, dw0);
      if (!accumulate) poison(ctx, dx);
      if (!dw_accumulate) poison(ctx, dw);  // written, never read
      ops::rmsnorm_backward(ctx, dx, dw, dy, x, w, rstd, accumulate, nullptr, dw_accumulate);
      auto gx = host(ctx, dx), gw = host(ctx, dw);
      if (accumulate)
        for (size_t i = 0; i < gx.size(); ++i) gx[i] -= dx0[i];
      if (dw_accumulate)
        for (size_t i = 0; i < gw.size(); ++i) gw[i] -= dw0[i];
      expect_gradient([&](const std::vector<double>& xx) { return rmsnorm_ref(xx, wv, rows, cols); }, xv, g, gx);
      expect_gradient([&](const std::vector<double>& ww) { return rmsnorm_ref(xv, ww, rows, cols); }, wv, g, gw);
    }
}

TEST(RMSNorm, BadShapesGiveClearErrors) {
  Context ctx(Device::cpu());
  Tensor x = f64(ctx, {2, 4}, randn(8, 1)), w = f64(ctx, {5}, randn(5, 2));
  Tensor y = Tensor::empty({2, 4}, DType::F64, ctx.device()), rstd = Tensor::empty({2}, DType::F64, ctx.device());
  try {
    ops::rmsnorm_forward(ctx, y, rstd, x, w, kEps);
    FAIL() << "weight of the wrong length accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rmsnorm_forward: w has shape (5,), expected (4,)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pt::test
