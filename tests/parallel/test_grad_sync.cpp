// Gradient-sync strategies on a hand-built ParamStore (grad_sync_fixture.h): every strategy
// leaves the average over ranks of every trainable gradient (with --grad-comm bf16 exactly the
// rounded bf16 sum times 1/world), skips frozen parameters, syncs a tied one once, and makes
// rank 0's parameters everyone's.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/dist_util.h"
#include "parallel/grad_sync.h"
#include "parallel/strategies.h"
#include "parallel/zero1.h"

#include "parallel/grad_sync_fixture.h"

namespace pt::test {
namespace {

using namespace grad_sync_fixture;

struct SyncCase {
  parallel::Backend backend;
  std::string ddp;  // a --ddp name, or "zero1" for the reduce-scatter
  double bucket_mb;
  std::string label;  // test-name suffix for bucket sizes
};

void PrintTo(const SyncCase& c, std::ostream* os) {
  *os << parallel::backend_name(c.backend) << " " << c.ddp << " bucket_mb " << c.bucket_mb;
}

std::string case_name(const ::testing::TestParamInfo<SyncCase>& info) { return info.param.ddp + info.param.label; }

class SyncTest : public ::testing::TestWithParam<SyncCase> {
 protected:
  void SetUp() override {
    PT_REQUIRE_BACKEND(GetParam().backend);
    ASSERT_GE(world(), 2) << "run the dist suite under mpiexec -n 2 (or more)";
  }
  Context& ctx() { return backend_context(GetParam().backend); }
  parallel::Communicator& comm() { return backend_comm(GetParam().backend); }
  int rank() const { return parallel::Runtime::get().rank(); }
  int world() const { return parallel::Runtime::get().world_size(); }
  std::unique_ptr<parallel::GradSync> make_sync(ParamStore& store, parallel::GradComm wire = parallel::GradComm::FP32) {
    const auto& c = GetParam();
    if (c.ddp.rfind("zero1_", 0) == 0)
      return parallel::make_zero1_sync(parallel::strategy(c.ddp.substr(6)), ctx(), store, comm(), c.bucket_mb, wire);
    return parallel::make_grad_sync(parallel::strategy(c.ddp), ctx(), store, &comm(), c.bucket_mb, wire);
  }

