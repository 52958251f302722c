// The copy-engine collectives (--comm-engine ce) on registered buffers: bit for bit NCCL's
// results with 2 ranks (the same sums: a + b, scaled by a power of two), within a stated bound
// of an fp64 reference with more; untouched memory around the buffer; pieces past the staging
// size; many collectives in flight; unregistered buffers through NCCL. GPUs only (skipped on
// CPU ranks); the NCCL suite's DDP and ZeRO-1 equivalence tests run on this engine too
// (ctest dist_ce_np2/np4).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/test_util.h"
#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/dist_util.h"
#include "parallel/runtime.h"

namespace pt::test {
namespace {

using parallel::CommEngine;
using parallel::ReduceOp;

constexpr int64_t kLead = 3;            // elements before the buffer in its allocation: chunks start unaligned
constexpr double kSentinel = -12288.0;  // exact in bf16 too

// Rank r's input of n values (rounded to the storage type when the tensor is made).
std::vector<double> input_of(int r, int64_t n, uint64_t salt) { return randn(n, 977 * salt + r); }

class CopyEngineCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    PT_REQUIRE_BACKEND(parallel::Backend::NCCL);
    ASSERT_GE(world(), 2);
    if (parallel::Runtime::get().node_count() > 1) GTEST_SKIP() << "the copy engines serve the ranks of one node";
  }
  Context& ctx() const { return backend_context(parallel::Backend::NCCL); }
  parallel::Communicator& ce() const { return engine_comm(CommEngine::CE); }
  parallel::Communicator& nccl() const { return engine_comm(CommEngine::NCCL); }
  int rank() const { return parallel::Runtime::get().rank(); }
  int world() const { return parallel::Runtime::get().world_size(); }

  // An allocation of kLead + n + kLead elements of `dtype` holding sentinels around `values`.
  Tensor padded(const std::vector<double>& values, DType dtype) const {
    std::vector<double> all(kLead, kSentinel);
    all.insert(all.end(), values.begin(), values.end());
    all.insert(all.end(), kLead, kSentinel);
    return make_tensor(ctx(), {static_cast<int64_t>(all.size())}, dtype, all);
  }
  static Tensor inner(Tensor& whole) { return whole.narrow(0, kLead, whole.numel() - 2 * kLead); }
  // The sentinels are still there.
  void expect_untouched(const Tensor& whole) const {
    const auto v = whole.to_host_f64(ctx());
    for (int64_t i = 0; i < kLead; ++i) {
      EXPECT_EQ(v[i], kSentinel) << "element " << i << " before the buffer was written";
      EXPECT_EQ(v[v.size() - 1 - i], kSentinel) << "element " << i << " past the buffer was written";
    }
  }
  // got (elements [at, at + got.numel()) of the reduction) against the fp64 reference of what the
  // ranks held, within the bound of fp32 sums in rank order (world roundings of 2^-24 of the
  // magnitudes) and one final rounding to the storage type.
  void expect_within_bound(const Tensor& got_t, int64_t n, DType dtype, ReduceOp op, uint64_t salt, int64_t at) const {
    std::vector<double> want(static_cast<size_t>(n), 0.0), mag(static_cast<size_t>(n), 0.0);
    for (int r = 0; r < world(); ++r) {
      const auto held = make_tensor(ctx(), {n}, dtype, input_of(r, n, salt)).to_host_f64(ctx());
      for (int64_t i = 0; i < n; ++i) {
        want[i] += held[i];
        mag[i] += std::fabs(held[i]);
      }
    }
    const double scale = op == ReduceOp::Average ? 1.0 / world() : 1.0;
    const double unit = dtype == DType::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -24);
    const auto got = got_t.to_host_f64(ctx());
    int64_t bad = 0;
    for (size_t j = 0; j < got.size(); ++j) {
      const size_t i = j + static_cast<size_t>(at);
      const double w = want[i] * scale;
      const double bound = (world() * std::ldexp(1.0, -24) * mag[i] * scale + unit * std::fabs(w)) * 1.0001 + 1e-30;
      bad += std::fabs(got[j] - w) > bound;
    }
    EXPECT_EQ(bad, 0) << "elements outside the rounding bound";
  }
  static std::vector<uint8_t> bytes_of(Context& ctx, const Tensor& t) {
    Tensor host = t.to(Device::cpu(), ctx);
    const auto* p = static_cast<const uint8_t*>(host.data());
    return {p, p + host.nbytes()};
  }
};

// Sizes: fewer elements than ranks, odd, and a chunk larger than the 8 MiB staging piece.
const int64_t kSizes[] = {1, 4099, (int64_t{9} << 20) / 4 * 2 + 5};

TEST_F(CopyEngineCollectives, IsTheEngine) { EXPECT_STREQ(ce().engine(), "ce"); }

