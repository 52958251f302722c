// matmul on the GPU against the fp64 CPU GEMM on the same stored values: every transpose
// combination in FP32, TF32 and bf16 (fp32 or bf16 C) through each library path (cuBLAS,
// cuBLASLt, autotuned), odd sizes, alpha/beta, broadcast batch stride, per-head views,
// operands off cuBLASLt's default 256-byte alignment, and true FP32 when TF32 is off.
#include <gtest/gtest.h>

#include <ostream>
#include <sstream>

#include "core/error.h"
#include "gpu/test_ops_gpu_helpers.h"
#include "ops/matmul.h"

namespace pt::test {
namespace {

struct GemmCase {
  bool ta, tb;
  DType ab, c;
  Precision precision;
  GemmSelect select;
};
const char* select_name(GemmSelect s) {
  return s == GemmSelect::Cublas ? "cublas" : s == GemmSelect::Lt ? "lt" : "autotune";
}
std::ostream& operator<<(std::ostream& o, const GemmCase& g) {
  return o << (g.ta ? "T" : "N") << (g.tb ? "T" : "N") << "_" << dtype_name(g.ab) << "_C" << dtype_name(g.c) << "_"
           << precision_name(g.precision) << "_" << select_name(g.select);
}

// Norm-wise relative error bounds (‖got − ref‖ / ‖ref‖), inputs identical on both sides:
//  fp32 operands, FP32: only fp32 accumulation order differs      → 1e-6
//  fp32 operands, TF32: operands rounded to 10-bit mantissas     → 5e-3
//  bf16 operands, fp32 C: products exact in fp32, fp32 sums      → 1e-6
//  bf16 operands, bf16 C: one bf16 rounding of the result (u = 2^-8) → 1e-2
double bound(const GemmCase& g) {
  if (g.c == DType::BF16) return 1e-2;
  if (g.ab == DType::F32 && g.precision == Precision::TF32) return 5e-3;
  return 1e-6;
}

class GpuMatmul : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GpuMatmul, MatchesCpuFp64) {
  PT_REQUIRE_GPU();
  const GemmCase g = GetParam();
  Context gpu(Device::cuda(0), g.precision), cpu(Device::cpu());
  gpu.set_gemm_select(g.select);
  const int64_t m = 33, n = 17, k = 29;  // odd on purpose
  const Shape a_shape = g.ta ? Shape{k, m} : Shape{m, k}, b_shape = g.tb ? Shape{n, k} : Shape{k, n};
  Pair a = make_twin(gpu, cpu, a_shape, g.ab, randn(m * k, 1));
  Pair b = make_twin(gpu, cpu, b_shape, g.ab, randn(k * n, 2));
  Pair c = make_twin(gpu, cpu, {m, n}, g.c, randn(m * n, 3));
  ops::matmul(gpu, c.gpu, a.gpu, b.gpu, g.ta, g.tb, 1.5f, 0.5f);
  ops::matmul(cpu, c.cpu, a.cpu, b.cpu, g.ta, g.tb, 1.5f, 0.5f);
  EXPECT_LE(rel_error(c.gpu.to_host_f64(gpu), c.cpu.to_host_f64(cpu)), bound(g));
}

std::vector<GemmCase> all_cases() {
  std::vector<GemmCase> cases;
  for (GemmSelect sel : {GemmSelect::Cublas, GemmSelect::Lt, GemmSelect::Autotune})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        cases.push_back({ta, tb, DType::F32, DType::F32, Precision::FP32, sel});
        cases.push_back({ta, tb, DType::F32, DType::F32, Precision::TF32, sel});
        cases.push_back({ta, tb, DType::BF16, DType::F32, Precision::BF16, sel});
        cases.push_back({ta, tb, DType::BF16, DType::BF16, Precision::BF16, sel});
      }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(All, GpuMatmul, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  std::ostringstream o;
  o << info.param;
  return o.str();
});

