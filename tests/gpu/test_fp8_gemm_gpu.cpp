// ops::matmul_fp8_of on the GPU (amax → cast, plain or transposed → scaled FP8 GEMM with
// ops::matmul's epilogue) against its CPU emulation on the same inputs: every input is a bf16
// value, so both sides compute the same amax, scales and fp8 bits, and differ only in how the
// products are summed and C is rounded. Skips without FP8 tensor cores.
#include <gtest/gtest.h>

#include <cmath>

#include "common/fp8_reference.h"
#include "core/fp8.h"
#include "gpu/test_ops_gpu_helpers.h"
#include "ops/fp8_gemm.h"

namespace pt::test {
namespace {

constexpr Fp8Format E4M3 = Fp8Format::E4M3, E5M2 = Fp8Format::E5M2;

std::vector<double> bf16_values(int64_t n, uint64_t seed, double std) {
  std::vector<double> v = randn(n, seed, std);
  for (auto& x : v) x = round_to_bf16(float(x));
  return v;
}

struct Case {
  bool trans_a, trans_b;
  ops::Fp8Kinds kinds;
  float beta;
  bool separate_c_in;
  DType c;
};

class GpuFp8GemmOf : public ::testing::TestWithParam<Case> {};

TEST_P(GpuFp8GemmOf, MatchesTheCpuEmulation) {
  PT_REQUIRE_GPU();
  const Case t = GetParam();
  Context gpu(Device::cuda(0), Precision::BF16), cpu(Device::cpu());
  if (!fp8_unsupported_reason(gpu.target()).empty()) GTEST_SKIP() << "no FP8 tensor cores";
  const int64_t m = 48, n = 64, k = 256;
  Fp8MatmulProblem g{m,
                     n,
                     k,
                     t.trans_a,
                     t.trans_b,
                     bf16_values(m * k, 1, 1.0),
                     bf16_values(k * n, 2, 0.02),
                     bf16_values(m * n, 3, 1.0)};
  Tensor a = make_tensor(gpu, g.a_shape(), DType::BF16, g.a), b = make_tensor(gpu, g.b_shape(), DType::BF16, g.b);
  Tensor c0 = make_tensor(gpu, {m, n}, t.c, g.c0);
  Tensor c = t.separate_c_in ? Tensor::empty({m, n}, t.c, gpu.device()) : c0;
  if (t.separate_c_in) poison(gpu, c);
  ops::matmul_fp8_of(gpu, c, a, b, t.trans_a, t.trans_b, t.kinds, 1.0f, t.beta, t.separate_c_in ? &c0 : nullptr);
  const auto got = c.to_host_f64(gpu);

  Tensor ca = make_tensor(cpu, g.a_shape(), DType::F32, g.a), cb = make_tensor(cpu, g.b_shape(), DType::F32, g.b);
  Tensor cc = make_tensor(cpu, {m, n}, DType::F32, g.c0);
  ops::matmul_fp8_of(cpu, cc, ca, cb, t.trans_a, t.trans_b, t.kinds, 1.0f, t.beta);
  const auto want = cc.to_host_f64(cpu);
  std::vector<double> mag;
  matmul_reference(g, dequantised_reference(g.a, t.kinds.a), dequantised_reference(g.b, t.kinds.b), 1.0, t.beta, &mag);
  // Bound per element, with S the sum of |products| (and |beta·C|): C's rounding (half a bf16 ulp
  // of the result, doubled: 2^-8; 2^-23 for fp32 C); two fp32 summations in different orders,
  // 2·(k + 4)·2^-24·S; Hopper's FP8 accumulator, about 14 bits per block before promotion to
  // fp32, errors adding like a random walk: 2^-14·√k·S (test_fp8_matmul_gpu.cpp says why).
  const double out = t.c == DType::BF16 ? 0x1p-8 : 0x1p-23;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound =
        out * std::fabs(want[i]) + (2.0 * double(k + 4) * 0x1p-24 + 0x1p-14 * std::sqrt(double(k))) * mag[i];
    if (!(std::fabs(got[i] - want[i]) <= bound) && ++bad <= 5)
      ADD_FAILURE() << "C[" << i / size_t(n) << ", " << i % size_t(n) << "] = " << got[i] << ", CPU emulation "
                    << want[i] << ", bound " << bound;
  }
  EXPECT_EQ(bad, 0);
  if (t.separate_c_in) EXPECT_EQ(c0.to_host_f64(gpu), make_tensor(gpu, {m, n}, t.c, g.c0).to_host_f64(gpu));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      out.push_back({ta, tb, {E4M3, E4M3}, 0.0f, false, DType::BF16});  // forward
      out.push_back({ta, tb, {E5M2, E4M3}, 1.0f, false, DType::BF16});  // dX added onto dX
      out.push_back({ta, tb, {E5M2, E4M3}, 1.0f, true, DType::BF16});   // a residual read from elsewhere
      out.push_back({ta, tb, {E5M2, E4M3}, 1.0f, false, DType::F32});   // dW into fp32 gradients
    }
  return out;
}
INSTANTIATE_TEST_SUITE_P(All, GpuFp8GemmOf, ::testing::ValuesIn(cases()), [](const auto& info) {
  const Case& t = info.param;
  return std::string(t.trans_a ? "At" : "A") + (t.trans_b ? "Bt" : "B") + "_" + (t.kinds.a == E4M3 ? "e4m3" : "e5m2") +
         "_beta" + std::to_string(int(t.beta)) + (t.separate_c_in ? "_cin" : "") + "_C" + dtype_name(t.c);
});

