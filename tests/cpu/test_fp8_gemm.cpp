// ops::matmul_fp8_of on the CPU: the emulation of the FP8 Linear GEMM (quantise each operand with
// the host conversions and current scaling, multiply in fp32) against an fp64 computation of the
// same quantisation from its definition, and against the exact product within FP8's rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "common/fp8_reference.h"
#include "common/test_util.h"
#include "core/error.h"
#include "core/fp8.h"
#include "ops/fp8_gemm.h"

namespace pt::test {
namespace {

constexpr Fp8Format E4M3 = Fp8Format::E4M3, E5M2 = Fp8Format::E5M2;

// Values over several decades, so that both the largest values (which set the scale) and
// subnormal-range ones are rounded.
std::vector<double> spread(int64_t n, uint64_t seed) {
  std::vector<double> v = randn(n, seed);
  const std::vector<double> e = uniform(n, seed + 100, -6.0, 2.0);
  for (size_t i = 0; i < v.size(); ++i) v[i] *= std::exp2(e[i]);
  return v;
}

Fp8MatmulProblem problem(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, uint64_t seed) {
  return {m, n, k, trans_a, trans_b, spread(m * k, seed), spread(k * n, seed + 1), randn(m * n, seed + 2)};
}

// |x − dequantised(x)| ≤ u·|x| + d: u the format's relative precision (half an ulp: 2^-4 for
// E4M3's 3 mantissa bits, 2^-3 for E5M2's 2), d half the smallest subnormal (2^-10 for E4M3,
// 2^-17 for E5M2) divided by the scale, for values that underflow into the subnormals.
double abs_error(double x, Fp8Format fmt, double amax) {
  const double u = fmt == E4M3 ? 0x1p-4 : 0x1p-3, d = fmt == E4M3 ? 0x1p-10 : 0x1p-17;
  return u * std::fabs(x) + d * amax / fp8_max(fmt);
}

struct Case {
  bool trans_a, trans_b;
  ops::Fp8Kinds kinds;
  float alpha, beta;
  bool separate_c_in;
};

class CpuFp8Gemm : public ::testing::TestWithParam<Case> {};

TEST_P(CpuFp8Gemm, MatchesFp64OfTheQuantisedOperandsAndTheExactProductWithinFp8Rounding) {
  const Case t = GetParam();
  Context cpu(Device::cpu());
  const Fp8MatmulProblem g = problem(5, 7, 48, t.trans_a, t.trans_b, 11);
  Tensor a = make_tensor(cpu, g.a_shape(), DType::F32, g.a), b = make_tensor(cpu, g.b_shape(), DType::F32, g.b);
  Tensor c0 = make_tensor(cpu, {g.m, g.n}, DType::F32, g.c0);
  Tensor c = t.separate_c_in ? Tensor::empty({g.m, g.n}, DType::F32, cpu.device()) : c0;
  if (t.separate_c_in) poison(cpu, c);
  ops::matmul_fp8_of(cpu, c, a, b, t.trans_a, t.trans_b, t.kinds, t.alpha, t.beta, t.separate_c_in ? &c0 : nullptr);
  const auto got = c.to_host_f64(cpu);

  // 1. The fp64 computation from the definition: fp32 sums of exact fp8 products, rounded to fp32
  //    at most k + 4 times (products, sums, alpha and the scales, beta·C).
  std::vector<double> mag;
  const auto qa = dequantised_reference(g.a, t.kinds.a), qb = dequantised_reference(g.b, t.kinds.b);
  const auto ref = matmul_reference(g, qa, qb, t.alpha, t.beta, &mag);
  // 2. The exact product: each operand off by at most abs_error, so each term a·b by
  //    |a|·e_b + |b|·e_a + e_a·e_b.
  const auto exact = matmul_reference(g, g.a, g.b, t.alpha, t.beta);
  double amax_a = 0, amax_b = 0;
  for (double v : g.a) amax_a = std::max(amax_a, std::fabs(v));
  for (double v : g.b) amax_b = std::max(amax_b, std::fabs(v));
  int bad = 0;
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      const size_t ij = size_t(i * g.n + j);
      const double fp32_bound = double(g.k + 4) * 0x1p-24 * mag[ij];
      double fp8_bound = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double x = g.op_a(g.a, i, p), y = g.op_b(g.b, p, j);
        const double ex = abs_error(x, t.kinds.a, amax_a), ey = abs_error(y, t.kinds.b, amax_b);
        fp8_bound += std::fabs(x) * ey + std::fabs(y) * ex + ex * ey;
      }
      fp8_bound = std::fabs(t.alpha) * fp8_bound + fp32_bound;
      if (!(std::fabs(got[ij] - ref[ij]) <= fp32_bound) && ++bad <= 3)
        ADD_FAILURE() << "C[" << i << ", " << j << "] = " << got[ij] << ", fp64 of the quantised operands " << ref[ij];
      if (!(std::fabs(got[ij] - exact[ij]) <= fp8_bound) && ++bad <= 3)
        ADD_FAILURE() << "C[" << i << ", " << j << "] = " << got[ij] << ", exact " << exact[ij] << ", FP8 bound "
                      << fp8_bound;
    }
  EXPECT_EQ(bad, 0);
  if (t.separate_c_in) EXPECT_EQ(c0.to_host_f64(cpu), make_tensor(cpu, {g.m, g.n}, DType::F32, g.c0).to_host_f64(cpu));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      out.push_back({ta, tb, {E4M3, E4M3}, 1.0f, 0.0f, false});  // forward
      out.push_back({ta, tb, {E5M2, E4M3}, 1.0f, 1.0f, false});  // dX added onto dX
      out.push_back({ta, tb, {E5M2, E4M3}, 0.5f, 1.0f, true});   // a residual read from elsewhere
      out.push_back({ta, tb, {E4M3, E5M2}, 1.0f, 0.0f, false});  // E5M2 as B
    }
  return out;
}
INSTANTIATE_TEST_SUITE_P(All, CpuFp8Gemm, ::testing::ValuesIn(cases()), [](const auto& info) {
  const Case& t = info.param;
  return std::string(t.trans_a ? "At" : "A") + (t.trans_b ? "Bt" : "B") + "_" + (t.kinds.a == E4M3 ? "e4m3" : "e5m2") +
         "x" + (t.kinds.b == E4M3 ? "e4m3" : "e5m2") + "_beta" + std::to_string(int(t.beta)) +
         (t.separate_c_in ? "_cin" : "") + (t.alpha != 1.0f ? "_alpha" : "");
});

