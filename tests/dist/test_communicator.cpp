// Communicator collectives against fp64 references computed from every rank's (seeded) input.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/dist_util.h"

namespace pt::test {
namespace {

using dist::ReduceOp;

// Rank r's input of n elements; any rank can recompute any other rank's.
std::vector<double> input_of(int r, int64_t n, uint64_t salt) { return randn(n, 1000 * salt + r); }

std::vector<double> reduce_ref(int world, int64_t n, uint64_t salt, bool average) {
  std::vector<double> sum(static_cast<size_t>(n), 0.0);
  for (int r = 0; r < world; ++r) {
    const auto x = input_of(r, n, salt);
    for (int64_t i = 0; i < n; ++i) sum[i] += static_cast<float>(x[i]);  // what the rank holds
  }
  if (average)
    for (auto& v : sum) v /= world;
  return sum;
}

class CommTest : public BackendTest {};

TEST_P(CommTest, AllReduceSumAndAverage) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{4099}, int64_t{1} << 20}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
      const uint64_t salt = static_cast<uint64_t>(n) + (op == ReduceOp::Average ? 1 : 0);
      Tensor t = device_f32(ctx(), input_of(rank(), n, salt));
      comm().all_reduce(t, op);
      PT_EXPECT_ALLCLOSE(host_f64(ctx(), t), reduce_ref(world(), n, salt, op == ReduceOp::Average),
                         1e-6, 1e-6);
    }
  }
}

TEST_P(CommTest, BroadcastFromEveryRoot) {
  const int64_t n = 3001;
  for (int root = 0; root < world(); ++root) {
    Tensor t = device_f32(ctx(), input_of(rank(), n, 7));
    comm().broadcast(t, root);
    std::vector<double> want;
    for (double v : input_of(root, n, 7)) want.push_back(static_cast<float>(v));
    EXPECT_EQ(host_f64(ctx(), t), want) << "root " << root;
  }
}

TEST_P(CommTest, ReduceToEveryRootLeavesOthersUnchanged) {
  const int64_t n = 2053;
  for (int root = 0; root < world(); ++root) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average}) {
      const uint64_t salt = 60 + root;
      Tensor t = device_f32(ctx(), input_of(rank(), n, salt));
      comm().reduce(t, root, op);
      if (rank() == root) {
        PT_EXPECT_ALLCLOSE(host_f64(ctx(), t), reduce_ref(world(), n, salt, op == ReduceOp::Average), 1e-6, 1e-6);
      } else {
        std::vector<double> mine;
        for (double v : input_of(rank(), n, salt)) mine.push_back(static_cast<float>(v));
        EXPECT_EQ(host_f64(ctx(), t), mine) << "a non-root buffer changed";
      }
    }
  }
}

TEST_P(CommTest, ReduceScatterInPlaceAndOutOfPlace) {
  const int64_t block = 1031;
  const int64_t n = block * world();
  const auto ref = reduce_ref(world(), n, 11, true);
  const std::vector<double> mine(ref.begin() + rank() * block, ref.begin() + (rank() + 1) * block);

  Tensor send = device_f32(ctx(), input_of(rank(), n, 11));
  Tensor recv = Tensor::empty({block}, DType::F32, ctx().device());
  poison(ctx(), recv);
  comm().reduce_scatter(send, recv, ReduceOp::Average);
  PT_EXPECT_ALLCLOSE(host_f64(ctx(), recv), mine, 1e-6, 1e-6);

  Tensor inplace = device_f32(ctx(), input_of(rank(), n, 11));
  Tensor own = inplace.narrow(0, rank() * block, block);
  comm().reduce_scatter(inplace, own, ReduceOp::Average);
  PT_EXPECT_ALLCLOSE(host_f64(ctx(), own), mine, 1e-6, 1e-6);
}

TEST_P(CommTest, AllGatherInPlaceAndOutOfPlace) {
  const int64_t block = 517;
  std::vector<double> want;
  for (int r = 0; r < world(); ++r)
    for (double v : input_of(r, block, 13)) want.push_back(static_cast<float>(v));

  Tensor send = device_f32(ctx(), input_of(rank(), block, 13));
  Tensor recv = Tensor::empty({block * world()}, DType::F32, ctx().device());
  poison(ctx(), recv);
  comm().all_gather(send, recv);
  EXPECT_EQ(host_f64(ctx(), recv), want);

  std::vector<double> nan(static_cast<size_t>(block * world()), std::nan(""));
  std::copy(want.begin() + rank() * block, want.begin() + (rank() + 1) * block, nan.begin() + rank() * block);
  Tensor inplace = device_f32(ctx(), nan);  // only our own block is valid before the gather
  Tensor own = inplace.narrow(0, rank() * block, block);
  comm().all_gather(own, inplace);
  EXPECT_EQ(host_f64(ctx(), inplace), want);
}

