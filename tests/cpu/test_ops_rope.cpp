// RoPE on the CPU: forward against the rotation formula evaluated here, inverse ∘ forward =
// identity, backward (= inverse) against finite differences, in place on slices of a fused
// (B, T, 3, H, D) QKV buffer.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "cpu/test_ops_helpers.h"
#include "ops/rope.h"

namespace pt::test {
namespace {

constexpr double kTheta = 10000.0;

// Contiguous (B, H, T, D) in, rotated out: pair (2i, 2i+1) at position t by t·θ^(−2i/D).
std::vector<double> rope_ref(const std::vector<double>& x, int64_t B, int64_t H, int64_t T, int64_t D,
                             double sign = 1.0) {
  std::vector<double> y(x.size());
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double angle = sign * double(t) / std::pow(kTheta, double(2 * i) / double(D));
        const int64_t o = (bh * T + t) * D + 2 * i;
        y[o] = x[o] * std::cos(angle) - x[o + 1] * std::sin(angle);
        y[o + 1] = x[o] * std::sin(angle) + x[o + 1] * std::cos(angle);
      }
  return y;
}

TEST(Rope, ForwardInverseAndGradient) {
  Context ctx(Device::cpu());
  const int64_t B = 2, H = 3, T = 5, D = 6, n = B * H * T * D;
  const auto xv = randn(n, 1), w = randn(n, 2);
  Tensor x = f64(ctx, {B, H, T, D}, xv), y = Tensor::empty({B, H, T, D}, DType::F64, ctx.device());
  poison(ctx, y);
  ops::rope(ctx, y, x, kTheta, false);
  PT_EXPECT_ALLCLOSE(host(ctx, y), rope_ref(xv, B, H, T, D), 1e-14, 1e-14);

  Tensor back = Tensor::empty({B, H, T, D}, DType::F64, ctx.device());
  ops::rope(ctx, back, y, kTheta, true);
  PT_EXPECT_ALLCLOSE(host(ctx, back), xv, 1e-14, 1e-14);

  // Backward: d/dx Σ w ⊙ rope(x) = rope⁻¹(w).
  Tensor dx = f64(ctx, {B, H, T, D}, w);
  ops::rope(ctx, dx, dx, kTheta, true);
  expect_gradient([&](const std::vector<double>& xx) { return rope_ref(xx, B, H, T, D); }, xv, w, host(ctx, dx));
}

TEST(Rope, InPlaceOnSlicesOfFusedQkv) {
  Context ctx(Device::cpu());
  const int64_t B = 2, T = 4, H = 2, D = 4, C = H * D, n = B * T * 3 * C;
  const auto qkv_v = randn(n, 3);
  Tensor qkv = f64(ctx, {B, T, 3, H, D}, qkv_v);
  // q and k as (B, H, T, D) views: strides (T·3C, D, 3C, 1), offsets 0 and C.
  for (int64_t which : {0, 1}) {
    Tensor view = qkv.as_strided({B, H, T, D}, {T * 3 * C, D, 3 * C, 1}, which * C);
    ops::rope(ctx, view, view, kTheta, false);
  }
  const auto got = host(ctx, qkv);
  for (int64_t which = 0; which < 3; ++which) {
    // Gather this slice contiguously as (B, H, T, D), rotate q and k in the reference.
    std::vector<double> slice(B * H * T * D), now(B * H * T * D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t src = (((b * T + t) * 3 + which) * H + h) * D + d;
            slice[((b * H + h) * T + t) * D + d] = qkv_v[src];
            now[((b * H + h) * T + t) * D + d] = got[src];
          }
    const auto want = which < 2 ? rope_ref(slice, B, H, T, D) : slice;  // v untouched
    PT_EXPECT_ALLCLOSE(now, want, 1e-14, 1e-14);
  }
}

TEST(Rope, OddHeadDimensionIsAClearError) {
  Context ctx(Device::cpu());
  Tensor x = f64(ctx, {1, 1, 2, 5}, randn(10, 1));
  try {
    ops::rope(ctx, x, x, kTheta, false);
    FAIL() << "odd D accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope: D = 5 must be even"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pt::test