// One cast of dy for both backward GEMMs (as stored for dX = dy·W, transposed for dW = dyᵀ·x, from
// one read of dy) gives the bits of each GEMM casting its own; a layout not cast is refused.
TEST(GpuFp8Operands, OneCastForTwoGemmsEqualsACastEach) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::BF16);
  if (!fp8_unsupported_reason(gpu.target()).empty()) GTEST_SKIP() << "no FP8 tensor cores";
  const int64_t n = 64, d_out = 48, d_in = 32;
  Tensor dy = make_tensor(gpu, {n, d_out}, DType::BF16, bf16_values(n * d_out, 4, 1e-3));
  Tensor w = make_tensor(gpu, {d_out, d_in}, DType::BF16, bf16_values(d_out * d_in, 5, 0.02));
  Tensor x = make_tensor(gpu, {n, d_in}, DType::BF16, bf16_values(n * d_in, 6, 1.0));
  const ops::Fp8Kinds kinds{E5M2, E4M3};
  Tensor dx_each = Tensor::empty({n, d_in}, DType::BF16, gpu.device());
  Tensor dx_shared = Tensor::empty({n, d_in}, DType::BF16, gpu.device());
  Tensor dw_each = Tensor::empty({d_out, d_in}, DType::F32, gpu.device());
  Tensor dw_shared = Tensor::empty({d_out, d_in}, DType::F32, gpu.device());
  ops::matmul_fp8_of(gpu, dx_each, dy, w, false, false, kinds);
  ops::matmul_fp8_of(gpu, dw_each, dy, x, true, false, kinds);
  const ops::Fp8Operand q = ops::fp8_operand(gpu, dy, E5M2, /*stored=*/true, /*transposed=*/true);
  ops::matmul_fp8_operands(gpu, dx_shared, q, ops::fp8_operand(gpu, w, E4M3, false, true), false, false);
  ops::matmul_fp8_operands(gpu, dw_shared, q, ops::fp8_operand(gpu, x, E4M3, false, true), true, false);
  EXPECT_EQ(dx_shared.to_host_f64(gpu), dx_each.to_host_f64(gpu));
  EXPECT_EQ(dw_shared.to_host_f64(gpu), dw_each.to_host_f64(gpu));
  const ops::Fp8Operand t_only = ops::fp8_operand(gpu, dy, E5M2, false, true);
  EXPECT_ERROR_HAS(
      ops::matmul_fp8_operands(gpu, dx_shared, t_only, ops::fp8_operand(gpu, w, E4M3, false, true), false, false),
      "A was not cast as stored");
}

}  // namespace
}  // namespace pt::test
