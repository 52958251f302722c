// Optimizer kernels on the CPU: AdamW against torch.optim.AdamW's update written out here
// (several steps: weight decay, bias correction), SGD, the squared norm and the clipping
// coefficient min(1, max_norm / (norm + 1e-6)).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "cpu/test_ops_helpers.h"
#include "ops/optim_kernels.h"

namespace pt::test {
namespace {

TEST(AdamW, MatchesTorchFormulaOverSeveralSteps) {
  Context ctx(Device::cpu());
  const int64_t n = 10;
  ops::AdamWHyper h;
  h.lr = 0.01f;
  h.beta1 = 0.8f;
  h.beta2 = 0.95f;
  h.eps = 1e-6f;
  h.weight_decay = 0.1f;
  std::vector<double> p = randn(n, 1), m(n, 0.0), v(n, 0.0);
  Tensor tp = f64(ctx, {n}, p), tm = f64(ctx, {n}, m), tv = f64(ctx, {n}, v);
  for (int64_t step = 1; step <= 4; ++step) {
    const auto g = randn(n, 10 + step);
    h.step = step;
    ops::adamw_step(ctx, tp, f64(ctx, {n}, g), tm, tv, h);
    // torch: p ← p(1 − lr·wd); m ← β1 m + (1−β1) g; v ← β2 v + (1−β2) g²;
    //        p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
    const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
    for (int64_t i = 0; i < n; ++i) {
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr / (1 - std::pow(b1, double(step))) * m[i] /
              (std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, double(step))) + eps);
    }
    PT_EXPECT_ALLCLOSE(host(ctx, tp), p, 1e-13, 1e-15);
    PT_EXPECT_ALLCLOSE(host(ctx, tm), m, 1e-13, 1e-15);
    PT_EXPECT_ALLCLOSE(host(ctx, tv), v, 1e-13, 1e-15);
  }
}

TEST(AdamW, Fp32WithBf16CopyMatchesFp64) {
  Context ctx(Device::cpu());
  const int64_t n = 37;
  const auto p0 = randn(n, 2), g = randn(n, 3);
  ops::AdamWHyper h;  // torch defaults, first step
  Tensor p32 = f32(ctx, {n}, p0), m32 = f32(ctx, {n}, std::vector<double>(n, 0.0));
  Tensor v32 = f32(ctx, {n}, std::vector<double>(n, 0.0)), lowp = Tensor::empty({n}, DType::BF16, ctx.device());
  Tensor p64 = f64(ctx, {n}, host(ctx, p32)), m64 = f64(ctx, {n}, std::vector<double>(n, 0.0));
  Tensor v64 = f64(ctx, {n}, std::vector<double>(n, 0.0));
  Tensor g32 = f32(ctx, {n}, g);
  ops::adamw_step(ctx, p32, g32, m32, v32, h, &lowp);
  ops::adamw_step(ctx, p64, f64(ctx, {n}, host(ctx, g32)), m64, v64, h);
  PT_EXPECT_ALLCLOSE(host(ctx, p32), host(ctx, p64), 1e-6, 1e-7);
  const auto got32 = host(ctx, p32), gotbf = host(ctx, lowp);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(gotbf[i], double(round_to_bf16(float(got32[i]))));
}

TEST(AdamW, RejectsStepZeroAndMismatchedLengths) {
  Context ctx(Device::cpu());
  Tensor p = f64(ctx, {4}, randn(4, 1)), g = f64(ctx, {4}, randn(4, 2)), m = f64(ctx, {4}, randn(4, 3));
  Tensor v_short = f64(ctx, {3}, std::vector<double>(3, 0.0)), v = f64(ctx, {4}, std::vector<double>(4, 0.0));
  ops::AdamWHyper h;
  EXPECT_THROW(ops::adamw_step(ctx, p, g, m, v_short, h), Error);
  h.step = 0;
  EXPECT_THROW(ops::adamw_step(ctx, p, g, m, v, h), Error);
}

TEST(Sgd, MatchesTorchFormula) {
  Context ctx(Device::cpu());
  const int64_t n = 8;
  const auto p0 = randn(n, 4), g = randn(n, 5);
  Tensor p = f64(ctx, {n}, p0);
  ops::sgd_step(ctx, p, f64(ctx, {n}, g), 0.1f, 0.01f);
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = p0[i] - double(0.1f) * (g[i] + double(0.01f) * p0[i]);
  PT_EXPECT_ALLCLOSE(host(ctx, p), ref, 1e-15, 1e-16);
}

TEST(GradNorm, SquaredNormAccumulatesAndClipScales) {
  Context ctx(Device::cpu());
  const auto a = randn(7, 6), b = randn(5, 7);
  double want = 0;
  for (double x : a) want += x * x;
  for (double x : b) want += x * x;
  for (DType acc : {DType::F64, DType::F32}) {
    Tensor sumsq = make_tensor(ctx, {1}, acc, {0.0});
    ops::squared_norm_accumulate(ctx, sumsq, f64(ctx, {7}, a));
    ops::squared_norm_accumulate(ctx, sumsq, f64(ctx, {5}, b));
    EXPECT_NEAR(host(ctx, sumsq)[0], want, want * (acc == DType::F64 ? 1e-14 : 1e-6));
  }
  Tensor sumsq = f64(ctx, {1}, {want});
  const double norm = std::sqrt(want);
  // Clipping to half the norm scales by max_norm / (norm + 1e-6); a larger bound is a no-op.
  Tensor x = f64(ctx, {7}, a);
  ops::clip_by_norm(ctx, x, sumsq, float(norm / 2));
  const double coef = double(float(norm / 2)) / (norm + 1e-6);
  std::vector<double> ref(a);
  for (double& r : ref) r *= coef;
  PT_EXPECT_ALLCLOSE(host(ctx, x), ref, 1e-14, 0);
  Tensor y = f64(ctx, {7}, a);
  ops::clip_by_norm(ctx, y, sumsq, float(norm * 2));
  PT_EXPECT_ALLCLOSE(host(ctx, y), a, 0, 0);
}