TEST(GpuMatmulModes, Fp32ModeIsTrueFp32OnLongSums) {
  PT_REQUIRE_GPU();
  // k = 1024: TF32 operands would leave ~1e-3 relative error; true FP32 stays near 1e-7.
  Context gpu(Device::cuda(0), Precision::FP32), cpu(Device::cpu());
  const int64_t m = 64, n = 48, k = 1024;
  Pair a = make_twin(gpu, cpu, {m, k}, DType::F32, randn(m * k, 4));
  Pair b = make_twin(gpu, cpu, {k, n}, DType::F32, randn(k * n, 5));
  Pair c = make_output(gpu, cpu, {m, n}, DType::F32);
  ops::matmul(gpu, c.gpu, a.gpu, b.gpu, false, false);
  ops::matmul(cpu, c.cpu, a.cpu, b.cpu, false, false);
  EXPECT_LE(rel_error(c.gpu.to_host_f64(gpu), c.cpu.to_host_f64(cpu)), 1e-6);
}

TEST(GpuMatmulViews, BatchedBroadcastAndPerHeadViews) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::FP32), cpu(Device::cpu());
  // scores (H, T, T) = q_h k_hᵀ with q, k token-major (T, H, D): per-head strides (D, H·D, 1).
  const int64_t T = 19, H = 3, D = 8;
  Pair q = make_twin(gpu, cpu, {T, H, D}, DType::F32, randn(T * H * D, 6));
  Pair k = make_twin(gpu, cpu, {T, H, D}, DType::F32, randn(T * H * D, 7));
  Pair s = make_output(gpu, cpu, {H, T, T}, DType::F32);
  auto heads = [&](const Tensor& t) { return t.as_strided({H, T, D}, {D, H * D, 1}); };
  ops::matmul(gpu, s.gpu, heads(q.gpu), heads(k.gpu), false, true);
  ops::matmul(cpu, s.cpu, heads(q.cpu), heads(k.cpu), false, true);
  EXPECT_LE(rel_error(s.gpu.to_host_f64(gpu), s.cpu.to_host_f64(cpu)), 1e-6);

  // A broadcast over the batch (stride 0) times a batch of B.
  Pair a = make_twin(gpu, cpu, {5, 7}, DType::F32, randn(35, 8));
  Pair b = make_twin(gpu, cpu, {4, 7, 9}, DType::F32, randn(4 * 63, 9));
  Pair c = make_output(gpu, cpu, {4, 5, 9}, DType::F32);
  ops::matmul(gpu, c.gpu, a.gpu.as_strided({4, 5, 7}, {0, 7, 1}), b.gpu, false, false);
  ops::matmul(cpu, c.cpu, a.cpu, b.cpu, false, false);
  EXPECT_LE(rel_error(c.gpu.to_host_f64(gpu), c.cpu.to_host_f64(cpu)), 1e-6);
}

