// Softmax forward and backward on the GPU against the fp64 CPU reference (conventions: test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <sstream>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/softmax.h"

namespace pt::test {
namespace {

// ---- softmax ------------------------------------------------------------------------------

struct SoftmaxCase {
  int64_t R, tq, tk;
  bool causal;
  DType in, out;
};
std::ostream& operator<<(std::ostream& o, const SoftmaxCase& c) {
  return o << "R" << c.R << "_Tq" << c.tq << "_Tk" << c.tk << (c.causal ? "_causal_" : "_") << dtype_name(c.in)
           << "_to_" << dtype_name(c.out);
}
class GpuSoftmax : public ::testing::TestWithParam<SoftmaxCase> {};

TEST_P(GpuSoftmax, ForwardAndBackward) {
  PT_REQUIRE_GPU();
  const SoftmaxCase c = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const Shape shape{c.R, c.tq, c.tk};
  const int64_t n = c.R * c.tq * c.tk;
  const double scale = 0.125;
  Pair s = make_twin(gpu, cpu, shape, c.in, randn(n, 26, 8.0));
  Pair p = make_output(gpu, cpu, shape, c.out);
  ops::softmax_forward(gpu, p.gpu, s.gpu, scale, c.causal);
  ops::softmax_forward(cpu, p.cpu, s.cpu, scale, c.causal);
  PT_EXPECT_GPU_CLOSE(p.gpu, p.cpu, gpu, cpu, tol_for(c.out), 1e-7);
  if (c.in == c.out) {  // in place
    ops::softmax_forward(gpu, s.gpu, s.gpu, scale, c.causal);
    PT_EXPECT_GPU_CLOSE(s.gpu, p.cpu, gpu, cpu, tol_for(c.out), 1e-7);
  }
  // Backward: dP fp32 (a GEMM result), P as stored by the forward, dS in place over dP.
  Pair dp = make_twin(gpu, cpu, shape, DType::F32, randn(n, 27));
  Tensor p_stored_c = make_tensor(cpu, shape, DType::F64, p.gpu.to_host_f64(gpu));
  ops::softmax_backward(gpu, dp.gpu, dp.gpu, p.gpu, scale);
  ops::softmax_backward(cpu, dp.cpu, dp.cpu, p_stored_c, scale);
  PT_EXPECT_GPU_CLOSE(dp.gpu, dp.cpu, gpu, cpu, kTolF32, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuSoftmax,
                         ::testing::Values(SoftmaxCase{4, 64, 64, true, DType::F32, DType::F32},
                                           SoftmaxCase{2, 33, 77, true, DType::F32, DType::F32},
                                           SoftmaxCase{2, 40, 1000, false, DType::F32, DType::BF16},
                                           SoftmaxCase{1, 9, 5, true, DType::F32, DType::F32},
                                           SoftmaxCase{3, 16, 16, true, DType::BF16, DType::BF16},
                                           SoftmaxCase{1, 8, 4096, true, DType::F32, DType::F32}),
                         [](const auto& info) {
                           std::ostringstream o;
                           o << info.param;
                           return o.str();
                         });

}  // namespace
}  // namespace pt::test
