// Naive attention on the GPU (cuBLAS + softmax kernels) against the fp64 CPU op on the same
// stored inputs: q, k, v strided views of a fused (B, T, 3, H, D) buffer, out written into a
// token-major view, gradients into views of a fused dqkv buffer; fp32 and bf16.
#include <gtest/gtest.h>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/attention.h"

namespace pt::test {
namespace {

class GpuAttention : public ::testing::TestWithParam<std::tuple<DType, int64_t, bool>> {};  // (type, T, causal)

TEST_P(GpuAttention, ForwardAndBackwardOnFusedViews) {
  PT_REQUIRE_GPU();
  const auto [dt, T, causal] = GetParam();
  Context gpu(Device::cuda(0), dt == DType::BF16 ? Precision::BF16 : Precision::FP32), cpu(Device::cpu());
  const int64_t B = 2, H = 2, D = 64, C = H * D;
  // Norm-wise relative error bounds. fp32 (true FP32 GEMMs): accumulation order only → 1e-5.
  // bf16: probs, outputs and dS are each rounded once to bf16 (u = 2^-8) → 2e-2.
  const double bound = dt == DType::BF16 ? 2e-2 : 1e-5;

  Pair qkv = make_twin(gpu, cpu, {B, T, 3, H, D}, dt, randn(B * T * 3 * C, 1));
  auto view = [&](Tensor& t, int64_t which) { return t.as_strided({B, H, T, D}, {T * 3 * C, D, 3 * C, 1}, which * C); };
  auto token_major = [&](Tensor& t) { return t.as_strided({B, H, T, D}, {T * C, D, C, 1}); };
  Tensor qg = view(qkv.gpu, 0), kg = view(qkv.gpu, 1), vg = view(qkv.gpu, 2);
  Tensor qc = view(qkv.cpu, 0), kc = view(qkv.cpu, 1), vc = view(qkv.cpu, 2);

  Pair out = make_output(gpu, cpu, {B, T, H, D}, dt);
  Pair probs = make_output(gpu, cpu, {B, H, T, T}, dt);
  Tensor og = token_major(out.gpu), oc = token_major(out.cpu);
  ops::naive_attention_forward(gpu, og, probs.gpu, qg, kg, vg, causal);
  ops::naive_attention_forward(cpu, oc, probs.cpu, qc, kc, vc, causal);
  EXPECT_LE(rel_error(out.gpu.to_host_f64(gpu), out.cpu.to_host_f64(cpu)), bound);
  EXPECT_LE(rel_error(probs.gpu.to_host_f64(gpu), probs.cpu.to_host_f64(cpu)), bound);

  Pair dout = make_twin(gpu, cpu, {B, H, T, D}, dt, randn(B * H * T * D, 2));
  Pair dqkv = make_output(gpu, cpu, {B, T, 3, H, D}, dt);
  Tensor dqg = view(dqkv.gpu, 0), dkg = view(dqkv.gpu, 1), dvg = view(dqkv.gpu, 2);
  Tensor dqc = view(dqkv.cpu, 0), dkc = view(dqkv.cpu, 1), dvc = view(dqkv.cpu, 2);
  ops::naive_attention_backward(gpu, dqg, dkg, dvg, dout.gpu, qg, kg, vg, probs.gpu, causal);
  ops::naive_attention_backward(cpu, dqc, dkc, dvc, dout.cpu, qc, kc, vc, probs.cpu, causal);
  EXPECT_LE(rel_error(dqkv.gpu.to_host_f64(gpu), dqkv.cpu.to_host_f64(cpu)), bound);
}

INSTANTIATE_TEST_SUITE_P(TypesLengthsMasks, GpuAttention,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(int64_t(37), int64_t(64)), ::testing::Bool()));

}  // namespace
}  // namespace pt::test
