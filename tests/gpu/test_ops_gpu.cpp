// Every non-GEMM op on the GPU against the fp64 CPU reference on the same stored inputs,
// outputs poisoned with NaN first. Sizes include multiples of 8 (16-byte pack path), odd
// sizes and misaligned views (element-at-a-time fallback); aliasing cases run in place.
// Tolerances: kTolF32 / kTolBF16 in test_ops_gpu_helpers.h unless a comment says otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <sstream>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/loss.h"
#include "ops/optim_kernels.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/softmax.h"

namespace pt::test {
namespace {

// A GPU tensor of n elements starting one element into its buffer: never 16-byte aligned,
// so kernels take their scalar path.
Tensor misaligned(Context& gpu, DType dtype, const std::vector<double>& v) {
  std::vector<double> padded(v.size() + 1, 0.0);
  std::copy(v.begin(), v.end(), padded.begin() + 1);
  return make_tensor(gpu, {int64_t(padded.size())}, dtype, padded).narrow(0, 1, int64_t(v.size()));
}

// ---- elementwise ------------------------------------------------------------------------

class GpuElementwise : public ::testing::TestWithParam<int64_t> {};  // element count

TEST_P(GpuElementwise, MixedTypesMatchCpu) {
  PT_REQUIRE_GPU();
  const int64_t n = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const auto av = randn(n, 1), bv = randn(n, 2), cv = randn(n, 3, 2.0);
  for (DType ta : {DType::F32, DType::BF16})
    for (DType tb : {DType::F32, DType::BF16})
      for (DType to : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(std::string(dtype_name(to)) + " = " + dtype_name(ta) + " + " + dtype_name(tb));
        Pair a = make_twin(gpu, cpu, {n}, ta, av), b = make_twin(gpu, cpu, {n}, tb, bv);
        Pair out = make_output(gpu, cpu, {n}, to);
        ops::add(gpu, out.gpu, a.gpu, b.gpu);
        ops::add(cpu, out.cpu, a.cpu, b.cpu);
        PT_EXPECT_GPU_CLOSE(out.gpu, out.cpu, gpu, cpu, tol_for(to), 1e-6);
      }
  // x += alpha·y (fp32 residual stream += bf16 branch), x *= alpha, relu, relu backward in place.
  Pair x = make_twin(gpu, cpu, {n}, DType::F32, av), y = make_twin(gpu, cpu, {n}, DType::BF16, bv);
  ops::add_inplace(gpu, x.gpu, y.gpu, 0.5f);
  ops::add_inplace(cpu, x.cpu, y.cpu, 0.5f);
  PT_EXPECT_GPU_CLOSE(x.gpu, x.cpu, gpu, cpu, kTolF32, 1e-7);
  ops::scale_inplace(gpu, x.gpu, -3.0f);
  ops::scale_inplace(cpu, x.cpu, -3.0f);
  PT_EXPECT_GPU_CLOSE(x.gpu, x.cpu, gpu, cpu, kTolF32, 1e-7);
  Pair r = make_output(gpu, cpu, {n}, DType::F32);
  ops::relu_forward(gpu, r.gpu, x.gpu);
  ops::relu_forward(cpu, r.cpu, x.cpu);
  PT_EXPECT_GPU_CLOSE(r.gpu, r.cpu, gpu, cpu, kTolF32, 1e-7);  // x itself differs by fp32 rounding
  Pair dr = make_twin(gpu, cpu, {n}, DType::F32, cv);
  ops::relu_backward(gpu, dr.gpu, dr.gpu, r.gpu);
  ops::relu_backward(cpu, dr.cpu, dr.cpu, r.cpu);
  PT_EXPECT_GPU_CLOSE(dr.gpu, dr.cpu, gpu, cpu, 0.0, 0.0);  // a mask of identical values: exact
}

INSTANTIATE_TEST_SUITE_P(Sizes, GpuElementwise, ::testing::Values(int64_t(4096), int64_t(1001), int64_t(7)));

TEST(GpuCast, RoundsToNearestEven) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t n = 1003;
  const auto v = randn(n, 4, 100.0);
  Tensor src = make_tensor(gpu, {n}, DType::F32, v);
  Tensor bf = Tensor::empty({n}, DType::BF16, gpu.device()), back = Tensor::empty({n}, DType::F32, gpu.device());
  poison(gpu, bf);
  poison(gpu, back);
  ops::cast(gpu, bf, src);
  ops::cast(gpu, back, bf);
  const auto got_bf = bf.to_host_f64(gpu), got_back = back.to_host_f64(gpu);
  for (int64_t i = 0; i < n; ++i) {
    const double want = double(round_to_bf16(float(v[i])));
    EXPECT_EQ(got_bf[i], want) << "at " << i;
    EXPECT_EQ(got_back[i], want) << "at " << i;
  }
  // Misaligned source and destination (scalar path) give the same bits.
  Tensor src_m = misaligned(gpu, DType::F32, v);
  Tensor bf_storage = Tensor::empty({n + 1}, DType::BF16, gpu.device());
  Tensor bf_m = bf_storage.narrow(0, 1, n);
  ops::cast(gpu, bf_m, src_m);
  const auto got_m = bf_storage.to_host_f64(gpu);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got_m[i + 1], got_bf[i]) << "at " << i;
  // Scaled casts (the bf16 gradient sync's way back): one rounding of the fp32 product, on the
  // vector path and on a misaligned view.
  ops::cast(gpu, back, bf, 1.0f / 3.0f);
  Tensor back_storage = Tensor::empty({n + 1}, DType::F32, gpu.device());
  Tensor back_m = back_storage.narrow(0, 1, n);
  ops::cast(gpu, back_m, bf_m, 0.5f);
  const auto got_scaled = back.to_host_f64(gpu), got_scaled_m = back_storage.to_host_f64(gpu);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got_scaled[i], double(float(got_bf[i]) * (1.0f / 3.0f))) << "at " << i;
    EXPECT_EQ(got_scaled_m[i + 1], double(float(got_bf[i]) * 0.5f)) << "at " << i;
  }
}

