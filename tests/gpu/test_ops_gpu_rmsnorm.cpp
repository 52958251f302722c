// RMSNorm forward and backward on the GPU against the fp64 CPU reference (conventions: test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/elementwise.h"
#include "ops/rmsnorm.h"

namespace pt::test {
namespace {

// ---- rmsnorm ------------------------------------------------------------------------------

// A GPU-only backward case: x (rows, cols) fp32, w, the rstd forward saves, and a bf16 dy.
struct BackwardCase {
  Tensor x, w, rstd, dy;
};
BackwardCase backward_case(Context& gpu, int64_t rows, int64_t cols, uint64_t seed) {
  BackwardCase c;
  c.x = make_tensor(gpu, {rows, cols}, DType::F32, randn(rows * cols, seed, 2.0));
  c.w = make_tensor(gpu, {cols}, DType::F32, uniform(cols, seed + 1, 0.5, 1.5));
  c.rstd = Tensor::empty({rows}, DType::F32, gpu.device());
  Tensor y = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
  ops::rmsnorm_forward(gpu, y, c.rstd, c.x, c.w, 1e-5f);
  c.dy = make_tensor(gpu, {rows, cols}, DType::BF16, randn(rows * cols, seed + 2));
  return c;
}

// The same on both devices: x, w and the rstd each one's forward saves, a bf16 dy, and dx (fp32)
// and dw (dw_type, values scaled by dw_scale) to take the gradients; seeds seed … seed + 4.
struct TwinBackwardCase {
  Pair x, w, rstd, dy, dx, dw;
};
TwinBackwardCase twin_backward_case(Context& gpu, Context& cpu, int64_t rows, int64_t cols, DType dw_type,
                                    uint64_t seed, double dw_scale = 1.0) {
  TwinBackwardCase c;
  c.x = make_twin(gpu, cpu, {rows, cols}, DType::F32, randn(rows * cols, seed, 2.0));
  c.w = make_twin(gpu, cpu, {cols}, DType::F32, uniform(cols, seed + 1, 0.5, 1.5));
  c.rstd = make_output(gpu, cpu, {rows}, DType::F32);
  Tensor y = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
  Tensor y_cpu = Tensor::empty({rows, cols}, DType::F64, cpu.device());
  ops::rmsnorm_forward(gpu, y, c.rstd.gpu, c.x.gpu, c.w.gpu, 1e-5f);
  ops::rmsnorm_forward(cpu, y_cpu, c.rstd.cpu, c.x.cpu, c.w.cpu, 1e-5f);
  c.dy = make_twin(gpu, cpu, {rows, cols}, DType::BF16, randn(rows * cols, seed + 2));
  c.dx = make_twin(gpu, cpu, {rows, cols}, DType::F32, randn(rows * cols, seed + 3));
  c.dw = make_twin(gpu, cpu, {cols}, dw_type, randn(cols, seed + 4, dw_scale));
  return c;
}

// (C, y/dy type, x type: fp32, or bf16 as the residual stream with --residual-dtype bf16; dx stays fp32)
class GpuRMSNorm : public ::testing::TestWithParam<std::tuple<int64_t, DType, DType>> {};

TEST_P(GpuRMSNorm, ForwardAndBackward) {
  PT_REQUIRE_GPU();
  const auto [cols, act, x_type] = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  // More rows than one block's warps: several blocks add into dw, the last one with rows to spare
  // (300 = 37·8 + 4). 70000 columns (packed, but too long for the register-resident forward)
  // take the loop kernel forward and 69 chunks of dw lines backward, the last one partly filled.
  const int64_t rows = 300;
  Pair x = make_twin(gpu, cpu, {rows, cols}, x_type, randn(rows * cols, 20, 2.0));  // the CPU's: x as stored
  Pair w = make_twin(gpu, cpu, {cols}, DType::F32, uniform(cols, 21, 0.5, 1.5));
  Pair y = make_output(gpu, cpu, {rows, cols}, act), rstd = make_output(gpu, cpu, {rows}, DType::F32);
  ops::rmsnorm_forward(gpu, y.gpu, rstd.gpu, x.gpu, w.gpu, 1e-5f);
  ops::rmsnorm_forward(cpu, y.cpu, rstd.cpu, x.cpu, w.cpu, 1e-5f);
  PT_EXPECT_GPU_CLOSE(y.gpu, y.cpu, gpu, cpu, tol_for(act), 1e-6);
  PT_EXPECT_GPU_CLOSE(rstd.gpu, rstd.cpu, gpu, cpu, kTolF32, 0.0);
  // Backward's recompute from the saved rstd (elementwise, packed or not) is forward's y bit for bit.
  Tensor again = Tensor::empty({rows, cols}, act, gpu.device());
  poison(gpu, again);
  ops::rmsnorm_apply(gpu, again, x.gpu, w.gpu, rstd.gpu);
  EXPECT_EQ(again.to_host_f64(gpu), y.gpu.to_host_f64(gpu));

  Pair dy = make_twin(gpu, cpu, {rows, cols}, act, randn(rows * cols, 22));
  for (bool accumulate : {false, true})
    for (bool dw_accumulate : {true, false}) {
      SCOPED_TRACE(std::string(accumulate ? "dx accumulated" : "dx written") +
                   (dw_accumulate ? ", dw accumulated" : ", dw written"));
      Pair dx = make_twin(gpu, cpu, {rows, cols}, DType::F32, randn(rows * cols, 23));
      if (!accumulate) poison(gpu, dx.gpu);
      Pair dw = make_twin(gpu, cpu, {cols}, DType::F32, randn(cols, 24));
      if (!dw_accumulate) poison(gpu, dw.gpu);  // written, never read
      // The CPU backward reads the fp64 rstd it computed; the GPU its own fp32 one.
      ops::rmsnorm_backward(gpu, dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, accumulate, nullptr, dw_accumulate);
      ops::rmsnorm_backward(cpu, dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, rstd.cpu, accumulate, nullptr, dw_accumulate);
      PT_EXPECT_GPU_CLOSE(dx.gpu, dx.cpu, gpu, cpu, kTolF32, 1e-6);
      // dw sums 300 rows in fp32 (8 a block, then the blocks' sums): 1e-5 of the largest entry.
      PT_EXPECT_GPU_CLOSE(dw.gpu, dw.cpu, gpu, cpu, kTolF32, 1e-5);
    }
}

// A bf16 weight gradient (--grad-dtype bf16): the column sums meet in fp32 and are rounded into
// dw once, so dw is the correctly rounded bf16 of the exact sum (2^-8 relative), dx as with fp32.
TEST(GpuRMSNormBf16Grad, WeightGradientRoundedOnce) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t rows = 300;
  for (int64_t cols : {int64_t(1600), int64_t(37)}) {
    SCOPED_TRACE("C " + std::to_string(cols));
    auto [x, w, rstd, dy, dx, dw] = twin_backward_case(gpu, cpu, rows, cols, DType::BF16, 30, 10.0);
    ops::rmsnorm_backward(gpu, dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, true);
    ops::rmsnorm_backward(cpu, dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, rstd.cpu, true);
    PT_EXPECT_GPU_CLOSE(dx.gpu, dx.cpu, gpu, cpu, kTolF32, 1e-6);
    PT_EXPECT_GPU_CLOSE(dw.gpu, dw.cpu, gpu, cpu, 1.0 / 256, 1e-5);
    // Written instead (the step's first contribution): the bf16 of the sum alone, dw not read.
    poison(gpu, dw.gpu);
    ops::rmsnorm_backward(gpu, dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, true, nullptr, false);
    ops::rmsnorm_backward(cpu, dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, rstd.cpu, true, nullptr, false);
    PT_EXPECT_GPU_CLOSE(dw.gpu, dw.cpu, gpu, cpu, 1.0 / 256, 1e-5);
  }
}

// The backward gives the same dx and dw bit for bit however often it runs from the same start:
// dw's sums meet in a fixed order (no atomics), fp32 and bf16 dw, packed width and not. The
// rows are many (4096: 512 blocks of dw terms) so that sums in a varying order would show.
TEST(GpuRMSNorm, BackwardIsBitForBitRunToRun) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t rows = 4096;
  for (int64_t cols : {int64_t(1600), int64_t(37)})
    for (DType dw_type : {DType::F32, DType::BF16}) {
      SCOPED_TRACE("C " + std::to_string(cols) + " dw " + dtype_name(dw_type));
      const BackwardCase c = backward_case(gpu, rows, cols, 50);
      std::vector<double> first_dx, first_dw;
      for (int run = 0; run < 5; ++run) {
        Tensor dx = make_tensor(gpu, {rows, cols}, DType::F32, randn(rows * cols, 53));
        Tensor dw = make_tensor(gpu, {cols}, dw_type, randn(cols, 54));
        ops::rmsnorm_backward(gpu, dx, dw, c.dy, c.x, c.w, c.rstd, true);
        if (run == 0) {
          first_dx = dx.to_host_f64(gpu);
          first_dw = dw.to_host_f64(gpu);
          continue;
        }
        ASSERT_EQ(dx.to_host_f64(gpu), first_dx) << "run " << run;
        ASSERT_EQ(dw.to_host_f64(gpu), first_dw) << "run " << run;
      }
    }
}

