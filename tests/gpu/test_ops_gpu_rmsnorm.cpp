// RMSNorm forward and backward on the GPU against the fp64 CPU reference (conventions: test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/elementwise.h"
#include "ops/fp8.h"
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

// ---- amax in the same pass (FP8 current scaling) ----------------------------------------------

// The bits of a tensor's values as stored (bf16 widened exactly to fp32).
std::vector<uint32_t> bits_of(Context& gpu, const Tensor& t) {
  const std::vector<float> v = t.to_host_f32(gpu);
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}
// One fp32 amax on the GPU, poisoned with NaN: an amax the op did not zero first stays NaN (the
// atomic max of non-negative floats orders NaN's bits above every number).
Tensor amax_tensor(Context& gpu) {
  Tensor t = Tensor::empty({1}, DType::F32, gpu.device());
  poison(gpu, t);
  return t;
}
// The op's amax against fp8_amax of what it stored, bit for bit (and finite, above 0).
void expect_amax_of(Context& gpu, const Tensor& amax, const Tensor& stored) {
  Tensor ref = amax_tensor(gpu);
  ops::fp8_amax(gpu, ref, stored);
  const float got = amax.to_host_f32(gpu)[0], want = ref.to_host_f32(gpu)[0];
  EXPECT_EQ(bits_of(gpu, amax), bits_of(gpu, ref)) << "amax " << got << ", fp8_amax " << want;
  EXPECT_TRUE(std::isfinite(want) && want > 0.0f) << want;
}
// N(0, std²) values of a (rows, cols) tensor with one NaN in row 1 when there is one: as forward's x
// or backward's dy it makes that row of y or dx NaN, which the amax skips, as fp8_amax does.
std::vector<double> randn_nan_in_row1(int64_t rows, int64_t cols, uint64_t seed, double std) {
  auto v = randn(rows * cols, seed, std);
  if (rows > 1) v[size_t(cols + cols / 2)] = std::nan("");
  return v;
}

// The widths reach every kernel the ops dispatch (kPack 8, 32 lanes: 256 columns a pack a lane):
// 37, not whole packs: the element-at-a-time kernels. Forward: 64 and 256 the register row of
// 1 pack, 512 of 2, 768 and 1024 of 4, 1280 … 2048 of 8, 2560 the packed loop. Backward, bf16
// dy: the persistent rows kernel of exactly 1 (256), 2 (512), 3 (768), 4 (1024), 5 (1280),
// 6 (1536), 7 (1600, 1792) packs, the packed loop from 2048; fp32 dy: rows of 1 … 4 packs, the
// packed loop from 1280. Rows: 1 (one warp of a block), 300 (blocks with rows to spare), 4100
// (on the persistent grid, two blocks an SM, warps walk two rows or more, so a lane's max spans rows).
class GpuRMSNormAmax : public ::testing::TestWithParam<int64_t> {};
// f(rows, a, b) for each of those rows and a, b each fp32 and bf16 (y or dy, and x).
template <typename F>
void for_rows_and_types(F&& f) {
  for (int64_t rows : {int64_t(1), int64_t(300), int64_t(4100)})
    for (DType a : {DType::F32, DType::BF16})
      for (DType b : {DType::F32, DType::BF16}) f(rows, a, b);
}

// rmsnorm_forward's y_amax: fp8_amax of its y bit for bit, fp32 and bf16 y from fp32 and bf16 x;
// y and rstd bit for bit as without the amax.
TEST_P(GpuRMSNormAmax, ForwardAmaxIsFp8AmaxOfY) {
  PT_REQUIRE_GPU();
  const int64_t cols = GetParam();
  Context gpu(Device::cuda(0));
  for_rows_and_types([&](int64_t rows, DType y_type, DType x_type) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + " y " + dtype_name(y_type) + " x " +
                 dtype_name(x_type));
    Tensor x = make_tensor(gpu, {rows, cols}, x_type, randn_nan_in_row1(rows, cols, 80, 2.0));
    Tensor w = make_tensor(gpu, {cols}, DType::F32, uniform(cols, 81, -1.5, 1.5));
    Tensor y = Tensor::empty({rows, cols}, y_type, gpu.device()),
           plain = Tensor::empty({rows, cols}, y_type, gpu.device());
    Tensor rstd = Tensor::empty({rows}, DType::F32, gpu.device()),
           rstd_plain = Tensor::empty({rows}, DType::F32, gpu.device());
    poison(gpu, y);
    poison(gpu, plain);
    Tensor amax = amax_tensor(gpu);
    ops::rmsnorm_forward(gpu, y, rstd, x, w, 1e-5f, &amax);
    ops::rmsnorm_forward(gpu, plain, rstd_plain, x, w, 1e-5f);
    EXPECT_TRUE(bits_of(gpu, y) == bits_of(gpu, plain)) << "y differs from the call without amax";
    EXPECT_TRUE(bits_of(gpu, rstd) == bits_of(gpu, rstd_plain)) << "rstd differs from the call without amax";
    expect_amax_of(gpu, amax, y);
  });
}

