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

// A bf16 gradient (--grad-dtype bf16): each id's rows are summed in fp32 and rounded into it
// once, so every element is the correctly rounded bf16 of the exact sum (half a bf16 ulp, 2^-8
// relative, plus the fp32 sum's error), however often an id repeats. Adding row by row into bf16
// would round at every one of an id's ~40 rows here and miss that bound.
TEST(GpuEmbedding, Bf16GradientRoundsEachIdsSumOnce) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t vocab = 50, n = 2000;
  const auto idv = random_ids(n, int32_t(vocab), 19);
  Tensor ids_g = make_ids(gpu, {n}, idv), ids_c = make_ids(cpu, {n}, idv);
  for (int64_t dim : {int64_t(64), int64_t(13)})
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string("dout ") + dtype_name(dt) + " dim " + std::to_string(dim));
      Pair dw = make_twin(gpu, cpu, {vocab, dim}, DType::BF16, randn(vocab * dim, 20, 4.0));
      Pair dout = make_twin(gpu, cpu, {n, dim}, dt, randn(n * dim, 21));
      ops::embedding_backward(gpu, dw.gpu, dout.gpu, ids_g);
      ops::embedding_backward(cpu, dw.cpu, dout.cpu, ids_c);
      PT_EXPECT_GPU_CLOSE(dw.gpu, dw.cpu, gpu, cpu, 1.0 / 256, 1e-5);
      // Run twice from the same start: the scratch of the first call leaves nothing behind.
      Tensor again = make_tensor(gpu, {vocab, dim}, DType::BF16, randn(vocab * dim, 20, 4.0));
      ops::embedding_backward(gpu, again, dout.gpu, ids_g);
      PT_EXPECT_GPU_CLOSE(again, dw.cpu, gpu, cpu, 1.0 / 256, 1e-5);
    }
}

}  // namespace
}  // namespace pt::test
