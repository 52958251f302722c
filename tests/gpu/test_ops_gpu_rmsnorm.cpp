// RMSNorm forward and backward on the GPU against the fp64 CPU reference (conventions: test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/rmsnorm.h"

namespace pt::test {
namespace {

// ---- rmsnorm ------------------------------------------------------------------------------

class GpuRMSNorm : public ::testing::TestWithParam<std::tuple<int64_t, DType>> {};  // (C, y/dy type)

TEST_P(GpuRMSNorm, ForwardAndBackward) {
  PT_REQUIRE_GPU();
  const auto [cols, act] = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t rows = 300;  // more rows than one block's warps → several blocks add into dw
  Pair x = make_twin(gpu, cpu, {rows, cols}, DType::F32, randn(rows * cols, 20, 2.0));
  Pair w = make_twin(gpu, cpu, {cols}, DType::F32, uniform(cols, 21, 0.5, 1.5));
  Pair y = make_output(gpu, cpu, {rows, cols}, act), rstd = make_output(gpu, cpu, {rows}, DType::F32);
  ops::rmsnorm_forward(gpu, y.gpu, rstd.gpu, x.gpu, w.gpu, 1e-5f);
  ops::rmsnorm_forward(cpu, y.cpu, rstd.cpu, x.cpu, w.cpu, 1e-5f);
  PT_EXPECT_GPU_CLOSE(y.gpu, y.cpu, gpu, cpu, tol_for(act), 1e-6);
  PT_EXPECT_GPU_CLOSE(rstd.gpu, rstd.cpu, gpu, cpu, kTolF32, 0.0);

  Pair dy = make_twin(gpu, cpu, {rows, cols}, act, randn(rows * cols, 22));
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "write");
    Pair dx = make_twin(gpu, cpu, {rows, cols}, DType::F32, randn(rows * cols, 23));
    if (!accumulate) poison(gpu, dx.gpu);
    Pair dw = make_twin(gpu, cpu, {cols}, DType::F32, randn(cols, 24));
    // The CPU backward reads the fp64 rstd it computed; the GPU its own fp32 one.
    ops::rmsnorm_backward(gpu, dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, accumulate);
    ops::rmsnorm_backward(cpu, dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, rstd.cpu, accumulate);
    PT_EXPECT_GPU_CLOSE(dx.gpu, dx.cpu, gpu, cpu, kTolF32, 1e-6);
    // dw sums 300 rows in fp32 with atomics: 1e-5 of the largest entry.
    PT_EXPECT_GPU_CLOSE(dw.gpu, dw.cpu, gpu, cpu, kTolF32, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(WidthsAndTypes, GpuRMSNorm,
                         ::testing::Combine(::testing::Values(int64_t(768), int64_t(37), int64_t(256), int64_t(1600),
                                                              int64_t(2560)),
                                            ::testing::Values(DType::F32, DType::BF16)));

}  // namespace
}  // namespace pt::test