// Context::reserve_sms (--comm-sms): cuBLAS is told to target the remaining SMs, GEMM results
// stay right (a kernel sized for fewer SMs may sum in another order), and 0 restores all SMs.
TEST(GpuMatmulModes, ReservingSmsRetargetsCublasAndKeepsResults) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::BF16), cpu(Device::cpu());
  ASSERT_GT(gpu.sm_count(), 16);
  const int64_t m = 1024, n = 768, k = 512;  // a GEMM large enough for a persistent kernel
  Pair a = make_twin(gpu, cpu, {m, k}, DType::BF16, randn(m * k, 4));
  Pair b = make_twin(gpu, cpu, {k, n}, DType::BF16, randn(k * n, 5));
  Pair c = make_output(gpu, cpu, {m, n}, DType::F32);
  ops::matmul(cpu, c.cpu, a.cpu, b.cpu, false, false, 1.0f, 0.0f);
  const auto want = c.cpu.to_host_f64(cpu);

  gpu.reserve_sms(16);
  EXPECT_EQ(gpu.reserved_sms(), 16);
  int target = -1;
  ASSERT_EQ(cublasGetSmCountTarget(gpu.cublas(), &target), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(target, gpu.sm_count() - 16);
  ops::matmul(gpu, c.gpu, a.gpu, b.gpu, false, false, 1.0f, 0.0f);
  EXPECT_LE(rel_error(c.gpu.to_host_f64(gpu), want), 1e-6);

  gpu.reserve_sms(0);
  ASSERT_EQ(cublasGetSmCountTarget(gpu.cublas(), &target), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(target, 0);  // cuBLAS's "every SM"
  ops::matmul(gpu, c.gpu, a.gpu, b.gpu, false, false, 1.0f, 0.0f);
  EXPECT_LE(rel_error(c.gpu.to_host_f64(gpu), want), 1e-6);

  EXPECT_THROW(gpu.reserve_sms(gpu.sm_count()), Error);
  EXPECT_THROW(gpu.reserve_sms(-1), Error);
  EXPECT_EQ(gpu.reserved_sms(), 0);
}

// The model's GEMM shape on every path: C (m, n) += A (m, k) · B (n, k)ᵀ (the weight-gradient /
// forward form), 2^30 FLOP (large enough to be autotuned), with A and B views at odd offsets of
// larger buffers (as parameters are in the flat buffers): body(gpu, cpu, ab, a, b) for each
// GEMM path and operand dtype; a and b hold m·k + kOff and n·k + kOff elements.
constexpr int64_t kM = 1024, kN = 1024, kK = 512, kOff = 2;  // kOff elements: 4- or 8-byte aligned views
Tensor view2d(const Tensor& t, int64_t offset, int64_t rows, int64_t cols) {
  return t.narrow(0, offset, rows * cols).reshape({rows, cols});
}
template <typename Body>
void on_every_path_misaligned(uint64_t seed, Body body) {
  for (GemmSelect sel : {GemmSelect::Cublas, GemmSelect::Lt, GemmSelect::Autotune})
    for (DType ab : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(select_name(sel)) + " " + dtype_name(ab));
      Context gpu(Device::cuda(0), ab == DType::BF16 ? Precision::BF16 : Precision::FP32), cpu(Device::cpu());
      gpu.set_gemm_select(sel);
      Pair a = make_twin(gpu, cpu, {kM * kK + kOff}, ab, randn(kM * kK + kOff, seed));
      Pair b = make_twin(gpu, cpu, {kN * kK + kOff}, ab, randn(kN * kK + kOff, seed + 1));
      body(gpu, cpu, sel, ab, view2d(a.gpu, kOff, kM, kK), view2d(b.gpu, kOff, kN, kK), view2d(a.cpu, kOff, kM, kK),
           view2d(b.cpu, kOff, kN, kK));
    }
}

// Every path, autotuning included, gives the right C, accumulates into it exactly once when
// beta = 1 (autotuning times its candidates on a scratch C), and a second call of the same shape
// runs the same kernel (bit-identical C).
TEST(GpuMatmulModes, EveryPathOnMisalignedModelSizedViews) {
  PT_REQUIRE_GPU();
  on_every_path_misaligned(11, [](Context& gpu, Context& cpu, GemmSelect, DType ab, const Tensor& ag, const Tensor& bg,
                                  const Tensor& ac, const Tensor& bc) {
    Pair c = make_twin(gpu, cpu, {kM * kN + 1}, DType::F32, randn(kM * kN + 1, 13));
    Tensor cg = view2d(c.gpu, 1, kM, kN), cc = view2d(c.cpu, 1, kM, kN);
    ops::matmul(gpu, cg, ag, bg, false, true, 1.0f, 1.0f);
    ops::matmul(cpu, cc, ac, bc, false, true, 1.0f, 1.0f);
    EXPECT_LE(rel_error(cg.to_host_f64(gpu), cc.to_host_f64(cpu)), ab == DType::BF16 ? 1e-5 : 1e-6);

    Pair d = make_output(gpu, cpu, {kM, kN}, DType::F32);
    ops::matmul(gpu, d.gpu, ag, bg, false, true);
    const auto first = d.gpu.to_host_f64(gpu);
    ops::matmul(gpu, d.gpu, ag, bg, false, true);
    EXPECT_EQ(d.gpu.to_host_f64(gpu), first);
  });
}

