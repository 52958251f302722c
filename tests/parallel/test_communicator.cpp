// Communicator collectives against fp64 references computed from every rank's (seeded) input,
// and bf16 collectives (--grad-comm bf16) bit for bit against sums rounded on the host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/test_util.h"
#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/dist_util.h"
#include "parallel/host_collectives.h"

namespace pt::test {
namespace {

using parallel::ReduceOp;

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
      PT_EXPECT_ALLCLOSE(host_f64(ctx(), t), reduce_ref(world(), n, salt, op == ReduceOp::Average), 1e-6, 1e-6);
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
  std::vector<parallel::WorkPtr> works;
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
  if (backend() == parallel::Backend::NCCL) {
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

// ---- bf16 -------------------------------------------------------------------------------

// A bf16 tensor on ctx's device holding `bits`, and a bf16 tensor's bits on the host.
Tensor bf16_tensor(Context& ctx, const std::vector<uint16_t>& bits) {
  Tensor host = Tensor::empty({static_cast<int64_t>(bits.size())}, DType::BF16, Device::cpu(), "test_input");
  std::memcpy(host.data(), bits.data(), bits.size() * 2);
  return ctx.is_cuda() ? host.to(ctx.device(), ctx) : host;
}
std::vector<uint16_t> bits_of(Context& ctx, const Tensor& t) {
  Tensor host = t.device().is_cuda() ? t.to(Device::cpu(), ctx) : t;
  const uint16_t* p = host.data_as<uint16_t>();
  return std::vector<uint16_t>(p, p + host.numel());
}
uint16_t bf16(float f) { return float_to_bf16_bits(f); }

// Pairs (rank 0's, rank 1's) whose bf16 sum must round, and the sum it must round to (the bf16
// ulp at 1 is 2^-7): ties go to the even neighbour, either way, and non-ties to the nearer.
struct RoundingCase {
  float a, b, sum;
};
const std::vector<RoundingCase> kRounding = {
    {1.0f, 0x1p-8f, 1.0f},                      // 1 + 2^-8: a tie, down to even 1
    {1.0f + 0x1p-7f, 0x1p-8f, 1.0f + 0x1p-6f},  // 1 + 3·2^-8: a tie, up to even 1 + 2^-6
    {1.0f, 0x1p-9f, 1.0f},                      // 1 + 2^-9: a quarter ulp, down
    {1.0f, 0x3p-9f, 1.0f + 0x1p-7f},            // 1 + 3·2^-9: three quarters, up
    {256.0f, 1.0f, 256.0f},                     // 257: a tie at ulp 2, down to even
    {-1.0f, -0x1p-8f, -1.0f}};                  // the same below zero

// Rank r's n bf16 values (2 ranks): the rounding cases, then random values.
std::vector<uint16_t> bf16_input(int r, int64_t n, uint64_t salt) {
  std::vector<uint16_t> bits;
  for (const auto& c : kRounding) bits.push_back(bf16(r == 0 ? c.a : c.b));
  for (double v : input_of(r, n, salt)) bits.push_back(bf16(static_cast<float>(v)));
  bits.resize(static_cast<size_t>(n));
  return bits;
}

// bf16(a + b) element by element: what a 2-rank bf16 sum must give.
std::vector<uint16_t> bf16_sum_ref(int64_t n, uint64_t salt) {
  const auto a = bf16_input(0, n, salt), b = bf16_input(1, n, salt);
  std::vector<uint16_t> sum(a.size());
  for (size_t i = 0; i < a.size(); ++i) sum[i] = bf16(bf16_bits_to_float(a[i]) + bf16_bits_to_float(b[i]));
  return sum;
}

class Bf16CommTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // With more ranks the partial sums round in the collective's own order.
    if (world() != 2) GTEST_SKIP() << "the bf16 sum references are for 2 ranks";
  }
};

TEST_P(Bf16CommTest, AllReduceSumRoundsEachSumToBf16) {
  const int64_t cases = static_cast<int64_t>(kRounding.size());
  for (int64_t n : {cases, int64_t{4099}, int64_t{1} << 20}) {
    const uint64_t salt = 70 + static_cast<uint64_t>(n);
    Tensor t = bf16_tensor(ctx(), bf16_input(rank(), n, salt));
    comm().all_reduce(t, ReduceOp::Sum);
    const auto got = bits_of(ctx(), t), want = bf16_sum_ref(n, salt);
    EXPECT_EQ(got, want) << n << " elements";
    // The reference itself: the hand-worked roundings, which an fp32 sum would not give.
    for (size_t i = 0; i < kRounding.size(); ++i) {
      const RoundingCase& c = kRounding[i];
      EXPECT_EQ(bf16_bits_to_float(got[i]), c.sum) << "case " << i;
      EXPECT_NE(c.a + c.b, c.sum) << "case " << i << " must round";
    }
  }
}

TEST_P(Bf16CommTest, ReduceToEveryRootLeavesOthersUnchanged) {
  const int64_t n = 2053;
  for (int root = 0; root < world(); ++root) {
    const uint64_t salt = 80 + root;
    Tensor t = bf16_tensor(ctx(), bf16_input(rank(), n, salt));
    comm().reduce(t, root, ReduceOp::Sum);
    if (rank() == root)
      EXPECT_EQ(bits_of(ctx(), t), bf16_sum_ref(n, salt)) << "root " << root;
    else
      EXPECT_EQ(bits_of(ctx(), t), bf16_input(rank(), n, salt)) << "a non-root buffer changed";
  }
}

TEST_P(Bf16CommTest, ReduceScatterInPlaceAndOutOfPlace) {
  const int64_t block = 1031, n = block * world();
  const auto ref = bf16_sum_ref(n, 90);
  const std::vector<uint16_t> mine(ref.begin() + rank() * block, ref.begin() + (rank() + 1) * block);

  Tensor send = bf16_tensor(ctx(), bf16_input(rank(), n, 90));
  Tensor recv = bf16_tensor(ctx(), std::vector<uint16_t>(static_cast<size_t>(block), 0x7fc0));  // NaN
  comm().reduce_scatter(send, recv, ReduceOp::Sum);
  EXPECT_EQ(bits_of(ctx(), recv), mine);

  Tensor inplace = bf16_tensor(ctx(), bf16_input(rank(), n, 90));
  Tensor own = inplace.narrow(0, rank() * block, block);
  comm().reduce_scatter(inplace, own, ReduceOp::Sum);
  EXPECT_EQ(bits_of(ctx(), own), mine);
}

// Bit patterns a float reduction could disturb: NaNs with payloads, infinities, -0, subnormals.
std::vector<uint16_t> odd_bits(int r, int64_t n) {
  std::vector<uint16_t> bits = {0x7fc1, 0xffff, 0x7f80, 0xff80, 0x8000, 0x0001, 0x807f};
  for (double v : uniform(n, 300 + r, 0, 65535)) bits.push_back(static_cast<uint16_t>(v));
  bits.resize(static_cast<size_t>(n));
  for (auto& b : bits) b = static_cast<uint16_t>(b ^ r);  // every rank its own
  return bits;
}

TEST_P(Bf16CommTest, BroadcastAndAllGatherMoveBitsExactly) {
  const int64_t n = 3001;
  for (int root = 0; root < world(); ++root) {
    Tensor t = bf16_tensor(ctx(), odd_bits(rank(), n));
    comm().broadcast(t, root);
    EXPECT_EQ(bits_of(ctx(), t), odd_bits(root, n)) << "root " << root;
  }
  const int64_t block = 517;
  std::vector<uint16_t> want;
  for (int r = 0; r < world(); ++r) {
    const auto b = odd_bits(r, block);
    want.insert(want.end(), b.begin(), b.end());
  }
  Tensor send = bf16_tensor(ctx(), odd_bits(rank(), block));
  Tensor recv = bf16_tensor(ctx(), std::vector<uint16_t>(want.size(), 0));
  comm().all_gather(send, recv);
  EXPECT_EQ(bits_of(ctx(), recv), want);
  std::vector<uint16_t> only_mine(want.size(), 0x7fc0);
  std::copy(want.begin() + rank() * block, want.begin() + (rank() + 1) * block, only_mine.begin() + rank() * block);
  Tensor inplace = bf16_tensor(ctx(), only_mine);
  Tensor own = inplace.narrow(0, rank() * block, block);
  comm().all_gather(own, inplace);
  EXPECT_EQ(bits_of(ctx(), inplace), want);
}

// MPI has no bf16 average: refused before any collective starts, with a clear message, and the
// communicator still works. (NCCL averages bf16 itself.)
TEST_P(Bf16CommTest, MpiRefusesBf16Averages) {
  if (backend() != parallel::Backend::MPI) GTEST_SKIP() << "NCCL has a bf16 average";
  Tensor t = bf16_tensor(ctx(), bf16_input(rank(), 8 * world(), 95));
  Tensor block = t.narrow(0, rank() * 8, 8);
  const std::string msg = error_of([&] { comm().all_reduce(t, ReduceOp::Average); });
  EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Average"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { comm().reduce(t, 0, ReduceOp::Average); }), "");
  EXPECT_NE(error_of([&] { comm().reduce_scatter(t, block, ReduceOp::Average); }), "");
  comm().all_reduce(t, ReduceOp::Sum);
  EXPECT_EQ(bits_of(ctx(), t), bf16_sum_ref(8 * world(), 95));
}

PT_INSTANTIATE_BACKENDS(Bf16CommTest);

TEST(CommNames, BackendNamesRoundTrip) {
  EXPECT_EQ(parallel::backend_from_name("nccl"), parallel::Backend::NCCL);
  EXPECT_EQ(parallel::backend_from_name("mpi"), parallel::Backend::MPI);
  EXPECT_THROW(parallel::backend_from_name("gloo"), Error);
  EXPECT_EQ(parallel::backend_for(Device::cpu()), parallel::Backend::MPI);
  EXPECT_EQ(parallel::backend_for(Device::cuda(0)), parallel::Backend::NCCL);
}

PT_INSTANTIATE_BACKENDS(CommTest);

// Rank 0 assembles every rank's pieces (interleaved, of odd sizes, split into 7-byte messages
// here: the real limit is 1 GiB), and bytes no piece covers keep their values.
TEST(HostCollectives, GatherPiecesToRootPlacesEveryRanksBytes) {
  const int rank = parallel::Runtime::get().rank(), world = parallel::Runtime::get().world_size();
  constexpr int64_t kSpan = 29;  // bytes per rank and piece slot
  std::vector<std::vector<char>> data;
  std::vector<parallel::BytePiece> mine;
  for (int piece = 0; piece < 3; ++piece) {  // pieces of ranks alternate through the buffer
    const int64_t bytes = kSpan - piece * 5;
    data.emplace_back(static_cast<size_t>(bytes));
    for (int64_t i = 0; i < bytes; ++i) data.back()[size_t(i)] = static_cast<char>(rank * 31 + piece * 7 + i);
    mine.push_back({(piece * world + rank) * kSpan, data.back().data(), bytes});
  }
  std::vector<char> whole(rank == 0 ? static_cast<size_t>(3 * world * kSpan) : 0, '\x55');
  parallel::gather_pieces_to_root(whole, mine, 7);
  if (rank != 0) return;
  for (int r = 0; r < world; ++r)
    for (int piece = 0; piece < 3; ++piece)
      for (int64_t i = 0; i < kSpan; ++i) {
        const char got = whole[size_t((piece * world + r) * kSpan + i)];
        const char want = i < kSpan - piece * 5 ? static_cast<char>(r * 31 + piece * 7 + i) : '\x55';
        ASSERT_EQ(got, want) << "rank " << r << " piece " << piece << " byte " << i;
      }
}

}  // namespace
}  // namespace pt::test