  // A store whose ranks start from different parameters and the case's strategy on it, checked
  // to have made rank 0's parameters everyone's (rank0). mine: the gradient elements it leaves
  // averaged on this rank (zero1: this rank's chunks), ascending.
  struct Setup {
    std::unique_ptr<ParamStore> store;
    std::unique_ptr<parallel::GradSync> sync;
    std::vector<double> rank0;
    std::vector<int64_t> mine;
  };
  Setup set_up(parallel::GradComm wire) {
    Setup s;
    s.store = make_store(ctx());
    const int64_t n = s.store->numel(), g = s.store->grad_numel();
    set_flat(ctx(), s.store->flat_params(), params_of(rank(), n));
    s.sync = make_sync(*s.store, wire);
    EXPECT_EQ(s.store->listeners(), std::vector<GradReadyListener*>{s.sync.get()});
    for (double v : params_of(0, n)) s.rank0.push_back(static_cast<float>(v));
    EXPECT_EQ(host_f64(ctx(), s.store->flat_params()), s.rank0) << "parameters after construction (fp32)";
    const auto& c = GetParam();
    if (c.ddp.rfind("zero1_", 0) == 0) {
      for (const auto& [lo, hi] :
           parallel::zero1_layout(parallel::strategy(c.ddp.substr(6)), *s.store, world(), c.bucket_mb)->owned(rank()))
        for (int64_t i = lo; i < hi; ++i) s.mine.push_back(i);
    } else {
      for (int64_t i = 0; i < g; ++i) s.mine.push_back(i);
    }
    return s;
  }
  // Step `step` up to backward: zero_grad, this rank's gradients, begin_step.
  void start_step(Setup& s, int step) {
    s.store->zero_grad(ctx());
    s.sync->begin_step(ctx());
    set_flat(ctx(), s.store->flat_grads(), grads_of(rank(), step, s.store->grad_numel()));
  }
};

TEST_P(SyncTest, AveragesTrainableGradientsAndBroadcastsRankZerosParameters) {
  Setup s = set_up(parallel::GradComm::FP32);
  const int64_t g = s.store->grad_numel();
  auto mine = [&](const std::vector<double>& v) {
    std::vector<double> out;
    for (int64_t i : s.mine) out.push_back(v[i]);
    return out;
  };
  for (int step = 0; step < 3; ++step) {
    start_step(s, step);
    fake_backward(*s.store);
    s.sync->finish(ctx());

    std::vector<double> mean(static_cast<size_t>(g), 0.0);
    for (int r = 0; r < world(); ++r) {
      const auto x = grads_of(r, step, g);
      for (int64_t i = 0; i < g; ++i) mean[i] += static_cast<float>(x[i]) / world();
    }
    const auto got = host_f64(ctx(), s.store->flat_grads());
    PT_EXPECT_ALLCLOSE(mine(got), mine(mean), 1e-6, 1e-7) << "step " << step;
    EXPECT_EQ(host_f64(ctx(), s.store->flat_params()), s.rank0) << "a sync must not touch parameters";
    EXPECT_EQ(s.sync->bytes_communicated(), g * 4);
  }
}

// --grad-comm bf16: each gradient is cast to bf16, summed in bf16 and scaled by 1/2 in fp32, so
// with 2 ranks every element (zero1: of this rank's part) is exactly
// float(bf16(bf16(g0) + bf16(g1))) / 2, which differs from the fp32 average; the staging buffers
// go through the tracking allocator and are all released by the end of finish().
TEST_P(SyncTest, Bf16WireLeavesTheRoundedBf16SumTimesOneOverWorld) {
  if (world() != 2) GTEST_SKIP() << "the exact bf16 reference is for 2 ranks";
  Setup s = set_up(parallel::GradComm::BF16);
  const int64_t g = s.store->grad_numel();
  auto& alloc = TrackingAllocator::instance();
  const DeviceKind kind = ctx().device().kind;
  const int workspace = static_cast<int>(MemCategory::Workspace);
  for (int step = 0; step < 3; ++step) {
    start_step(s, step);
    ctx().synchronize();
    alloc.reset_peak(kind);
    const MemoryStats before = alloc.stats(kind);
    fake_backward(*s.store);
    s.sync->finish(ctx());
    ctx().synchronize();
    const MemoryStats after = alloc.stats(kind);
    EXPECT_EQ(after.in_use, before.in_use) << "step " << step << ": a bf16 staging buffer was not released";
    EXPECT_GT(after.at_peak_by_category[workspace], before.in_use_by_category[workspace])
        << "step " << step << ": the staging buffers come from the tracking allocator, as workspace";

    const auto g0 = grads_of(0, step, g), g1 = grads_of(1, step, g);
    const auto got = host_f64(ctx(), s.store->flat_grads());
    std::vector<double> want, got_mine;
    int64_t differ_from_fp32 = 0;
    for (int64_t i : s.mine) {
      got_mine.push_back(got[i]);
      const float a = static_cast<float>(g0[i]), b = static_cast<float>(g1[i]);
      want.push_back(round_to_bf16(round_to_bf16(a) + round_to_bf16(b)) / 2.0f);
      differ_from_fp32 += got[i] != static_cast<double>((a + b) / 2.0f);
    }
    EXPECT_EQ(got_mine, want) << "step " << step;
    EXPECT_GT(differ_from_fp32, static_cast<int64_t>(s.mine.size()) / 2)
        << "step " << step << ": bf16 must not look like fp32";
    EXPECT_EQ(host_f64(ctx(), s.store->flat_params()), s.rank0) << "a sync must not touch parameters";
    EXPECT_EQ(s.sync->bytes_communicated(), g * 2) << "bf16 bytes, the tied parameter once";
  }
}

const std::vector<SyncCase> cases_for(parallel::Backend b) {
  // Bucket caps: one bucket per tensor, mixed (see BucketPlan below), one bucket.
  return {{b, "naive", 0, ""},
          {b, "flat", 0, ""},
          {b, "overlap", 0, ""},
          {b, "bucketed", 0, "_per_tensor"},
          {b, "bucketed", 0.0003, "_mixed"},
          {b, "bucketed", 100, "_single"},
          {b, "zero1_flat", 0, ""},
          {b, "zero1_overlap", 0, ""},
          {b, "zero1_bucketed", 0.0003, "_mixed"},
          {b, "zero1_bucketed", 100, "_single"}};
}
INSTANTIATE_TEST_SUITE_P(Mpi, SyncTest, ::testing::ValuesIn(cases_for(parallel::Backend::MPI)), case_name);
INSTANTIATE_TEST_SUITE_P(Nccl, SyncTest, ::testing::ValuesIn(cases_for(parallel::Backend::NCCL)), case_name);

}  // namespace
}  // namespace pt::test
