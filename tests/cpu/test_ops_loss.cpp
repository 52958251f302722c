// Losses on the CPU: cross-entropy equals −mean log softmax[target] (1e-12 in fp64, also for
// huge logits), its gradient against finite differences, in place over the logits; MSE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "cpu/test_ops_helpers.h"
#include "ops/loss.h"

namespace pt::test {
namespace {

// −mean_i log softmax(x_i)[t_i], with the log-sum-exp shifted by the row max.
double cross_entropy_ref(const std::vector<double>& x, const std::vector<int32_t>& t, int64_t n, int64_t v) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = x.data() + i * v;
    const double mx = *std::max_element(row, row + v);
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(row[j] - mx);
    total += -(row[t[i]] - mx - std::log(s));
  }
  return total / double(n);
}

TEST(CrossEntropy, LossGradientAndInPlace) {
  Context ctx(Device::cpu());
  const int64_t n = 5, v = 7;
  auto xv = randn(n * v, 1, 3.0);
  for (int64_t j = 0; j < v; ++j) xv[2 * v + j] += 1000.0;  // a row that overflows a naive exp
  const std::vector<int32_t> tv = {0, 6, 3, 3, 1};
  Tensor logits = f64(ctx, {n, v}, xv), targets = make_ids(ctx, {n}, tv);
  Tensor loss = Tensor::empty({1}, DType::F64, ctx.device());
  Tensor dlogits = Tensor::empty({n, v}, DType::F64, ctx.device());
  poison(ctx, loss);
  poison(ctx, dlogits);
  ops::cross_entropy(ctx, loss, &dlogits, logits, targets);
  EXPECT_NEAR(host(ctx, loss)[0], cross_entropy_ref(xv, tv, n, v), 1e-12);
  auto forward = [&](const std::vector<double>& x) { return std::vector<double>{cross_entropy_ref(x, tv, n, v)}; };
  expect_gradient(forward, xv, {1.0}, host(ctx, dlogits), 1e-6, 1e-9);

  // Without dlogits, and with dlogits over the logits themselves.
  Tensor loss2 = Tensor::empty({1}, DType::F64, ctx.device());
  ops::cross_entropy(ctx, loss2, nullptr, logits, targets);
  EXPECT_EQ(host(ctx, loss2)[0], host(ctx, loss)[0]);
  ops::cross_entropy(ctx, loss2, &logits, logits, targets);
  EXPECT_EQ(host(ctx, loss2)[0], host(ctx, loss)[0]);
  PT_EXPECT_ALLCLOSE(host(ctx, logits), host(ctx, dlogits), 1e-15, 1e-18);
}

TEST(CrossEntropy, Fp32MatchesFp64) {
  Context ctx(Device::cpu());
  const int64_t n = 6, v = 33;
  const auto xv = randn(n * v, 2, 4.0);
  const auto tv = random_ids(n, int32_t(v), 3);
  Tensor logits = f32(ctx, {n, v}, xv), targets = make_ids(ctx, {n}, tv);
  Tensor loss = Tensor::empty({1}, DType::F32, ctx.device());
  ops::cross_entropy(ctx, loss, nullptr, logits, targets);
  EXPECT_NEAR(host(ctx, loss)[0], cross_entropy_ref(host(ctx, logits), tv, n, v), 1e-5);
}

TEST(CrossEntropy, BadTargetsAndShapesGiveClearErrors) {
  Context ctx(Device::cpu());
  Tensor logits = f64(ctx, {2, 3}, randn(6, 1));
  Tensor loss = Tensor::empty({1}, DType::F64, ctx.device());
  Tensor bad = make_ids(ctx, {2}, {1, 3});
  try {
    ops::cross_entropy(ctx, loss, nullptr, logits, bad);
    FAIL() << "target 3 accepted for V = 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 3 at position 1 is outside [0, 3)"), std::string::npos) << e.what();
  }
  Tensor short_targets = make_ids(ctx, {1}, {0});
  EXPECT_THROW(ops::cross_entropy(ctx, loss, nullptr, logits, short_targets), Error);
  Tensor loss32 = Tensor::empty({1}, DType::F32, ctx.device());
  Tensor ok = make_ids(ctx, {2}, {0, 2});
  EXPECT_THROW(ops::cross_entropy(ctx, loss32, nullptr, logits, ok), Error);  // fp64 logits → fp64 loss
}

TEST(MseLoss, MeanAndSumWithGradient) {
  Context ctx(Device::cpu());
  const int64_t n = 9;
  const auto pv = randn(n, 4), tv = randn(n, 5);
  for (auto reduction : {ops::Reduction::Mean, ops::Reduction::Sum}) {
    const double norm = reduction == ops::Reduction::Mean ? double(n) : 1.0;
    Tensor pred = f64(ctx, {3, 3}, pv), target = f64(ctx, {3, 3}, tv);
    Tensor loss = Tensor::empty({1}, DType::F64, ctx.device()), dpred = Tensor::empty({3, 3}, DType::F64, ctx.device());
    poison(ctx, dpred);
    ops::mse_loss(ctx, loss, &dpred, pred, target, reduction);
    auto forward = [&](const std::vector<double>& p) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += (p[i] - tv[i]) * (p[i] - tv[i]);
      return std::vector<double>{s / norm};
    };
    EXPECT_NEAR(host(ctx, loss)[0], forward(pv)[0], 1e-14);
    expect_gradient(forward, pv, {1.0}, host(ctx, dpred));
  }
}

}  // namespace
}  // namespace pt::test