TEST_F(CopyEngineCollectives, AllReduceMatchesNcclAndTheReference) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average})
      for (int64_t n : kSizes) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + (op == ReduceOp::Sum ? " sum " : " average ") +
                     std::to_string(n));
        const uint64_t salt = 10 + static_cast<uint64_t>(n) + (dtype == DType::BF16 ? 1 : 0);
        Tensor whole = padded(input_of(rank(), n, salt), dtype);
        const parallel::RegistrationPtr reg = ce().register_buffer(whole);
        Tensor t = inner(whole);
        ce().all_reduce(t, op);
        ce().synchronize();
        expect_untouched(whole);
        // NCCL on an unregistered copy of the same input.
        Tensor ref_whole = padded(input_of(rank(), n, salt), dtype);
        Tensor ref = inner(ref_whole);
        nccl().all_reduce(ref, op);
        nccl().synchronize();
        if (world() == 2) EXPECT_EQ(bytes_of(ctx(), t), bytes_of(ctx(), ref)) << "not NCCL's bits";
        expect_within_bound(t, n, dtype, op, salt, 0);
        // Every rank holds the same bits: the owner's chunk went to all.
        const auto mine = bytes_of(ctx(), t);
        double h = 0;
        for (size_t i = 0; i < mine.size(); ++i) h = std::fmod(h * 257.0 + mine[i], 1e15);
        const auto all = mpi_all_gather(h);
        for (double x : all) EXPECT_EQ(x, all[0]) << "ranks hold different results";
      }
}

TEST_F(CopyEngineCollectives, ReduceScatterInPlaceMatchesNccl) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    const int64_t block = 4099, n = block * world();
    Tensor whole = padded(input_of(rank(), n, 60), dtype);
    const parallel::RegistrationPtr reg = ce().register_buffer(whole);
    Tensor t = inner(whole);
    Tensor mine = t.narrow(0, rank() * block, block);
    ce().reduce_scatter(t, mine, ReduceOp::Average);
    Tensor ref_whole = padded(input_of(rank(), n, 60), dtype);
    Tensor ref = inner(ref_whole);
    Tensor ref_mine = ref.narrow(0, rank() * block, block);
    nccl().reduce_scatter(ref, ref_mine, ReduceOp::Average);
    ce().synchronize();
    nccl().synchronize();
    expect_untouched(whole);
    if (world() == 2) EXPECT_EQ(bytes_of(ctx(), mine), bytes_of(ctx(), ref_mine)) << dtype_name(dtype);
    // More ranks: NCCL rounds every partial sum (bf16: far from the result where terms cancel),
    // the copy engines once, so both face the reference instead.
    expect_within_bound(mine, n, dtype, ReduceOp::Average, 60, rank() * block);
  }
}

TEST_F(CopyEngineCollectives, AllGatherInPlaceMovesBitsExactly) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    const int64_t block = (int64_t{5} << 20) + 3, n = block * world();
    std::vector<double> values(static_cast<size_t>(n), 0.0);
    const auto own = input_of(rank(), block, 70);
    std::copy(own.begin(), own.end(), values.begin() + rank() * block);
    Tensor whole = padded(values, dtype);
    const parallel::RegistrationPtr reg = ce().register_buffer(whole);
    Tensor t = inner(whole);
    ce().all_gather(t.narrow(0, rank() * block, block), t);
    ce().synchronize();
    expect_untouched(whole);
    const auto got = t.to_host_f64(ctx());
    for (int r = 0; r < world(); ++r) {
      const auto want = make_tensor(ctx(), {block}, dtype, input_of(r, block, 70)).to_host_f64(ctx());
      int64_t bad = 0;
      for (int64_t i = 0; i < block; ++i) bad += got[r * block + i] != want[i];
      EXPECT_EQ(bad, 0) << "rank " << r << "'s block, " << dtype_name(dtype);
    }
  }
}

TEST_F(CopyEngineCollectives, ManyInFlightOnOneBufferWaitedOutOfOrder) {
  // Buckets of one gradient buffer, as the bucketed strategy starts them during backward.
  const int64_t n = 100003, pieces = 7;
  Tensor whole = padded(input_of(rank(), n, 80), DType::F32);
  const parallel::RegistrationPtr reg = ce().register_buffer(whole);
  Tensor t = inner(whole);
  std::vector<parallel::WorkPtr> works;
  for (int64_t k = 0; k < pieces; ++k) {
    const int64_t lo = n * k / pieces, hi = n * (k + 1) / pieces;
    Tensor part = t.narrow(0, lo, hi - lo);
    works.push_back(ce().all_reduce_async(part, ReduceOp::Sum));
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  Tensor ref_whole = padded(input_of(rank(), n, 80), DType::F32);
  Tensor ref = inner(ref_whole);
  nccl().all_reduce(ref, ReduceOp::Sum);
  ce().synchronize();
  nccl().synchronize();
  PT_EXPECT_ALLCLOSE(t.to_host_f64(ctx()), ref.to_host_f64(ctx()), 1e-6, 1e-6);
  if (world() == 2) EXPECT_EQ(bytes_of(ctx(), t), bytes_of(ctx(), ref));
}

TEST_F(CopyEngineCollectives, UnregisteredBuffersGoThroughNccl) {
  const int64_t n = 4099;
  Tensor whole = padded(input_of(rank(), n, 90), DType::F32);
  Tensor t = inner(whole);
  ce().all_reduce(t, ReduceOp::Sum);
  Tensor ref_whole = padded(input_of(rank(), n, 90), DType::F32);
  Tensor ref = inner(ref_whole);
  nccl().all_reduce(ref, ReduceOp::Sum);
  ce().synchronize();
  nccl().synchronize();
  EXPECT_EQ(bytes_of(ctx(), t), bytes_of(ctx(), ref));
}

TEST_F(CopyEngineCollectives, RegistrationsOfAnotherShapeAreRefused) {
  // Each rank registers a buffer of its own length: every rank refuses, naming the rule.
  Tensor t = Tensor::zeros({1000 + rank()}, DType::F32, ctx(), "mismatched");
  try {
    const parallel::RegistrationPtr reg = ce().register_buffer(t);
    ADD_FAILURE() << "a mismatched registration was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("same buffers"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pt::test