TEST(GpuMisaligned, ViewsTakeTheScalarPath) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t n = 1000;
  const auto av = randn(n, 5);
  Tensor a = misaligned(gpu, DType::F32, av);
  Tensor out_storage = Tensor::empty({n + 1}, DType::F32, gpu.device());
  poison(gpu, out_storage);
  Tensor out = out_storage.narrow(0, 1, n);
  ops::swiglu_forward(gpu, out, a, a);
  Tensor ac = make_tensor(cpu, {n}, DType::F64, stored(av, DType::F32));
  Tensor ref = Tensor::empty({n}, DType::F64, cpu.device());
  ops::swiglu_forward(cpu, ref, ac, ac);
  const auto got = out_storage.to_host_f64(gpu);
  const auto want = ref.to_host_f64(cpu);
  EXPECT_TRUE(std::isnan(got[0]));  // the element before the view is untouched
  EXPECT_LE(allclose_ratio(std::vector<double>(got.begin() + 1, got.end()), want, kTolF32, 1e-7), 1.0);
}

class GpuSwiglu : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(GpuSwiglu, ForwardAndBackward) {
  PT_REQUIRE_GPU();
  const auto [dt, cols] = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t rows = 5, n = rows * cols;
  Pair h1 = make_twin(gpu, cpu, {rows, cols}, dt, randn(n, 7, 2.0)), h3 = make_twin(gpu, cpu, {rows, cols}, dt, randn(n, 8));
  Pair g = make_output(gpu, cpu, {rows, cols}, dt);
  ops::swiglu_forward(gpu, g.gpu, h1.gpu, h3.gpu);
  ops::swiglu_forward(cpu, g.cpu, h1.cpu, h3.cpu);
  PT_EXPECT_GPU_CLOSE(g.gpu, g.cpu, gpu, cpu, tol_for(dt), 1e-6);
  Pair dg = make_twin(gpu, cpu, {rows, cols}, dt, randn(n, 9));
  Pair dh1 = make_output(gpu, cpu, {rows, cols}, dt);
  ops::swiglu_backward(gpu, dh1.gpu, dg.gpu, dg.gpu, h1.gpu, h3.gpu);  // dh3 overwrites dg
  ops::swiglu_backward(cpu, dh1.cpu, dg.cpu, dg.cpu, h1.cpu, h3.cpu);
  PT_EXPECT_GPU_CLOSE(dh1.gpu, dh1.cpu, gpu, cpu, tol_for(dt), 1e-6);
  PT_EXPECT_GPU_CLOSE(dg.gpu, dg.cpu, gpu, cpu, tol_for(dt), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(TypesAndWidths, GpuSwiglu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(int64_t(64), int64_t(13))));

TEST(GpuBias, ForwardAndBackward) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  for (int64_t cols : {int64_t(48), int64_t(37)}) {
    const int64_t rows = 300;  // several row slices → several atomics per column
    Pair y = make_twin(gpu, cpu, {rows, cols}, DType::F32, randn(rows * cols, 10));
    Pair bias = make_twin(gpu, cpu, {cols}, DType::F32, randn(cols, 11));
    ops::add_bias(gpu, y.gpu, bias.gpu);
    ops::add_bias(cpu, y.cpu, bias.cpu);
    PT_EXPECT_GPU_CLOSE(y.gpu, y.cpu, gpu, cpu, kTolF32, 1e-7);
    Pair dbias = make_twin(gpu, cpu, {cols}, DType::F32, randn(cols, 12));  // accumulated into
    Pair dy = make_twin(gpu, cpu, {rows, cols}, DType::BF16, randn(rows * cols, 13));
    ops::bias_backward(gpu, dbias.gpu, dy.gpu);
    ops::bias_backward(cpu, dbias.cpu, dy.cpu);
    PT_EXPECT_GPU_CLOSE(dbias.gpu, dbias.cpu, gpu, cpu, kTolF32, 1e-6);
  }
}

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
                         ::testing::Combine(::testing::Values(int64_t(768), int64_t(37), int64_t(256), int64_t(1600), int64_t(2560)),
                                            ::testing::Values(DType::F32, DType::BF16)));