// A separate C input on every path (the fused residual add, C fp32): c = A·Bᵀ + c_in with c_in
// untouched, against the CPU's fp64 sum; on the cuBLAS path (which copies c_in into c first) bit
// for bit the in-place accumulation.
TEST(GpuMatmulModes, SeparateCInputOnEveryPath) {
  PT_REQUIRE_GPU();
  on_every_path_misaligned(21, [](Context& gpu, Context& cpu, GemmSelect sel, DType ab, const Tensor& ag,
                                  const Tensor& bg, const Tensor& ac, const Tensor& bc) {
    const auto x = randn(kM * kN + 1, 23);
    Pair c_in = make_twin(gpu, cpu, {kM * kN + 1}, DType::F32, x);
    Tensor out = Tensor::empty({kM * kN + 1}, DType::F32, gpu.device());
    poison(gpu, out);
    Tensor og = view2d(out, 1, kM, kN), ig = view2d(c_in.gpu, 1, kM, kN), cc = view2d(c_in.cpu, 1, kM, kN);
    ops::matmul(gpu, og, ag, bg, false, true, 1.0f, 1.0f, &ig);
    ops::matmul(cpu, cc, ac, bc, false, true, 1.0f, 1.0f);
    EXPECT_LE(rel_error(og.to_host_f64(gpu), cc.to_host_f64(cpu)), ab == DType::BF16 ? 1e-5 : 1e-6);
    EXPECT_EQ(c_in.gpu.to_host_f64(gpu), stored(x, DType::F32)) << "c_in was written";
    if (sel == GemmSelect::Cublas) {
      Tensor inplace = view2d(c_in.gpu, 1, kM, kN);
      ops::matmul(gpu, inplace, ag, bg, false, true, 1.0f, 1.0f);
      EXPECT_EQ(og.to_host_f64(gpu), inplace.to_host_f64(gpu));
    }
  });
}

// Autotuning leaves GEMMs under 2^30 FLOP with cuBLAS, so every rank runs the same kernel on
// them and computes the same bits (what the sharded-optimizer tests at rtol 1e-7 rely on).
TEST(GpuMatmulModes, SmallGemmsUnderAutotuneAreCublasBitForBit) {
  PT_REQUIRE_GPU();
  for (DType ab : {DType::F32, DType::BF16}) {
    Context tuned(Device::cuda(0), ab == DType::BF16 ? Precision::BF16 : Precision::FP32),
        plain(Device::cuda(0), tuned.precision()), cpu(Device::cpu());
    plain.set_gemm_select(GemmSelect::Cublas);
    const int64_t m = 200, n = 96, k = 300;
    Pair a = make_twin(tuned, cpu, {m, k}, ab, randn(m * k, 21));
    Pair b = make_twin(tuned, cpu, {n, k}, ab, randn(n * k, 22));
    Pair c1 = make_output(tuned, cpu, {m, n}, DType::F32), c2 = make_output(plain, cpu, {m, n}, DType::F32);
    ops::matmul(tuned, c1.gpu, a.gpu, b.gpu, false, true);
    ops::matmul(plain, c2.gpu, a.gpu, b.gpu, false, true);
    EXPECT_EQ(c1.gpu.to_host_f64(tuned), c2.gpu.to_host_f64(plain)) << dtype_name(ab);
  }
}

// Lt and autotuned GEMMs honour reserve_sms too (the SM target is part of their descriptors).
TEST(GpuMatmulModes, ReservingSmsKeepsResultsOnEveryPath) {
  PT_REQUIRE_GPU();
  for (GemmSelect sel : {GemmSelect::Lt, GemmSelect::Autotune}) {
    SCOPED_TRACE(select_name(sel));
    Context gpu(Device::cuda(0), Precision::BF16), cpu(Device::cpu());
    gpu.set_gemm_select(sel);
    const int64_t m = 1024, n = 768, k = 1024;  // 1.6 GFLOP: autotuned
    Pair a = make_twin(gpu, cpu, {m, k}, DType::BF16, randn(m * k, 4));
    Pair b = make_twin(gpu, cpu, {k, n}, DType::BF16, randn(k * n, 5));
    Pair c = make_output(gpu, cpu, {m, n}, DType::F32);
    ops::matmul(cpu, c.cpu, a.cpu, b.cpu, false, false, 1.0f, 0.0f);
    const auto want = c.cpu.to_host_f64(cpu);
    for (int reserve : {16, 0}) {
      gpu.reserve_sms(reserve);
      ops::matmul(gpu, c.gpu, a.gpu, b.gpu, false, false, 1.0f, 0.0f);
      EXPECT_LE(rel_error(c.gpu.to_host_f64(gpu), want), 1e-6) << "reserved " << reserve;
    }
  }
}

}  // namespace
}  // namespace pt::test