// dw's sums on every grid shape against the fp64 CPU: a single block (5 and 8 rows), two blocks
// (9 rows), hundreds (4100 rows of 1600), and 8192 blocks of 37 columns, far more than the GPU
// holds at once; on the persistent rows kernel's grid (two blocks an SM) a warp walks about 2
// rows of 4100 × 1600 and 10 of 20000 × 256 on an H100, unevenly. Three calls in a row on one context, each written
// over poison. (Written for a form that finished dw in the backward's last blocks; the two-kernel form passes it
// too.)
TEST(GpuRMSNorm, BackwardOnEveryGridShape) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const std::pair<int64_t, int64_t> shapes[] = {{5, 1600}, {8, 1600}, {9, 37}, {4100, 1600}, {20000, 256}, {65536, 37}};
  for (const auto& [rows, cols] : shapes)
    for (DType dw_type : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + " dw " + dtype_name(dw_type));
      auto [x, w, rstd, dy, dx, dw] = twin_backward_case(gpu, cpu, rows, cols, dw_type, 60);
      ops::rmsnorm_backward(cpu, dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, rstd.cpu, false, nullptr, false);
      for (int call = 0; call < 3; ++call) {
        SCOPED_TRACE("call " + std::to_string(call));
        poison(gpu, dx.gpu);
        poison(gpu, dw.gpu);
        ops::rmsnorm_backward(gpu, dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, false, nullptr, false);
        PT_EXPECT_GPU_CLOSE(dx.gpu, dx.cpu, gpu, cpu, kTolF32, 1e-6);
        PT_EXPECT_GPU_CLOSE(dw.gpu, dw.cpu, gpu, cpu, dw_type == DType::BF16 ? 1.0 / 256 : kTolF32, 1e-5);
      }
    }
}

