// Embedding gather/scatter on the GPU against the fp64 CPU reference (conventions: test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/embedding.h"

namespace pt::test {
namespace {

// ---- embedding --------------------------------------------------------------------------

TEST(GpuEmbedding, GatherScatterAndBadIds) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  const int64_t vocab = 50, n = 200;
  const auto idv = random_ids(n, int32_t(vocab), 14);  // many repeats per id
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

// ---- deterministic backward ------------------------------------------------------------

// Per element of dweight (V, C): the exact (fp64) dweight0 + Σ of its id's rows of dout, and
// the bound on the GPU's error. The kernel adds an id's k rows one after another in fp32 and
// then adds that sum to dweight once: each of those k + 1 adds rounds by at most 2^-24 of its
// result, and every partial result is at most |dweight0| + Σ|rows| in magnitude, so
//   fp32 dweight: |got − exact| ≤ (k + 1)·2^-24·(|dweight0| + Σ|rows|) = E;
//   bf16 dweight: that fp32 result rounded once more, ≤ 2^-8 of it: 2^-8·|exact| + (1 + 2^-8)·E.
// Ids outside [0, V) are skipped; rows no id reaches keep dweight0 exactly (bound 0).
struct Expected {
  std::vector<double> value, bound;
};
Expected expected_backward(const std::vector<double>& dw0, const std::vector<double>& dout,
                           const std::vector<int32_t>& ids, int64_t vocab, int64_t cols, DType dw_dtype) {
  std::vector<double> sum(dw0), abs_sum(dw0.size());
  std::vector<int64_t> count(size_t(vocab), 0);
  for (size_t i = 0; i < dw0.size(); ++i) abs_sum[i] = std::fabs(dw0[i]);
  for (size_t r = 0; r < ids.size(); ++r) {
    const int64_t id = ids[r];
    if (id < 0 || id >= vocab) continue;
    ++count[size_t(id)];
    for (int64_t c = 0; c < cols; ++c) {
      sum[size_t(id * cols + c)] += dout[r * size_t(cols) + size_t(c)];
      abs_sum[size_t(id * cols + c)] += std::fabs(dout[r * size_t(cols) + size_t(c)]);
    }
  }
  Expected e{sum, std::vector<double>(dw0.size(), 0.0)};
  for (size_t i = 0; i < dw0.size(); ++i) {
    const int64_t k = count[i / size_t(cols)];
    if (k == 0) continue;
    const double fp32 = double(k + 1) * std::ldexp(1.0, -24) * abs_sum[i];
    e.bound[i] = dw_dtype == DType::BF16 ? std::ldexp(std::fabs(sum[i]), -8) + (1 + std::ldexp(1.0, -8)) * fp32 : fp32;
  }
  return e;
}

void expect_within(const std::vector<double>& got, const Expected& e) {
  ASSERT_EQ(got.size(), e.value.size());
  int64_t bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - e.value[i]) <= e.bound[i]) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0) << "first at " << first << ": got " << got[first] << ", exact " << e.value[first] << ", bound "
                    << e.bound[first];
}

// Bit patterns of the values (to_host_f64 widens fp32/bf16 exactly), so -0 and +0 differ too.
std::vector<uint64_t> bits_of(const std::vector<double>& v) {
  std::vector<uint64_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(double));
  return b;
}

// One GPU backward into a fresh dweight (V, C) of dw_dtype holding dw0; dweight afterwards.
std::vector<double> gpu_backward(Context& gpu, DType dw_dtype, const std::vector<double>& dw0, int64_t vocab,
                                 const Tensor& dout, const Tensor& ids) {
  Tensor dw = make_tensor(gpu, {vocab, dout.size(1)}, dw_dtype, dw0);
  ops::embedding_backward(gpu, dw, dout, ids);
  return dw.to_host_f64(gpu);
}

// --deterministic on promises the same bits on every run. Each id here repeats ~80 times, so
// fp32 atomics (the GPU backward's former way) would add ~80 values into every element in an
// order set by the warp scheduler; float addition is not associative, so some of the 3200 sums
// per case would come out differently between runs. Sorted by id, the order is fixed.
TEST(GpuEmbedding, BackwardIsBitForBitRepeatable) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t vocab = 50, n = 4096, runs = 20;
  const Tensor ids = make_ids(gpu, {n}, random_ids(n, int32_t(vocab), 30));
  for (int64_t dim : {int64_t(64), int64_t(13)})
    for (DType dw_dtype : {DType::F32, DType::BF16})
      for (DType dout_dtype : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(std::string("dweight ") + dtype_name(dw_dtype) + " dout " + dtype_name(dout_dtype) + " dim " +
                     std::to_string(dim));
        const auto dw0 = randn(vocab * dim, 31);
        const Tensor dout = make_tensor(gpu, {n, dim}, dout_dtype, randn(n * dim, 32));
        const auto first = bits_of(gpu_backward(gpu, dw_dtype, dw0, vocab, dout, ids));
        for (int64_t run = 1; run < runs; ++run) {
          const auto again = bits_of(gpu_backward(gpu, dw_dtype, dw0, vocab, dout, ids));
          int64_t differ = 0;
          for (size_t i = 0; i < first.size(); ++i) differ += again[i] != first[i];
          ASSERT_EQ(differ, 0) << "run " << run << " differs from run 0";
        }
      }
}

