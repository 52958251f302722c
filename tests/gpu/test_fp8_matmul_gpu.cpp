// ops::matmul_fp8 against fp64 on the dequantised operands (common/fp8_reference.h): bf16
// inputs go through the real pipeline (amax → cast, plain or transposed), and the reference
// reads back exactly the fp8 bits and scale inverses the GEMM read. Skips without FP8 tensor
// cores, where RefusedWithoutFp8TensorCores runs instead.
#include <gtest/gtest.h>

#include <cmath>

#include "common/fp8_reference.h"
#include "core/error.h"
#include "core/fp8.h"
#include "gpu/test_ops_gpu_helpers.h"
#include "ops/fp8.h"

namespace pt::test {
namespace {

#define PT_REQUIRE_FP8_GPU(ctx)                                                                 \
  do {                                                                                          \
    if (!fp8_unsupported_reason((ctx).target()).empty()) GTEST_SKIP() << "no FP8 tensor cores"; \
  } while (0)

// One operand, cast as the model will: its fp8 tensor, scale_inv, and their host copies.
struct Quantised {
  Tensor fp8, scale_inv;
  std::vector<uint8_t> bits;
  float scale_inv_host;
};
// values: a (rows, cols) bf16 matrix; transposed: store the cast as (cols, rows).
Quantised quantise(Context& gpu, const std::vector<double>& values, int64_t rows, int64_t cols, DType fmt,
                   bool transposed) {
  Tensor x = make_tensor(gpu, {rows, cols}, DType::BF16, values);
  Tensor amax = Tensor::empty({1}, DType::F32, gpu.device());
  Quantised q{Tensor::empty(transposed ? Shape{cols, rows} : Shape{rows, cols}, fmt, gpu.device()),
              Tensor::empty({1}, DType::F32, gpu.device()),
              {},
              0.0f};
  ops::fp8_amax(gpu, amax, x);
  if (transposed)
    ops::fp8_cast_transpose(gpu, q.fp8, q.scale_inv, x, amax);
  else
    ops::fp8_cast(gpu, q.fp8, q.scale_inv, x, amax);
  q.bits.resize(static_cast<size_t>(q.fp8.numel()));
  copy_bytes(gpu, q.bits.data(), DeviceKind::CPU, q.fp8.data(), DeviceKind::CUDA, q.bits.size());
  q.scale_inv_host = static_cast<float>(q.scale_inv.to_host_f64(gpu).at(0));
  return q;
}

struct Fp8GemmCase {
  int64_t m, n, k;
  DType a, b, c;
  bool fast_accum;
  // A (m, k) cast from a (k, m) matrix (dW's dYᵀ), B (n, k) from a (k, n) one (dX's weight, dW's Xᵀ).
  bool a_transposed, b_transposed;
};

// Error bound, per element of C, with r the fp64 reference and S = a_scale_inv·b_scale_inv·Σ_p
// |A_ip·B_jp| (the operands are identical on both sides, and each product of two fp8 values is
// exact in fp32, so only the sums and the output rounding differ):
//  · C's rounding: half a bf16 ulp, 2^-9·|r|, doubled for the error the sum already carries →
//    2^-8·|r| for bf16 C; 2^-23·|r| for fp32 C;
//  · fp32 sums in any order: at most (k−1)·2^-24·S;
//  · Hopper's FP8 MMAs add within one instruction block in a narrower accumulator (about 14
//    bits kept, as DeepSeek-V3 measured on H800) before cuBLASLt promotes the partial sum to
//    fp32; with FAST_ACCUM it never promotes. Those errors, 2^-14 relative per addition on
//    random-signed products, add like a random walk: 2^-14·√k·S (an expected-size bound, not a
//    worst case; for k = 6400 about 2^-7.7·S).
// A scale applied the wrong way, the two scales swapped with their operands' types, A·B instead
// of A·Bᵀ, or E4M3 bits read as E5M2 miss this by orders of magnitude.
double bound(const Fp8GemmCase& g, double r, double s) {
  const double out = g.c == DType::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -23);
  const double acc = double(g.k - 1) * std::ldexp(1.0, -24) + std::ldexp(1.0, -14) * std::sqrt(double(g.k));
  return out * std::fabs(r) + acc * s;
}

class GpuFp8Matmul : public ::testing::TestWithParam<Fp8GemmCase> {};

TEST_P(GpuFp8Matmul, MatchesFp64OfDequantisedInputs) {
  PT_REQUIRE_GPU();
  const Fp8GemmCase g = GetParam();
  Context gpu(Device::cuda(0), Precision::BF16);
  PT_REQUIRE_FP8_GPU(gpu);
  // Different magnitudes, so that the two scales differ by about 2^7 (a swapped or repeated
  // scale pointer shows).
  auto av = randn(g.m * g.k, 1), bv = randn(g.n * g.k, 2);
  for (auto& v : bv) v *= 0.01;
  Quantised a = g.a_transposed ? quantise(gpu, av, g.k, g.m, g.a, true) : quantise(gpu, av, g.m, g.k, g.a, false);
  Quantised b = g.b_transposed ? quantise(gpu, bv, g.k, g.n, g.b, true) : quantise(gpu, bv, g.n, g.k, g.b, false);
  Tensor c = Tensor::empty({g.m, g.n}, g.c, gpu.device());
  poison(gpu, c);
  ops::matmul_fp8(gpu, c, a.fp8, b.fp8, a.scale_inv, b.scale_inv, g.fast_accum);
  const auto got = c.to_host_f64(gpu);
  const Fp8Format fa = fp8_format(g.a), fb = fp8_format(g.b);
  const auto ref = fp8_gemm_reference(a.bits, fa, a.scale_inv_host, b.bits, fb, b.scale_inv_host, g.m, g.n, g.k);
  // S_ij: the same GEMM on magnitudes.
  std::vector<uint8_t> abs_a(a.bits), abs_b(b.bits);
  for (auto& x : abs_a) x &= 0x7f;
  for (auto& x : abs_b) x &= 0x7f;
  const auto mag = fp8_gemm_reference(abs_a, fa, a.scale_inv_host, abs_b, fb, b.scale_inv_host, g.m, g.n, g.k);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - ref[i]) <= bound(g, ref[i], mag[i])) && ++bad <= 5)
      ADD_FAILURE() << "C[" << i / size_t(g.n) << ", " << i % size_t(g.n) << "] = " << got[i] << ", fp64 " << ref[i]
                    << ", bound " << bound(g, ref[i], mag[i]);
  }
  EXPECT_EQ(bad, 0);
}

