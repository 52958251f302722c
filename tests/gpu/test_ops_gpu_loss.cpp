// Cross-entropy and MSE on the GPU against the fp64 CPU reference (conventions: test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/loss.h"

namespace pt::test {
namespace {

// ---- losses -------------------------------------------------------------------------------

class GpuCrossEntropy : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};  // (type, V)

TEST_P(GpuCrossEntropy, LossAndGradientInPlace) {
  PT_REQUIRE_GPU();
  const auto [dt, vocab] = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t n = 64;
  const auto tv = random_ids(n, int32_t(vocab), 28);
  Pair logits = make_twin(gpu, cpu, {n, vocab}, dt, randn(n * vocab, 29, 3.0));
  Tensor tg = make_ids(gpu, {n}, tv), tc = make_ids(cpu, {n}, tv);
  Pair loss = make_output(gpu, cpu, {1}, DType::F32);
  Pair dlogits = make_output(gpu, cpu, {n, vocab}, dt);
  ops::cross_entropy(gpu, loss.gpu, &dlogits.gpu, logits.gpu, tg);
  ops::cross_entropy(cpu, loss.cpu, &dlogits.cpu, logits.cpu, tc);
  // The loss is reduced in fp32 whatever the logits' type.
  PT_EXPECT_GPU_CLOSE(loss.gpu, loss.cpu, gpu, cpu, kTolF32, 0.0);
  PT_EXPECT_GPU_CLOSE(dlogits.gpu, dlogits.cpu, gpu, cpu, tol_for(dt), 1e-5);
  // In place over the logits: same loss, same gradient.
  Tensor loss2 = Tensor::empty({1}, DType::F32, gpu.device());
  ops::cross_entropy(gpu, loss2, &logits.gpu, logits.gpu, tg);
  PT_EXPECT_GPU_CLOSE(loss2, loss.cpu, gpu, cpu, kTolF32, 0.0);
  PT_EXPECT_GPU_CLOSE(logits.gpu, dlogits.cpu, gpu, cpu, tol_for(dt), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(TypesAndVocab, GpuCrossEntropy,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(int64_t(10000), int64_t(1001))));

TEST(GpuCrossEntropyTargets, OutOfRangeTargetGivesNaN) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  Tensor logits = make_tensor(gpu, {2, 16}, DType::F32, randn(32, 30));
  Tensor targets = make_ids(gpu, {2}, {3, 16});
  Tensor loss = Tensor::empty({1}, DType::F32, gpu.device());
  ops::cross_entropy(gpu, loss, nullptr, logits, targets);
  EXPECT_TRUE(std::isnan(loss.to_host_f64(gpu)[0]));
}

TEST(GpuMse, MeanAndSum) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  for (int64_t n : {int64_t(4099), int64_t(5)})
    for (auto red : {ops::Reduction::Mean, ops::Reduction::Sum}) {
      Pair pred = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 31)),
           target = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 32));
      Pair loss = make_output(gpu, cpu, {1}, DType::F32), dpred = make_output(gpu, cpu, {n}, DType::F32);
      ops::mse_loss(gpu, loss.gpu, &dpred.gpu, pred.gpu, target.gpu, red);
      ops::mse_loss(cpu, loss.cpu, &dpred.cpu, pred.cpu, target.cpu, red);
      PT_EXPECT_GPU_CLOSE(loss.gpu, loss.cpu, gpu, cpu, kTolF32, 0.0);
      PT_EXPECT_GPU_CLOSE(dpred.gpu, dpred.cpu, gpu, cpu, kTolF32, 1e-7);
    }
}

}  // namespace
}  // namespace pt::test