// A clip folded into the update (GradClip) gives exactly clip_by_norm followed by the
// plain update, and leaves the gradient buffer unscaled.
TEST(GradClip, FoldedIntoAdamWAndSgdEqualsClipThenStep) {
  Context ctx(Device::cpu());
  const int64_t n = 41;
  const auto p0 = randn(n, 60), g0 = randn(n, 61);
  for (DType acc : {DType::F32, DType::F64}) {
    Tensor sumsq = make_tensor(ctx, {1}, acc, {0.0});
    Tensor g = f32(ctx, {n}, g0);
    ops::squared_norm_accumulate(ctx, sumsq, g);
    const float max_norm = float(std::sqrt(host(ctx, sumsq)[0]) / 3);  // clips by about 1/3
    const GradClip clip{&sumsq, max_norm};
    ops::AdamWHyper h;
    h.lr = 0.05f;
    // Folded.
    Tensor p = f32(ctx, {n}, p0), m = f32(ctx, {n}, std::vector<double>(n, 0.1)),
           v = f32(ctx, {n}, std::vector<double>(n, 0.2));
    ops::adamw_step(ctx, p, g, m, v, h, nullptr, clip);
    Tensor ps = f32(ctx, {n}, p0);
    ops::sgd_step(ctx, ps, g, 0.1f, 0.01f, nullptr, clip);
    EXPECT_EQ(host(ctx, g), host(ctx, f32(ctx, {n}, g0))) << "the gradient buffer stays unclipped";
    // Clip, then step.
    Tensor gc = f32(ctx, {n}, g0);
    ops::clip_by_norm(ctx, gc, sumsq, max_norm);
    Tensor pr = f32(ctx, {n}, p0), mr = f32(ctx, {n}, std::vector<double>(n, 0.1)),
           vr = f32(ctx, {n}, std::vector<double>(n, 0.2));
    ops::adamw_step(ctx, pr, gc, mr, vr, h);
    Tensor psr = f32(ctx, {n}, p0);
    ops::sgd_step(ctx, psr, gc, 0.1f, 0.01f);
    EXPECT_EQ(host(ctx, p), host(ctx, pr));
    EXPECT_EQ(host(ctx, m), host(ctx, mr));
    EXPECT_EQ(host(ctx, v), host(ctx, vr));
    EXPECT_EQ(host(ctx, ps), host(ctx, psr));
    EXPECT_NE(host(ctx, gc), host(ctx, g)) << "the clip must have scaled something";
  }
  Tensor bad = f32(ctx, {1}, {1.0});
  Tensor p = f32(ctx, {n}, p0), g = f32(ctx, {n}, g0);
  EXPECT_THROW(ops::sgd_step(ctx, p, g, 0.1f, 0.0f, nullptr, {&bad, 0.0f}), Error);  // max_norm 0
}

// The guard (GradClip): a non-finite folded squared norm leaves parameters, moments and
// the bf16 copy exactly as they were, whether it clips (max_norm finite) or only guards
// (kNoClip); a finite one with kNoClip is the plain update.
TEST(GradClip, NonFiniteNormLeavesEverythingAsItWas) {
  Context ctx(Device::cpu());
  const int64_t n = 17;
  const auto p0 = randn(n, 70), g0 = randn(n, 71);
  ops::AdamWHyper h;
  for (double bad : {std::nan(""), HUGE_VAL})
    for (float max_norm : {1.0f, kNoClip}) {
      Tensor sumsq = f32(ctx, {1}, {bad});
      Tensor p = f32(ctx, {n}, p0), g = f32(ctx, {n}, g0), m = f32(ctx, {n}, std::vector<double>(n, 0.1)),
             v = f32(ctx, {n}, std::vector<double>(n, 0.2));
      ops::adamw_step(ctx, p, g, m, v, h, nullptr, {&sumsq, max_norm});
      EXPECT_EQ(host(ctx, p), host(ctx, f32(ctx, {n}, p0)));
      EXPECT_EQ(host(ctx, m), std::vector<double>(n, double(0.1f)));
      EXPECT_EQ(host(ctx, v), std::vector<double>(n, double(0.2f)));
      ops::sgd_step(ctx, p, g, 0.1f, 0.0f, nullptr, {&sumsq, max_norm});
      EXPECT_EQ(host(ctx, p), host(ctx, f32(ctx, {n}, p0)));
    }
  Tensor finite = f32(ctx, {1}, {4.0});
  Tensor p = f32(ctx, {n}, p0), g = f32(ctx, {n}, g0), pr = f32(ctx, {n}, p0);
  ops::sgd_step(ctx, p, g, 0.1f, 0.0f, nullptr, {&finite, kNoClip});
  ops::sgd_step(ctx, pr, g, 0.1f, 0.0f);
  EXPECT_EQ(host(ctx, p), host(ctx, pr)) << "kNoClip with a finite norm is the plain update";
}

}  // namespace
}  // namespace pt::test