TEST(CpuFp8GemmErrors, RefusesTwoE5M2OperandsAndStridedOperands) {
  Context cpu(Device::cpu());
  Tensor a = make_tensor(cpu, {4, 16}, DType::F32, randn(64, 1)),
         b = make_tensor(cpu, {8, 16}, DType::F32, randn(128, 2));
  Tensor c = Tensor::empty({4, 8}, DType::F32, cpu.device());
  EXPECT_ERROR_HAS(ops::matmul_fp8_of(cpu, c, a, b, false, true, {E5M2, E5M2}), "at most one E5M2");
  Tensor wide = make_tensor(cpu, {8, 32}, DType::F32, randn(256, 3));
  Tensor strided = wide.narrow(1, 0, 16);
  EXPECT_ERROR_HAS(ops::matmul_fp8_of(cpu, c, a, strided, false, true, {E4M3, E4M3}), "contiguous");
}

// An amax given to fp8_operand (a producer's, or one kept from an earlier cast) replaces the
// measured one: twice the true amax halves the scale, and the values are quantised with it; the
// operand carries the amax it used. A malformed amax is one error naming it.
TEST(CpuFp8Operand, TakesAGivenAmaxInsteadOfMeasuringOne) {
  Context cpu(Device::cpu());
  const std::vector<double> v = spread(64, 7);
  Tensor x = make_tensor(cpu, {4, 16}, DType::F32, v);
  const ops::Fp8Operand measured = ops::fp8_operand(cpu, x, E4M3, true, false);
  const float amax = measured.amax.data_as<float>()[0];
  double want_amax = 0.0;
  for (double e : v) want_amax = std::fmax(want_amax, std::fabs(double(float(e))));
  EXPECT_EQ(amax, float(want_amax));
  Tensor twice = make_tensor(cpu, {1}, DType::F32, {2.0 * amax});
  const ops::Fp8Operand given = ops::fp8_operand(cpu, x, E4M3, true, false, twice);
  EXPECT_EQ(given.amax.data_as<float>()[0], 2.0f * amax);
  EXPECT_EQ(given.host_scale_inv, 1.0f / fp8_scale_from_amax(2.0f * amax, E4M3));
  EXPECT_NE(given.host_scale_inv, measured.host_scale_inv);
  float scale_inv = 0.0f;
  const float known = 2.0f * amax;
  const std::vector<float> q = ops::fp8_quantise_host(x.data_as<float>(), x.numel(), E4M3, &scale_inv, &known);
  const float* got = given.stored.data_as<float>();
  for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(got[i], q[i]) << i;
  EXPECT_ERROR_HAS(ops::fp8_operand(cpu, x, E4M3, true, false, make_tensor(cpu, {2}, DType::F32, {1.0, 1.0})),
                   "amax must hold 1 element");
  EXPECT_ERROR_HAS(ops::fp8_operand(cpu, x, E4M3, true, false, make_tensor(cpu, {1}, DType::F64, {1.0})),
                   "amax is fp64");
}

}  // namespace
}  // namespace pt::test