// rmsnorm_backward's dx_amax: fp8_amax of dx_lowp when given, else of dx (after accumulate), bit
// for bit; fp32 and bf16 dy and x; dx, dw and dx_lowp bit for bit as without the amax.
TEST_P(GpuRMSNormAmax, BackwardAmaxIsFp8AmaxOfDx) {
  PT_REQUIRE_GPU();
  const int64_t cols = GetParam();
  Context gpu(Device::cuda(0));
  for_rows_and_types([&](int64_t rows, DType dy_type, DType x_type) {
    Tensor x = make_tensor(gpu, {rows, cols}, x_type, randn(rows * cols, 90, 2.0));
    Tensor w = make_tensor(gpu, {cols}, DType::F32, uniform(cols, 91, -1.5, 1.5));
    Tensor rstd = Tensor::empty({rows}, DType::F32, gpu.device());
    Tensor y = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
    ops::rmsnorm_forward(gpu, y, rstd, x, w, 1e-5f);
    Tensor dy = make_tensor(gpu, {rows, cols}, dy_type, randn_nan_in_row1(rows, cols, 92, 1.0));
    const auto dx0 = randn(rows * cols, 93, 4.0), dw0 = randn(cols, 94);
    for (bool lowp : {false, true})
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + " dy " + dtype_name(dy_type) + " x " +
                     dtype_name(x_type) + (lowp ? ", dx_lowp" : "") + (accumulate ? ", accumulate" : ""));
        Tensor dx = make_tensor(gpu, {rows, cols}, DType::F32, dx0),
               dx_plain = make_tensor(gpu, {rows, cols}, DType::F32, dx0);
        Tensor dw = make_tensor(gpu, {cols}, DType::F32, dw0), dw_plain = make_tensor(gpu, {cols}, DType::F32, dw0);
        Tensor copy = Tensor::empty({rows, cols}, DType::BF16, gpu.device()),
               copy_plain = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
        poison(gpu, copy);
        poison(gpu, copy_plain);
        Tensor amax = amax_tensor(gpu);
        ops::rmsnorm_backward(gpu, dx, dw, dy, x, w, rstd, accumulate, lowp ? &copy : nullptr, true, &amax);
        ops::rmsnorm_backward(gpu, dx_plain, dw_plain, dy, x, w, rstd, accumulate, lowp ? &copy_plain : nullptr);
        EXPECT_TRUE(bits_of(gpu, dx) == bits_of(gpu, dx_plain)) << "dx differs from the call without amax";
        EXPECT_TRUE(bits_of(gpu, dw) == bits_of(gpu, dw_plain)) << "dw differs from the call without amax";
        if (lowp)
          EXPECT_TRUE(bits_of(gpu, copy) == bits_of(gpu, copy_plain)) << "dx_lowp differs from the call without amax";
        expect_amax_of(gpu, amax, lowp ? copy : dx);
      }
  });
}

INSTANTIATE_TEST_SUITE_P(EveryKernel, GpuRMSNormAmax,
                         ::testing::Values(int64_t(37), int64_t(64), int64_t(256), int64_t(512), int64_t(768),
                                           int64_t(1024), int64_t(1280), int64_t(1536), int64_t(1600), int64_t(1792),
                                           int64_t(2048), int64_t(2560)));

// A bad amax tensor on the GPU: the same one error as on the CPU, and one on the wrong device.
TEST(GpuRMSNormAmaxArgs, BadAmaxGivesOneClearError) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  Tensor x = make_tensor(gpu, {2, 8}, DType::F32, randn(16, 1)), w = make_tensor(gpu, {8}, DType::F32, randn(8, 2));
  Tensor y = Tensor::empty({2, 8}, DType::BF16, gpu.device()), rstd = Tensor::empty({2}, DType::F32, gpu.device());
  Tensor bf16 = Tensor::empty({1}, DType::BF16, gpu.device()), on_host = Tensor::empty({1}, DType::F32, cpu.device());
  EXPECT_NE(error_of([&] {
              ops::rmsnorm_forward(gpu, y, rstd, x, w, 1e-5f, &bf16);
            }).find("rmsnorm_forward: y_amax is bf16, expected fp32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ops::rmsnorm_forward(gpu, y, rstd, x, w, 1e-5f, &on_host);
            }).find("rmsnorm_forward: y_amax is on cpu"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(WidthsAndTypes, GpuRMSNorm,
                         ::testing::Combine(::testing::Values(int64_t(768), int64_t(37), int64_t(256), int64_t(1600),
                                                              int64_t(2560), int64_t(70000)),
                                            ::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(DType::F32, DType::BF16)));

}  // namespace
}  // namespace pt::test