// ---- rope ---------------------------------------------------------------------------------

class GpuRope : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};  // (type, D)

TEST_P(GpuRope, InPlaceOnFusedQkvAndInverse) {
  PT_REQUIRE_GPU();
  const auto [dt, D] = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t B = 2, T = 50, H = 9, C = H * D;  // 9 heads: a full group of 8 and a partial one
  Pair qkv = make_twin(gpu, cpu, {B, T, 3, H, D}, dt, randn(B * T * 3 * C, 25));
  auto view = [&](Tensor& t, int64_t which) { return t.as_strided({B, H, T, D}, {T * 3 * C, D, 3 * C, 1}, which * C); };
  for (int64_t which : {0, 1}) {
    Tensor vg = view(qkv.gpu, which), vc = view(qkv.cpu, which);
    ops::rope(gpu, vg, vg, 10000.0, false);
    ops::rope(cpu, vc, vc, 10000.0, false);
  }
  // GPU angles are fp32 (t·inv_freq, as PyTorch's tables): at t < 50 the angle is off by
  // up to ~50·2·2^-24 ≈ 6e-6 rad, so an output may move by ~1e-5·|x| — hence the absolute
  // tolerance 3e-5·max|x| in fp32 (bf16 storage rounding dominates in bf16).
  const double angle_atol = dt == DType::BF16 ? 1e-2 : 3e-5;
  PT_EXPECT_GPU_CLOSE(qkv.gpu, qkv.cpu, gpu, cpu, tol_for(dt), angle_atol);
  // Inverse into a separate contiguous output recovers the input.
  Tensor q = view(qkv.gpu, 0);
  Tensor back = Tensor::empty({B, H, T, D}, dt, gpu.device());
  poison(gpu, back);
  ops::rope(gpu, back, q, 10000.0, true);
  Tensor qc = view(qkv.cpu, 0), back_c = Tensor::empty({B, H, T, D}, DType::F64, cpu.device());
  ops::rope(cpu, back_c, qc, 10000.0, true);
  PT_EXPECT_GPU_CLOSE(back, back_c, gpu, cpu, tol_for(dt), angle_atol);
}