std::vector<Fp8GemmCase> gemm_cases() {
  const DType E4 = DType::F8E4M3, E5 = DType::F8E5M2, BF = DType::BF16, F32 = DType::F32;
  return {
      {128, 256, 64, E4, E4, BF, false, false, false},   // forward: x · Wᵀ, both E4M3
      {128, 256, 64, E4, E4, F32, false, false, false},  // fp32 C
      {256, 64, 2048, E5, E4, BF, false, false, true},   // dX = dY (E5M2) · W, W cast transposed
      {64, 96, 6400, E5, E4, F32, false, true, true},    // dW = dYᵀ · X: K = tokens, both transposed casts
      {64, 96, 6400, E5, E4, BF, true, true, true},      // the same with fast accumulation, bf16 C
      {33, 48, 1600, E4, E5, BF, false, false, false},   // m not a multiple of 16, E5M2 as B
      {128, 256, 64, E4, E4, BF, true, false, false},    // fast accumulation on the forward
  };
}
INSTANTIATE_TEST_SUITE_P(All, GpuFp8Matmul, ::testing::ValuesIn(gemm_cases()), [](const auto& info) {
  const auto& g = info.param;
  return std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) + "_" + dtype_name(g.a) + "_" +
         dtype_name(g.b) + "_C" + dtype_name(g.c) + (g.fast_accum ? "_fast" : "") + (g.a_transposed ? "_At" : "") +
         (g.b_transposed ? "_Bt" : "");
});

// Shapes and types cuBLASLt's FP8 kernels cannot take are refused with one line naming the cause.
TEST(GpuFp8MatmulErrors, RefusesWhatCublasLtCannotRun) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::BF16);
  PT_REQUIRE_FP8_GPU(gpu);
  Tensor s = make_tensor(gpu, {1}, DType::F32, {1.0});
  auto expect_error = [&](Tensor& c, const Tensor& a, const Tensor& b, const std::string& part) {
    try {
      ops::matmul_fp8(gpu, c, a, b, s, s);
      ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  Tensor a40 = Tensor::empty({32, 40}, DType::F8E4M3, gpu.device()),
         b40 = Tensor::empty({32, 40}, DType::F8E4M3, gpu.device());
  Tensor c = Tensor::empty({32, 32}, DType::BF16, gpu.device());
  expect_error(c, a40, b40, "multiples of 16");  // k = 40
  Tensor a5 = Tensor::empty({32, 64}, DType::F8E5M2, gpu.device()),
         b5 = Tensor::empty({32, 64}, DType::F8E5M2, gpu.device());
  expect_error(c, a5, b5, "both fp8e5m2");
  Tensor bf = Tensor::empty({32, 64}, DType::BF16, gpu.device());
  expect_error(c, bf, b5, "A is bf16");
}

// Below compute capability 8.9 the GEMM is one error naming the GPU (skips on FP8 GPUs; the
// message itself is tested on the CPU: Fp8Support.NamesTheGpuWithoutFp8TensorCores).
TEST(GpuFp8MatmulErrors, RefusedWithoutFp8TensorCores) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::BF16);
  if (fp8_unsupported_reason(gpu.target()).empty()) GTEST_SKIP() << gpu.target().name << " has FP8 tensor cores";
  Tensor a = Tensor::empty({16, 16}, DType::F8E4M3, gpu.device()),
         b = Tensor::empty({16, 16}, DType::F8E4M3, gpu.device());
  Tensor c = Tensor::empty({16, 16}, DType::BF16, gpu.device()), s = make_tensor(gpu, {1}, DType::F32, {1.0});
  try {
    ops::matmul_fp8(gpu, c, a, b, s, s);
    ADD_FAILURE() << "no error on " << gpu.target().name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(gpu.target().name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("FP8 tensor cores"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pt::test
