// Embedding gather/scatter on the GPU against the fp64 CPU reference (conventions: test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/embedding.h"

namespace pt::test {
namespace {

// ---- embedding --------------------------------------------------------------------------

TEST(GpuEmbedding, GatherScatterAndBadIds) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t vocab = 50, n = 200;
  const auto idv = random_ids(n, int32_t(vocab), 14);  // many repeats → concurrent atomics
  Tensor ids_g = make_ids(gpu, {n}, idv), ids_c = make_ids(cpu, {n}, idv);
  for (int64_t dim : {int64_t(64), int64_t(13)})
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " dim " + std::to_string(dim));
      Pair w = make_twin(gpu, cpu, {vocab, dim}, dt, randn(vocab * dim, 15));
      Pair out = make_output(gpu, cpu, {n, dim}, dt);
      ops::embedding_forward(gpu, out.gpu, ids_g, w.gpu);
      ops::embedding_forward(cpu, out.cpu, ids_c, w.cpu);
      PT_EXPECT_GPU_CLOSE(out.gpu, out.cpu, gpu, cpu, 0.0, 0.0);  // a copy: exact
      Pair dw = make_twin(gpu, cpu, {vocab, dim}, DType::F32, randn(vocab * dim, 16));
      Pair dout = make_twin(gpu, cpu, {n, dim}, dt, randn(n * dim, 17));
      ops::embedding_backward(gpu, dw.gpu, dout.gpu, ids_g);
      ops::embedding_backward(cpu, dw.cpu, dout.cpu, ids_c);
      PT_EXPECT_GPU_CLOSE(dw.gpu, dw.cpu, gpu, cpu, kTolF32, 1e-6);
    }
  // An id the GPU cannot check yields a NaN row, never a wild read.
  Tensor w = make_tensor(gpu, {4, 8}, DType::F32, randn(32, 18));
  Tensor bad = make_ids(gpu, {2}, {1, 4});
  Tensor out = Tensor::empty({2, 8}, DType::F32, gpu.device());
  ops::embedding_forward(gpu, out, bad, w);
  const auto got = out.to_host_f64(gpu);
  for (int c = 0; c < 8; ++c) {
    EXPECT_FALSE(std::isnan(got[c]));
    EXPECT_TRUE(std::isnan(got[8 + c]));
  }
}

}  // namespace
}  // namespace pt::test