INSTANTIATE_TEST_SUITE_P(TypesAndHeadDims, GpuRope,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(int64_t(64), int64_t(128), int64_t(6))));

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

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuSoftmax,
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
      Pair pred = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 31)), target = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 32));
      Pair loss = make_output(gpu, cpu, {1}, DType::F32), dpred = make_output(gpu, cpu, {n}, DType::F32);
      ops::mse_loss(gpu, loss.gpu, &dpred.gpu, pred.gpu, target.gpu, red);
      ops::mse_loss(cpu, loss.cpu, &dpred.cpu, pred.cpu, target.cpu, red);
      PT_EXPECT_GPU_CLOSE(loss.gpu, loss.cpu, gpu, cpu, kTolF32, 0.0);
      PT_EXPECT_GPU_CLOSE(dpred.gpu, dpred.cpu, gpu, cpu, kTolF32, 1e-7);
    }
}

// ---- optimizer ------------------------------------------------------------------------------

TEST(GpuOptim, AdamWWithBf16CopyOverSteps) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  for (int64_t n : {int64_t(4096), int64_t(1003)}) {
    Pair p = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 33));
    Pair m = make_twin(gpu, cpu, {n}, DType::F32, std::vector<double>(n, 0.0));
    Pair v = make_twin(gpu, cpu, {n}, DType::F32, std::vector<double>(n, 0.0));
    Tensor lowp = Tensor::empty({n}, DType::BF16, gpu.device());
    ops::AdamWHyper h;
    h.weight_decay = 0.1f;
    for (int64_t step = 1; step <= 3; ++step) {
      h.step = step;
      Pair g = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 40 + step));
      poison(gpu, lowp);
      ops::adamw_step(gpu, p.gpu, g.gpu, m.gpu, v.gpu, h, &lowp);
      ops::adamw_step(cpu, p.cpu, g.cpu, m.cpu, v.cpu, h);
    }
    // The update moves p by ~lr per step; fp32 against fp64 differs by a few ulps of p.
    PT_EXPECT_GPU_CLOSE(p.gpu, p.cpu, gpu, cpu, kTolF32, 1e-7);
    PT_EXPECT_GPU_CLOSE(m.gpu, m.cpu, gpu, cpu, kTolF32, 1e-7);
    PT_EXPECT_GPU_CLOSE(v.gpu, v.cpu, gpu, cpu, kTolF32, 1e-7);
    const auto pg = p.gpu.to_host_f64(gpu), lg = lowp.to_host_f64(gpu);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(lg[i], double(round_to_bf16(float(pg[i])))) << "at " << i;
  }
}

TEST(GpuOptim, SgdNormAndClip) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t n = 100003;
  Pair p = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 50)), g = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 51));
  ops::sgd_step(gpu, p.gpu, g.gpu, 0.1f, 0.01f);
  ops::sgd_step(cpu, p.cpu, g.cpu, 0.1f, 0.01f);
  PT_EXPECT_GPU_CLOSE(p.gpu, p.cpu, gpu, cpu, kTolF32, 1e-7);

  for (DType acc : {DType::F32, DType::F64}) {
    Tensor sumsq = make_tensor(gpu, {1}, acc, {2.0});  // accumulates onto what is there
    ops::squared_norm_accumulate(gpu, sumsq, g.gpu);
    ops::squared_norm_accumulate(gpu, sumsq, p.gpu.narrow(0, 1, n - 1));  // misaligned
    Tensor ref = make_tensor(cpu, {1}, DType::F64, {2.0});
    ops::squared_norm_accumulate(cpu, ref, g.cpu);
    ops::squared_norm_accumulate(cpu, ref, p.cpu.narrow(0, 1, n - 1));
    // fp32 partial sums over ~1e5 squares: 1e-5 relative.
    PT_EXPECT_GPU_CLOSE(sumsq, ref, gpu, cpu, 1e-5, 0.0);

    // Clip to a tenth of the norm; the CPU clips by its own (fp64) sum.
    Pair x = make_twin(gpu, cpu, {n}, DType::F32, randn(n, 52));
    const float max_norm = float(std::sqrt(ref.to_host_f64(cpu)[0]) / 10);
    ops::clip_by_norm(gpu, x.gpu, sumsq, max_norm);
    ops::clip_by_norm(cpu, x.cpu, ref, max_norm);
    PT_EXPECT_GPU_CLOSE(x.gpu, x.cpu, gpu, cpu, 1e-5, 1e-7);
  }
}

