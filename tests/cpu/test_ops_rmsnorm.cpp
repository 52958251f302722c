// RMSNorm on the CPU: forward against the formula in fp64, backward (dx, dw, accumulated into or
// written) against central finite differences, fp32 against fp64.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

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

// max |v| over the values, NaN skipped (the amax's rule), as the fp32 the amax holds.
double expected_amax(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::fmax(m, std::fabs(e));
  return double(float(m));
}
// An amax tensor: fp32, one element, poisoned so that an unwritten amax fails.
Tensor amax_tensor(Context& ctx) {
  Tensor t = Tensor::empty({1}, DType::F32, ctx.device());
  poison(ctx, t);
  return t;
}

// FP8 current scaling's amax from the forward and backward themselves: max |y| and max |dx| of
// what they stored (after accumulate), a row of NaN skipped; the outputs as without the amax.
TEST(RMSNorm, AmaxIsMaxAbsOfTheStoredOutput) {
  Context ctx(Device::cpu());
  const int64_t rows = 4, cols = 7;
  auto xv = randn(rows * cols, 11, 3.0);
  xv[3 * cols + 2] = std::nan("");  // row 3's y and dx are all NaN
  const auto wv = uniform(cols, 12, -1.5, 1.5), g = randn(rows * cols, 13), dx0 = randn(rows * cols, 14, 50.0);
  for (DType dt : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = make_tensor(ctx, {rows, cols}, dt, xv), w = make_tensor(ctx, {cols}, dt, wv);
    Tensor y = Tensor::empty({rows, cols}, dt, ctx.device()), rstd = Tensor::empty({rows}, dt, ctx.device());
    Tensor y_plain = Tensor::empty({rows, cols}, dt, ctx.device());
    Tensor y_amax = amax_tensor(ctx);
    ops::rmsnorm_forward(ctx, y, rstd, x, w, kEps, &y_amax);
    ops::rmsnorm_forward(ctx, y_plain, rstd, x, w, kEps);
    const auto hy = host(ctx, y);
    EXPECT_TRUE(std::isnan(hy[3 * cols]));
    EXPECT_GT(expected_amax(hy), 0.0);
    EXPECT_EQ(host(ctx, y_amax)[0], expected_amax(hy));
    // Bit for bit the same y (NaN in the same places).
    const auto hp = host(ctx, y_plain);
    for (size_t i = 0; i < hy.size(); ++i) EXPECT_TRUE(hy[i] == hp[i] || (std::isnan(hy[i]) && std::isnan(hp[i])));

    Tensor dy = make_tensor(ctx, {rows, cols}, dt, g);
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(accumulate ? "dx accumulated" : "dx written");
      Tensor dx = make_tensor(ctx, {rows, cols}, dt, dx0), dw = make_tensor(ctx, {cols}, dt, wv);
      Tensor dx_amax = amax_tensor(ctx);
      ops::rmsnorm_backward(ctx, dx, dw, dy, x, w, rstd, accumulate, nullptr, true, &dx_amax);
      const auto hdx = host(ctx, dx);
      // Accumulated, the large dx0 dominates: the amax is of dx after the sum.
      EXPECT_EQ(host(ctx, dx_amax)[0], expected_amax(hdx));
      EXPECT_EQ(accumulate, expected_amax(hdx) > 10.0);
    }
  }
}

// A bad amax tensor: one error naming the op and the argument.
TEST(RMSNorm, BadAmaxGivesOneClearError) {
  Context ctx(Device::cpu());
  Tensor x = f64(ctx, {2, 4}, randn(8, 1)), w = f64(ctx, {4}, randn(4, 2)), dy = f64(ctx, {2, 4}, randn(8, 3));
  Tensor y = Tensor::empty({2, 4}, DType::F64, ctx.device()), rstd = Tensor::empty({2}, DType::F64, ctx.device());
  Tensor dx = Tensor::empty({2, 4}, DType::F64, ctx.device()), dw = Tensor::empty({4}, DType::F64, ctx.device());
  Tensor wrong_type = Tensor::empty({1}, DType::F64, ctx.device());
  Tensor wrong_size = Tensor::empty({2}, DType::F32, ctx.device());
  // The error a call gives contains `want`.
  auto expect_error = [](const std::function<void()>& call, const std::string& want) {
    const std::string got = error_of(call);
    EXPECT_NE(got.find(want), std::string::npos) << (got.empty() ? "accepted" : got) << "; wanted: " << want;
  };
  expect_error([&] { ops::rmsnorm_forward(ctx, y, rstd, x, w, kEps, &wrong_type); },
               "rmsnorm_forward: y_amax is fp64, expected fp32");
  expect_error([&] { ops::rmsnorm_forward(ctx, y, rstd, x, w, kEps, &wrong_size); },
               "rmsnorm_forward: y_amax must hold 1 element, got shape (2,)");
  ops::rmsnorm_forward(ctx, y, rstd, x, w, kEps);
  expect_error([&] { ops::rmsnorm_backward(ctx, dx, dw, dy, x, w, rstd, false, nullptr, false, &wrong_type); },
               "rmsnorm_backward: dx_amax is fp64, expected fp32");
  expect_error([&] { ops::rmsnorm_backward(ctx, dx, dw, dy, x, w, rstd, false, nullptr, false, &wrong_size); },
               "rmsnorm_backward: dx_amax must hold 1 element, got shape (2,)");
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
