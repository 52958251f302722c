// Chained launches (cuda/chained_launch.cuh): a kernel launched before the one ahead of it on the
// stream has finished must still read that kernel's writes. Each case puts a producer that allows
// dependents at once and writes its output only after 300 us (delayed_copy_for_tests) right
// before a chained op, and checks the op's outputs bit for bit against the same op on inputs
// written long before. A kernel that touched memory before wait_for_prior_grids() would read the
// NaN the input held before the copy. Without chained launches (a device before Hopper, or
// PT_CHAINED_LAUNCH=off) the cases hold trivially.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "cuda/chained_launch.h"
#include "gpu/test_ops_gpu_helpers.h"
#include "ops/elementwise.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"

namespace pt::test {
namespace {

constexpr int64_t kProducerSpinNs = 300000;

// Runs op(input) twice: on `input` itself, written and synchronised beforehand (the reference),
// and on a NaN-poisoned copy that the delayed producer fills just before op is launched. op
// returns the outputs to compare.
void expect_op_waits_for_its_producer(Context& gpu, const Tensor& input,
                                      const std::function<std::vector<Tensor>(const Tensor&)>& op, const char* what) {
  const auto host_of = [&](const std::vector<Tensor>& outs) {
    std::vector<std::vector<double>> h;
    for (const Tensor& t : outs) h.push_back(t.to_host_f64(gpu));
    return h;
  };
  const auto want = host_of(op(input));
  Tensor late = Tensor::empty(input.shape(), input.dtype(), gpu.device());
  poison(gpu, late);
  gpu.synchronize();
  cuda::delayed_copy_for_tests(gpu.stream(), late.data(), input.data(), input.nbytes(), kProducerSpinNs);
  const auto got = host_of(op(late));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << what << ": output " << i;
}

TEST(ChainedLaunchGpu, OpsReadWhatTheKernelBeforeThemWrote) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t rows = 300, cols = 1600;  // XL's width: the register-resident RMSNorm forward
  const Tensor x = make_tensor(gpu, {rows, cols}, DType::F32, randn(rows * cols, 1));
  const Tensor w = make_tensor(gpu, {cols}, DType::F32, randn(cols, 2));
  const Tensor dy = make_tensor(gpu, {rows, cols}, DType::BF16, randn(rows * cols, 3));
  Tensor rstd = Tensor::empty({rows}, DType::F32, gpu.device());
  {
    Tensor y = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
    ops::rmsnorm_forward(gpu, y, rstd, x, w, 1e-5f);
  }
  expect_op_waits_for_its_producer(
      gpu, x,
      [&](const Tensor& in) {
        Tensor y = Tensor::empty({rows, cols}, DType::BF16, gpu.device()),
               r = Tensor::empty({rows}, DType::F32, gpu.device());
        ops::rmsnorm_forward(gpu, y, r, in, w, 1e-5f);
        return std::vector<Tensor>{y, r};
      },
      "rmsnorm_forward");
  expect_op_waits_for_its_producer(
      gpu, x,
      [&](const Tensor& in) {
        Tensor y = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
        ops::rmsnorm_apply(gpu, y, in, w, rstd);
        return std::vector<Tensor>{y};
      },
      "rmsnorm_apply");
  // The backward and its dw finish (a second chained kernel, after the backward's own).
  expect_op_waits_for_its_producer(
      gpu, dy,
      [&](const Tensor& in) {
        Tensor dx = Tensor::empty({rows, cols}, DType::F32, gpu.device()),
               dw = Tensor::empty({cols}, DType::F32, gpu.device());
        ops::rmsnorm_backward(gpu, dx, dw, in, x, w, rstd, false, nullptr, false);
        return std::vector<Tensor>{dx, dw};
      },
      "rmsnorm_backward");
  const Tensor h = make_tensor(gpu, {rows, cols}, DType::BF16, randn(rows * cols, 4));
  expect_op_waits_for_its_producer(
      gpu, h,
      [&](const Tensor& in) {
        Tensor g = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
        ops::swiglu_forward(gpu, g, in, h);  // map_kernel: every elementwise map
        return std::vector<Tensor>{g};
      },
      "swiglu_forward");
  expect_op_waits_for_its_producer(
      gpu, dy,
      [&](const Tensor& in) {
        Tensor dh1 = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
        Tensor dh3 = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
        ops::swiglu_backward(gpu, dh1, dh3, in, h, h);
        return std::vector<Tensor>{dh1, dh3};
      },
      "swiglu_backward");
  const int64_t B = 2, H = 5, T = 60, D = 64;  // the packed RoPE kernel (D a multiple of 8)
  const Tensor q = make_tensor(gpu, {B, H, T, D}, DType::BF16, randn(B * H * T * D, 5));
  expect_op_waits_for_its_producer(
      gpu, q,
      [&](const Tensor& in) {
        Tensor out = Tensor::empty({B, H, T, D}, DType::BF16, gpu.device());
        ops::rope(gpu, out, in, 10000.0, false);
        return std::vector<Tensor>{out};
      },
      "rope");
}

}  // namespace
}  // namespace pt::test