// Values against the fp64 sum within expected_backward's bound, dweight nonzero on entry
// (accumulated into: its values are as large as a row sum, so dropping them fails), for ids
// repeated ~80 times and for a large vocabulary with few repeats; dim 64 takes the 16-byte
// packs, 13 and the odd row count the element-at-a-time path.
TEST(GpuEmbedding, BackwardMatchesExactSumWithinBound) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  struct Case {
    int64_t vocab, n;
  };
  for (const Case& cs : {Case{50, 4096}, Case{50257, 1237}, Case{97, 1237}}) {
    const auto idv = random_ids(cs.n, int32_t(cs.vocab), 33);
    const Tensor ids = make_ids(gpu, {cs.n}, idv);
    for (int64_t dim : {int64_t(64), int64_t(13)})
      for (DType dw_dtype : {DType::F32, DType::BF16})
        for (DType dout_dtype : {DType::F32, DType::BF16}) {
          SCOPED_TRACE("vocab " + std::to_string(cs.vocab) + " n " + std::to_string(cs.n) + " dweight " +
                       dtype_name(dw_dtype) + " dout " + dtype_name(dout_dtype) + " dim " + std::to_string(dim));
          const auto dw0 = stored(randn(cs.vocab * dim, 34, 8.0), dw_dtype);
          const auto doutv = stored(randn(cs.n * dim, 35), dout_dtype);
          const Tensor dout = make_tensor(gpu, {cs.n, dim}, dout_dtype, doutv);
          expect_within(gpu_backward(gpu, dw_dtype, dw0, cs.vocab, dout, ids),
                        expected_backward(dw0, doutv, idv, cs.vocab, dim, dw_dtype));
        }
  }
}

// Ids outside [0, V) (which the GPU cannot reject without a host sync) add nothing, and the
// real ids beside them still sum right: a sort of the raw ids on their low ceil(log2 V) bits
// would put -20 among the 44s and 64 among the 0s (vocab 50), 71 among the 7s (vocab 64). An
// all-bad batch leaves dweight as it was. Misaligned dweight and dout (dim 16) take the scalar
// path.
TEST(GpuEmbedding, BackwardSkipsOutOfRangeIds) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const std::vector<int32_t> bad = {-1, -20, -50, INT32_MIN, INT32_MAX};
  for (int64_t vocab : {int64_t(1), int64_t(50), int64_t(64)}) {
    std::vector<int32_t> idv = random_ids(301, int32_t(vocab), 36);
    for (size_t r = 0; r < idv.size(); r += 3) idv[r] = bad[r % bad.size()];
    for (size_t r = 1; r < idv.size(); r += 7) idv[r] = int32_t(vocab + int64_t(r % 3) * 7);  // vocab, +7, +14
    const int64_t n = int64_t(idv.size());
    const Tensor ids = make_ids(gpu, {n}, idv);
    for (int64_t dim : {int64_t(16), int64_t(13)})
      for (DType dtype : {DType::F32, DType::BF16}) {
        SCOPED_TRACE("vocab " + std::to_string(vocab) + " " + dtype_name(dtype) + " dim " + std::to_string(dim));
        const auto dw0 = stored(randn(vocab * dim, 37), dtype);
        const auto doutv = stored(randn(n * dim, 38), dtype);
        const Tensor dout = make_tensor(gpu, {n, dim}, dtype, doutv);
        const Expected e = expected_backward(dw0, doutv, idv, vocab, dim, dtype);
        expect_within(gpu_backward(gpu, dtype, dw0, vocab, dout, ids), e);
        // Misaligned: each tensor starts one element into its buffer.
        auto shifted = [&](const std::vector<double>& v, const Shape& shape) {
          std::vector<double> padded(v.size() + 1, 0.0);
          std::copy(v.begin(), v.end(), padded.begin() + 1);
          return make_tensor(gpu, {int64_t(padded.size())}, dtype, padded)
              .narrow(0, 1, int64_t(v.size()))
              .reshape(shape);
        };
        Tensor dw_m = shifted(dw0, {vocab, dim});
        ops::embedding_backward(gpu, dw_m, shifted(doutv, {n, dim}), ids);
        expect_within(dw_m.to_host_f64(gpu), e);
        // Nothing in range: dweight keeps its bits.
        const Tensor all_bad = make_ids(gpu, {int64_t(bad.size())}, bad);
        const Tensor few = make_tensor(gpu, {int64_t(bad.size()), dim}, dtype, randn(int64_t(bad.size()) * dim, 39));
        EXPECT_EQ(bits_of(gpu_backward(gpu, dtype, dw0, vocab, few, all_bad)), bits_of(dw0));
      }
  }
}

}  // namespace
}  // namespace pt::test