// The GPU update is the same arithmetic whether a range takes the 16-byte packed path or the
// scalar one (sharded optimizers step ranges at any alignment), and a folded clip equals
// clip_by_norm followed by the plain update, bit for bit.
TEST(GpuOptim, PackedAndScalarPathsAndFoldedClipAgreeBitForBit) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t n = 4099;
  const auto p0 = randn(n + 1, 70), g0 = randn(n + 1, 71), m0 = randn(n + 1, 72);
  std::vector<double> v0 = randn(n + 1, 73);
  for (double& x : v0) x = x * x;
  ops::AdamWHyper h;
  h.lr = 0.01f;
  h.weight_decay = 0.1f;
  h.step = 3;
  Tensor sumsq = make_tensor(gpu, {1}, DType::F32, {0.0});
  Tensor g_all = make_tensor(gpu, {n + 1}, DType::F32, g0);
  ops::squared_norm_accumulate(gpu, sumsq, g_all.narrow(0, 1, n));
  const float max_norm = float(std::sqrt(sumsq.to_host_f64(gpu)[0]) / 4);
  // Runs the update on elements [1, n + 1) of fresh buffers, either as views at offset 1
  // (misaligned: scalar path) or as copies at offset 0 (aligned: packed path).
  auto run = [&](bool misaligned, bool fold, bool sgd) {
    Tensor p = make_tensor(gpu, {n + 1}, DType::F32, p0), g = make_tensor(gpu, {n + 1}, DType::F32, g0);
    Tensor m = make_tensor(gpu, {n + 1}, DType::F32, m0), v = make_tensor(gpu, {n + 1}, DType::F32, v0);
    Tensor pv = p.narrow(0, 1, n), gv = g.narrow(0, 1, n), mv = m.narrow(0, 1, n), vv = v.narrow(0, 1, n);
    if (!misaligned)
      for (Tensor* t : {&pv, &gv, &mv, &vv}) {
        Tensor fresh = Tensor::empty({n}, DType::F32, gpu.device());  // allocator: 16-byte aligned
        fresh.copy_from(*t, gpu);
        *t = fresh;
      }
    if (!fold) ops::clip_by_norm(gpu, gv, sumsq, max_norm);
    const ops::GradClip clip = fold ? ops::GradClip{&sumsq, max_norm} : ops::GradClip{};
    if (sgd)
      ops::sgd_step(gpu, pv, gv, 0.1f, 0.01f, nullptr, clip);
    else
      ops::adamw_step(gpu, pv, gv, mv, vv, h, nullptr, clip);
    auto out = pv.to_host_f64(gpu);
    const auto mh = mv.to_host_f64(gpu);
    out.insert(out.end(), mh.begin(), mh.end());
    return out;
  };
  for (bool sgd : {false, true}) {
    const auto ref = run(false, false, sgd);
    EXPECT_EQ(run(true, false, sgd), ref) << (sgd ? "sgd" : "adamw") << ": scalar path differs from packed";
    EXPECT_EQ(run(false, true, sgd), ref) << (sgd ? "sgd" : "adamw") << ": folded clip (packed) differs";
    EXPECT_EQ(run(true, true, sgd), ref) << (sgd ? "sgd" : "adamw") << ": folded clip (scalar) differs";
  }
}

}  // namespace
}  // namespace pt::test