// The bf16 copy of dx written in the same pass is dx rounded to bf16, bit for bit (the cast pass
// it replaces), written or accumulated, packed width or not.
TEST(GpuRMSNormDxCopy, IsDxRoundedToBf16) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t rows = 70;
  for (int64_t cols : {int64_t(1600), int64_t(37)})
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE("C " + std::to_string(cols) + (accumulate ? " accumulate" : ""));
      const BackwardCase c = backward_case(gpu, rows, cols, 40);
      Tensor dx = make_tensor(gpu, {rows, cols}, DType::F32, randn(rows * cols, 43));
      Tensor dw = make_tensor(gpu, {cols}, DType::F32, randn(cols, 44));
      Tensor copy = Tensor::empty({rows, cols}, DType::BF16, gpu.device()),
             ref = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
      poison(gpu, copy);
      ops::rmsnorm_backward(gpu, dx, dw, c.dy, c.x, c.w, c.rstd, accumulate, &copy);
      ops::cast(gpu, ref, dx);
      EXPECT_EQ(copy.to_host_f64(gpu), ref.to_host_f64(gpu));
    }
}

INSTANTIATE_TEST_SUITE_P(WidthsAndTypes, GpuRMSNorm,
                         ::testing::Combine(::testing::Values(int64_t(768), int64_t(37), int64_t(256), int64_t(1600),
                                                              int64_t(2560), int64_t(70000)),
                                            ::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(DType::F32, DType::BF16)));

}  // namespace
}  // namespace pt::test
