// matmul on the CPU against a triple loop written here: every transpose combination, alpha
// and beta, batch strides (including 0), row-stride views, per-head slices, bad shapes.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "cpu/test_ops_helpers.h"
#include "ops/matmul.h"

namespace pt::test {
namespace {

// Element (i, j) of a strided matrix in a host vector.
struct HostMat {
  const std::vector<double>* v;
  int64_t offset, row_stride, col_stride;
  double operator()(int64_t i, int64_t j) const { return (*v)[offset + i * row_stride + j * col_stride]; }
};
HostMat transposed(HostMat m) { return {m.v, m.offset, m.col_stride, m.row_stride}; }

// C (m × n) = alpha · A B + beta · C0 with A (m × k), B (k × n) given as HostMats.
std::vector<double> reference_gemm(HostMat a, HostMat b, const std::vector<double>& c0, int64_t m, int64_t n, int64_t k,
                                   double alpha, double beta) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a(i, p) * b(p, j);
      c[i * n + j] = alpha * s + beta * c0[i * n + j];
    }
  return c;
}

class MatmulTranspose : public ::testing::TestWithParam<std::tuple<bool, bool, DType>> {};

TEST_P(MatmulTranspose, MatchesTripleLoop) {
  const auto [ta, tb, dtype] = GetParam();
  Context ctx(Device::cpu());
  const int64_t m = 5, n = 7, k = 3;
  const auto av = randn(m * k, 1), bv = randn(k * n, 2), cv = randn(m * n, 3);
  const Shape a_shape = ta ? Shape{k, m} : Shape{m, k};
  const Shape b_shape = tb ? Shape{n, k} : Shape{k, n};
  Tensor a = make_tensor(ctx, a_shape, dtype, av), b = make_tensor(ctx, b_shape, dtype, bv);
  Tensor c = make_tensor(ctx, {m, n}, dtype, cv);
  ops::matmul(ctx, c, a, b, ta, tb, 1.5f, 0.5f);

  HostMat ha{&av, 0, a_shape[1], 1}, hb{&bv, 0, b_shape[1], 1};
  const auto ref = reference_gemm(ta ? transposed(ha) : ha, tb ? transposed(hb) : hb, cv, m, n, k, 1.5, 0.5);
  const double tol = dtype == DType::F64 ? 1e-13 : 1e-6;  // fp32: a few ulps over k = 3
  PT_EXPECT_ALLCLOSE(host(ctx, c), ref, tol, tol);
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, MatmulTranspose,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(DType::F64, DType::F32)));

TEST(Matmul, BetaZeroIgnoresPoisonedOutput) {
  Context ctx(Device::cpu());
  Tensor a = f64(ctx, {4, 6}, randn(24, 4)), b = f64(ctx, {6, 3}, randn(18, 5));
  Tensor c = Tensor::empty({4, 3}, DType::F64, ctx.device());
  poison(ctx, c);
  ops::matmul(ctx, c, a, b, false, false);
  const auto av = host(ctx, a), bv = host(ctx, b);
  const auto ref = reference_gemm({&av, 0, 6, 1}, {&bv, 0, 3, 1}, std::vector<double>(12, 0.0), 4, 3, 6, 1, 0);
  PT_EXPECT_ALLCLOSE(host(ctx, c), ref, 1e-13, 1e-13);
}

// A separate C input (the fused residual add): c = A·B + beta·c_in, c_in untouched, the same
// values as copying c_in into c and accumulating there; a c_in of another shape is refused.
TEST(Matmul, SeparateCInputLeavesItAndGivesTheAccumulatedSum) {
  Context ctx(Device::cpu());
  Tensor a = f64(ctx, {4, 6}, randn(24, 4)), b = f64(ctx, {6, 3}, randn(18, 5));
  const auto cin_values = randn(12, 6);
  Tensor c_in = f64(ctx, {4, 3}, cin_values), c = Tensor::empty({4, 3}, DType::F64, ctx.device());
  poison(ctx, c);
  ops::matmul(ctx, c, a, b, false, false, 1.0f, 1.0f, &c_in);
  EXPECT_EQ(host(ctx, c_in), cin_values);
  const auto av = host(ctx, a), bv = host(ctx, b);
  const auto ref = reference_gemm({&av, 0, 6, 1}, {&bv, 0, 3, 1}, cin_values, 4, 3, 6, 1, 1);
  PT_EXPECT_ALLCLOSE(host(ctx, c), ref, 1e-13, 1e-13);
  Tensor wrong = f64(ctx, {3, 4}, randn(12, 7));
  EXPECT_THROW(ops::matmul(ctx, c, a, b, false, false, 1.0f, 1.0f, &wrong), Error);
}

