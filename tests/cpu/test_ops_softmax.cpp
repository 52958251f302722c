// Softmax on the CPU: forward against exp/sum evaluated here (with and without the
// bottom-right causal mask, Tq < Tk and Tq > Tk), in place, backward against finite
// differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>

#include "core/error.h"
#include "cpu/test_ops_helpers.h"
#include "ops/softmax.h"

namespace pt::test {
namespace {

// softmax(scale · s + mask) per row of (R, Tq, Tk); key j visible to query i iff
// j ≤ i + Tk − Tq; a row with no visible key is all zeros.
std::vector<double> softmax_ref(const std::vector<double>& s, int64_t R, int64_t tq, int64_t tk, double scale,
                                bool causal) {
  std::vector<double> p(s.size(), 0.0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < tq; ++i) {
      const int64_t row = (r * tq + i) * tk;
      double total = 0;
      for (int64_t j = 0; j < tk; ++j)
        if (!causal || j <= i + tk - tq) total += std::exp(scale * s[row + j]);
      for (int64_t j = 0; j < tk; ++j)
        if (!causal || j <= i + tk - tq) p[row + j] = std::exp(scale * s[row + j]) / total;
    }
  return p;
}

struct Case {
  int64_t R, tq, tk;
  bool causal;
};
std::ostream& operator<<(std::ostream& o, const Case& c) {
  return o << "R" << c.R << "_Tq" << c.tq << "_Tk" << c.tk << (c.causal ? "_causal" : "");
}

class SoftmaxCases : public ::testing::TestWithParam<Case> {};

TEST_P(SoftmaxCases, ForwardAndBackward) {
  const Case c = GetParam();
  Context ctx(Device::cpu());
  const int64_t n = c.R * c.tq * c.tk;
  const double scale = 0.75;  // exact in fp32: the op takes a float
  const auto sv = randn(n, 1, 2.0), w = randn(n, 2);
  Tensor s = f64(ctx, {c.R, c.tq, c.tk}, sv), p = Tensor::empty({c.R, c.tq, c.tk}, DType::F64, ctx.device());
  poison(ctx, p);
  ops::softmax_forward(ctx, p, s, scale, c.causal);
  const auto ref = softmax_ref(sv, c.R, c.tq, c.tk, scale, c.causal);
  PT_EXPECT_ALLCLOSE(host(ctx, p), ref, 1e-14, 1e-16);

  Tensor inplace = f64(ctx, {c.R, c.tq, c.tk}, sv);
  ops::softmax_forward(ctx, inplace, inplace, scale, c.causal);
  PT_EXPECT_ALLCLOSE(host(ctx, inplace), ref, 1e-14, 1e-16);

  // Backward with dscores aliasing dprobs.
  Tensor g = f64(ctx, {c.R, c.tq, c.tk}, w);
  ops::softmax_backward(ctx, g, g, p, scale);
  expect_gradient([&](const std::vector<double>& ss) { return softmax_ref(ss, c.R, c.tq, c.tk, scale, c.causal); }, sv,
                  w, host(ctx, g));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxCases,
                         ::testing::Values(Case{2, 3, 5, false}, Case{2, 4, 4, true}, Case{1, 3, 6, true},
                                           Case{1, 5, 3, true}, Case{3, 1, 9, false}));

TEST(Softmax, FullyMaskedRowsAreZero) {
  Context ctx(Device::cpu());
  Tensor s = f64(ctx, {1, 4, 2}, randn(8, 3)), p = Tensor::empty({1, 4, 2}, DType::F64, ctx.device());
  ops::softmax_forward(ctx, p, s, 1.0f, true);
  const auto got = host(ctx, p);
  // Query i sees keys j ≤ i − 2: rows 0 and 1 see none.
  for (int j = 0; j < 4; ++j) EXPECT_EQ(got[j], 0.0);
  EXPECT_NEAR(got[4] + got[5], 1.0, 1e-15);
  EXPECT_EQ(got[5], 0.0);
}

TEST(Softmax, MismatchedShapesGiveClearErrors) {
  Context ctx(Device::cpu());
  Tensor s = f64(ctx, {2, 3}, randn(6, 1)), p = Tensor::empty({3, 2}, DType::F64, ctx.device());
  EXPECT_THROW(ops::softmax_forward(ctx, p, s, 1.0f, false), Error);
  Tensor p32 = Tensor::empty({2, 3}, DType::F32, ctx.device());
  EXPECT_THROW(ops::softmax_forward(ctx, p32, s, 1.0f, false), Error);
}

}  // namespace
}  // namespace pt::test