TEST_P(CommTest, ManyAsyncOperationsInFlightWaitedOutOfOrder) {
  const std::vector<int64_t> sizes = {5, 70000, 1, 300000, 33};
  std::vector<Tensor> ts;
  std::vector<dist::WorkPtr> works;
  for (size_t k = 0; k < sizes.size(); ++k) ts.push_back(device_f32(ctx(), input_of(rank(), sizes[k], 20 + k)));
  for (auto& t : ts) works.push_back(comm().all_reduce_async(t, ReduceOp::Average));
  comm().poll();
  for (size_t k = works.size(); k-- > 0;) works[k]->wait();
  for (size_t k = 0; k < sizes.size(); ++k)
    PT_EXPECT_ALLCLOSE(host_f64(ctx(), ts[k]), reduce_ref(world(), sizes[k], 20 + k, true), 1e-6, 1e-6)
        << "size " << sizes[k];
}

TEST_P(CommTest, SynchronizeCompletesWorkAndTestReportsIt) {
  Tensor t = device_f32(ctx(), input_of(rank(), 100000, 31));
  auto w = comm().all_reduce_async(t, ReduceOp::Sum);
  w->synchronize();
  EXPECT_TRUE(w->test());
  comm().synchronize();
  comm().barrier();
  PT_EXPECT_ALLCLOSE(host_f64(ctx(), t), reduce_ref(world(), 100000, 31, false), 1e-6, 1e-6);
}

TEST_P(CommTest, EmptyTensorsAreNoOps) {
  Tensor t = Tensor::empty({0}, DType::F32, ctx().device());
  comm().all_reduce(t, ReduceOp::Sum);
  comm().broadcast(t, 0);
  Tensor big = Tensor::empty({0}, DType::F32, ctx().device());
  comm().all_gather(t, big);
  comm().reduce_scatter(big, t, ReduceOp::Sum);
  SUCCEED();
}

// Bad input is rejected before any collective starts, identically on every rank.
TEST_P(CommTest, BadBuffersGiveClearErrors) {
  Tensor wrong_size = Tensor::empty({10}, DType::F32, ctx().device());
  Tensor block = Tensor::empty({3}, DType::F32, ctx().device());
  EXPECT_THROW(comm().all_gather(block, wrong_size), Error);
  EXPECT_THROW(comm().reduce_scatter(wrong_size, block, ReduceOp::Sum), Error);
  Tensor ints = Tensor::empty({4}, DType::I32, ctx().device());
  EXPECT_THROW(comm().all_reduce(ints, ReduceOp::Sum), Error);
  EXPECT_THROW(comm().broadcast(block, world()), Error);
  // Overlapping buffers that are not the in-place layout.
  Tensor buf = Tensor::empty({4 * world()}, DType::F32, ctx().device());
  Tensor shifted = buf.narrow(0, 1, 4);
  EXPECT_THROW(comm().all_gather(shifted, buf), Error);
  if (backend() == dist::Backend::NCCL) {
    Tensor host = Tensor::empty({4}, DType::F32, Device::cpu());
    EXPECT_THROW(comm().all_reduce(host, ReduceOp::Sum), Error);
  }
  try {
    comm().all_reduce(ints, ReduceOp::Sum);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce"), std::string::npos) << e.what();
  }
  // The communicator still works afterwards.
  Tensor t = device_f32(ctx(), input_of(rank(), 9, 41));
  comm().all_reduce(t, ReduceOp::Sum);
  PT_EXPECT_ALLCLOSE(host_f64(ctx(), t), reduce_ref(world(), 9, 41, false), 1e-6, 1e-6);
}

TEST(CommNames, BackendNamesRoundTrip) {
  EXPECT_EQ(dist::backend_from_name("nccl"), dist::Backend::NCCL);
  EXPECT_EQ(dist::backend_from_name("mpi"), dist::Backend::MPI);
  EXPECT_THROW(dist::backend_from_name("gloo"), Error);
  EXPECT_EQ(dist::backend_for(Device::cpu()), dist::Backend::MPI);
  EXPECT_EQ(dist::backend_for(Device::cuda(0)), dist::Backend::NCCL);
}

PT_INSTANTIATE_BACKENDS(CommTest);

}  // namespace
}  // namespace pt::test