TEST(Matmul, BatchedWithBroadcastOperand) {
  Context ctx(Device::cpu());
  const int64_t batch = 3, m = 4, n = 5, k = 6;
  const auto av = randn(m * k, 6), bv = randn(batch * k * n, 7);
  Tensor b = f64(ctx, {batch, k, n}, bv);
  Tensor a2 = f64(ctx, {m, k}, av);
  // A as a 3-D view with batch stride 0, and as a plain 2-D operand: both broadcast.
  Tensor a3 = a2.as_strided({batch, m, k}, {0, k, 1});
  for (const Tensor* a : {&a2, &a3}) {
    Tensor c = Tensor::empty({batch, m, n}, DType::F64, ctx.device());
    poison(ctx, c);
    ops::matmul(ctx, c, *a, b, false, false);
    const auto got = host(ctx, c);
    for (int64_t i = 0; i < batch; ++i) {
      const auto ref =
          reference_gemm({&av, 0, k, 1}, {&bv, i * k * n, n, 1}, std::vector<double>(m * n, 0.0), m, n, k, 1, 0);
      std::vector<double> slice(got.begin() + i * m * n, got.begin() + (i + 1) * m * n);
      PT_EXPECT_ALLCLOSE(slice, ref, 1e-13, 1e-13);
    }
  }
}

TEST(Matmul, RowStrideViewsReadAndWriteOnlyTheirElements) {
  Context ctx(Device::cpu());
  // A = columns 2..6 of a (4, 9) matrix; C = columns 1..3 of a (4, 7) matrix.
  const auto big_a = randn(4 * 9, 8), bv = randn(5 * 3, 9), big_c = randn(4 * 7, 10);
  Tensor ta = f64(ctx, {4, 9}, big_a), b = f64(ctx, {5, 3}, bv), tc = f64(ctx, {4, 7}, big_c);
  Tensor a = ta.narrow(1, 2, 5);
  Tensor c = tc.narrow(1, 1, 3);
  ops::matmul(ctx, c, a, b, false, false, 2.0f, 1.0f);
  std::vector<double> c0(12);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) c0[i * 3 + j] = big_c[i * 7 + 1 + j];
  const auto ref = reference_gemm({&big_a, 2, 9, 1}, {&bv, 0, 3, 1}, c0, 4, 3, 5, 2, 1);
  const auto got = host(ctx, tc);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 7; ++j) {
      const bool inside = j >= 1 && j < 4;
      const double want = inside ? ref[i * 3 + (j - 1)] : big_c[i * 7 + j];
      EXPECT_NEAR(got[i * 7 + j], want, 1e-12) << "at (" << i << ", " << j << ")";
    }
}

TEST(Matmul, PerHeadSlicesOfTokenMajorTensor) {
  // q, k as (T, H, D) token-major tensors; per-head matrices are the strided view (H, T, D)
  // with strides (D, H·D, 1). scores (H, T, T) = q_h k_hᵀ for every head in one batched call.
  Context ctx(Device::cpu());
  const int64_t T = 5, H = 3, D = 4;
  const auto qv = randn(T * H * D, 11), kv = randn(T * H * D, 12);
  Tensor q = f64(ctx, {T, H, D}, qv), k = f64(ctx, {T, H, D}, kv);
  Tensor qh = q.as_strided({H, T, D}, {D, H * D, 1}), kh = k.as_strided({H, T, D}, {D, H * D, 1});
  Tensor s = Tensor::empty({H, T, T}, DType::F64, ctx.device());
  poison(ctx, s);
  ops::matmul(ctx, s, qh, kh, false, true);
  const auto got = host(ctx, s);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) {
        double want = 0;
        for (int64_t d = 0; d < D; ++d) want += qv[(i * H + h) * D + d] * kv[(j * H + h) * D + d];
        EXPECT_NEAR(got[(h * T + i) * T + j], want, 1e-12);
      }
}

TEST(Matmul, BadShapesGiveClearErrors) {
  Context ctx(Device::cpu());
  Tensor a = f64(ctx, {4, 3}, randn(12, 1)), b = f64(ctx, {4, 2}, randn(8, 2));
  Tensor c = Tensor::empty({4, 2}, DType::F64, ctx.device());
  try {
    ops::matmul(ctx, c, a, b, false, false);
    FAIL() << "inner-dimension mismatch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: inner dimensions differ"), std::string::npos) << e.what();
  }
  Tensor b_ok = f64(ctx, {3, 2}, randn(6, 3));
  Tensor c_bad = Tensor::empty({4, 3}, DType::F64, ctx.device());
  EXPECT_THROW(ops::matmul(ctx, c_bad, a, b_ok, false, false), Error);
  Tensor b32 = f32(ctx, {3, 2}, randn(6, 3));
  EXPECT_THROW(ops::matmul(ctx, c, a, b32, false, false), Error);  // mixed dtypes
  Tensor bf = make_tensor(ctx, {3, 2}, DType::BF16, randn(6, 3));
  Tensor abf = make_tensor(ctx, {4, 3}, DType::BF16, randn(12, 3));
  EXPECT_THROW(ops::matmul(ctx, c, abf, bf, false, false), Error);  // bf16 is GPU-only
}

}  // namespace
}  // namespace pt::test
