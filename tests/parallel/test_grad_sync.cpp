// Gradient-sync strategies on a hand-built ParamStore (no model): every strategy leaves the
// average over ranks of every trainable gradient (with --grad-comm bf16 exactly the rounded bf16
// sum times 1/world), skips frozen parameters, syncs a tied one once, makes rank 0's parameters
// everyone's; and each starts its collectives when it should.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common/test_util.h"
#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/dist_util.h"
#include "cli/ddp_options.h"
#include "parallel/grad_sync.h"
#include "parallel/zero1.h"

namespace pt::test {
namespace {

// Registration order; the fake backward below fires them in another order.
struct Spec {
  const char* name;
  Shape shape;
  bool trainable;
  int uses;
};
const std::vector<Spec> kSpecs = {
    {"embed", {8, 4}, true, 1},      {"frozen_scale", {5}, false, 1}, {"tied", {6, 3}, true, 2},
    {"block.w", {40, 25}, true, 1},  {"block.b", {25}, true, 1},      {"unused", {3}, true, 1},
    {"head", {7, 11}, true, 1},      {"const", {2}, false, 1}};
// A backward pass: the tied weight contributes twice; "unused" never does.
const std::vector<const char*> kBackwardOrder = {"head", "tied", "block.b", "block.w", "tied", "embed"};

std::unique_ptr<ParamStore> make_store(Context& ctx) {
  auto store = std::make_unique<ParamStore>();
  for (const auto& s : kSpecs) {
    Parameter& p = store->add(s.name, s.shape, s.trainable);
    for (int u = 0; u < s.uses; ++u) store->add_use(p);
  }
  store->finalize(ctx, false);
  return store;
}

std::vector<double> params_of(int rank, int64_t n) { return randn(n, 50 + rank); }
std::vector<double> grads_of(int rank, int step, int64_t n) { return randn(n, 1000 * step + rank); }

void set_flat(Context& ctx, const Tensor& flat, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  copy_bytes(ctx, flat.data(), flat.device().kind, f.data(), DeviceKind::CPU, f.size() * 4);
}

void fake_backward(ParamStore& store) {
  for (const char* name : kBackwardOrder) store.grad_contributed(*store.find(name));
}

struct SyncCase {
  parallel::Backend backend;
  std::string ddp;  // a --ddp name, or "zero1" for the reduce-scatter
  double bucket_mb;
  std::string label;  // test-name suffix for bucket sizes
};

void PrintTo(const SyncCase& c, std::ostream* os) { *os << parallel::backend_name(c.backend) << " " << c.ddp << " bucket_mb " << c.bucket_mb; }


std::string case_name(const ::testing::TestParamInfo<SyncCase>& info) {
  return info.param.ddp + info.param.label;
}

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
      return parallel::make_zero1_sync(c.ddp.substr(6), ctx(), store, comm(), c.bucket_mb, wire);
    return parallel::make_grad_sync(c.ddp, ctx(), store, &comm(), c.bucket_mb, wire);
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
      for (const auto& [lo, hi] : parallel::zero1_layout(c.ddp.substr(6), *s.store, world(), c.bucket_mb)->owned(rank()))
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
    PT_EXPECT_ALLCLOSE(mine(got), mine(mean), 1e-6, 1e-7)
        << "step " << step;
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
    EXPECT_GT(differ_from_fp32, static_cast<int64_t>(s.mine.size()) / 2) << "step " << step << ": bf16 must not look like fp32";
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

// ---- bucket plans (no communication) ---------------------------------------------------

std::vector<std::vector<std::string>> bucket_names(const ParamStore& store, double mb) {
  std::vector<std::vector<std::string>> out;
  int64_t expect_end = store.grad_numel();
  for (const auto& b : parallel::plan_buckets(store, mb)) {
    std::vector<std::string> names;
    for (int i : b.params) names.push_back(store[i].name);
    out.push_back(names);
    EXPECT_EQ(b.grad_end, expect_end) << "buckets tile the gradient buffer from its end";
    const Parameter& last = store[b.params.back()];
    EXPECT_EQ(b.grad_begin, last.grad_offset);
    expect_end = b.grad_begin;
  }
  EXPECT_EQ(expect_end, 0);
  return out;
}

TEST(BucketPlan, ZeroMeansOneBucketPerParameter) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  using V = std::vector<std::vector<std::string>>;
  EXPECT_EQ(bucket_names(*store, 0),
            (V{{"head"}, {"unused"}, {"block.b"}, {"block.w"}, {"tied"}, {"embed"}}));
}

TEST(BucketPlan, CapGroupsNeighboursAndIsolatesLargeParameters) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  using V = std::vector<std::vector<std::string>>;
  // 0.0003 MiB = 314 bytes = 78 floats: head (77) fills one; block.w (1000) is alone.
  EXPECT_EQ(bucket_names(*store, 0.0003),
            (V{{"head"}, {"unused", "block.b"}, {"block.w"}, {"tied", "embed"}}));
  EXPECT_EQ(bucket_names(*store, 100), (V{{"head", "unused", "block.b", "block.w", "tied", "embed"}}));
  EXPECT_EQ(bucket_names(*store, parallel::kDefaultBucketMB).size(), 1u);
  EXPECT_THROW(parallel::plan_buckets(*store, -1), Error);
}

TEST(GradSyncFactory, RejectsUnknownNamesAndMissingCommunicator) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  EXPECT_THROW(parallel::make_grad_sync("ring", ctx, *store, nullptr), Error);
  EXPECT_THROW(parallel::make_grad_sync("flat", ctx, *store, nullptr), Error);
  EXPECT_STREQ(parallel::make_grad_sync("none", ctx, *store, nullptr)->name(), "none");
}

// What every ZeRO-1 layout must be: buckets tiling [0, tail_begin) in multiples of the world
// size, a tail shorter than the world size, every element owned by exactly one rank (chunk r of
// its bucket, the tail by the last rank), and each bucket listing exactly the parameters with
// elements in it.
void expect_valid_layout(const parallel::Zero1Layout& L, const ParamStore& store) {
  int64_t at = 0;
  for (const auto& b : L.buckets) {
    EXPECT_EQ(b.grad_begin, at);
    EXPECT_GT(b.grad_end, b.grad_begin);
    EXPECT_EQ((b.grad_end - b.grad_begin) % L.world, 0);
    std::vector<int> want;
    for (const auto& p : store.params())
      if (p->trainable && p->grad_offset < b.grad_end && p->grad_offset + p->numel > b.grad_begin)
        want.push_back(p->index);
    EXPECT_EQ(b.params, want) << "bucket [" << b.grad_begin << ", " << b.grad_end << ")";
    at = b.grad_end;
  }
  EXPECT_EQ(L.tail_begin, at);
  EXPECT_LT(L.numel - L.tail_begin, L.world);
  EXPECT_EQ(L.numel, store.grad_numel());
  std::vector<int> owner(L.numel, -1);
  int64_t total = 0;
  for (int r = 0; r < L.world; ++r) {
    for (const auto& [lo, hi] : L.owned(r))
      for (int64_t i = lo; i < hi; ++i) {
        EXPECT_EQ(owner[i], -1) << "element " << i << " owned twice";
        owner[i] = r;
      }
    total += L.owned_numel(r);
  }
  EXPECT_EQ(total, L.numel);
  for (size_t b = 0; b < L.buckets.size(); ++b)
    for (int r = 0; r < L.world; ++r) EXPECT_EQ(owner[L.chunk_begin(b, r)], r);
}

// Gradient element ranges of make_store: embed [0,32) tied [32,50) block.w [50,1050)
// block.b [1050,1075) unused [1075,1078) head [1078,1155).
TEST(Zero1Layout, OneBucketIsTheContiguousPartitionWithATailOnTheLastRank) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  using R = std::vector<std::pair<int64_t, int64_t>>;
  const parallel::Zero1Layout two(*store, 2, parallel::Zero1Layout::kOneBucket);
  expect_valid_layout(two, *store);
  ASSERT_EQ(two.buckets.size(), 1u);
  EXPECT_EQ(two.chunk(0), 577);
  EXPECT_EQ(two.tail_begin, 1154);
  EXPECT_EQ(two.owned(0), (R{{0, 577}}));
  EXPECT_EQ(two.owned(1), (R{{577, 1155}}));
  const parallel::Zero1Layout tiny(*store, 2000, parallel::Zero1Layout::kOneBucket);  // fewer elements than ranks
  expect_valid_layout(tiny, *store);
  EXPECT_TRUE(tiny.buckets.empty());
  EXPECT_EQ(tiny.owned(1999), (R{{0, 1155}}));
  EXPECT_TRUE(tiny.owned(0).empty());
}

// Per-parameter buckets (bucket_mb 0), each end moved up to a multiple of the world size: a bucket
// takes the first elements of the parameter above it (finished earlier in backward), never the
// last of the one below.
TEST(Zero1Layout, BucketEndsMoveUpToMultiplesOfTheWorldSize) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  const parallel::Zero1Layout L(*store, 2, 0.0);
  expect_valid_layout(L, *store);
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const auto& b : L.buckets) got.emplace_back(b.grad_begin, b.grad_end);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{
                     {0, 32}, {32, 50}, {50, 1050}, {1050, 1076}, {1076, 1078}, {1078, 1154}}));
  EXPECT_EQ(L.tail_begin, 1154);
  EXPECT_EQ(L.owned(1), (std::vector<std::pair<int64_t, int64_t>>{
                            {16, 32}, {41, 50}, {550, 1050}, {1063, 1076}, {1077, 1078}, {1116, 1155}}));
  for (int world : {1, 3, 4, 7, 64})
    for (double mb : {0.0, 0.0003, 0.004, 100.0, parallel::Zero1Layout::kOneBucket}) {
      SCOPED_TRACE("world " + std::to_string(world) + ", bucket_mb " + std::to_string(mb));
      expect_valid_layout(parallel::Zero1Layout(*store, world, mb), *store);
    }
}

// ---- when each strategy starts its collectives -----------------------------------------

// A one-rank communicator that records every collective (gradient element range) and when it
// was started (the number of gradient-ready events seen so far).
class RecordingComm : public parallel::Communicator {
 public:
  RecordingComm(const ParamStore& store) : Communicator(Device::cpu(), 0, 1), store_(store) {}
  parallel::Backend backend() const override { return parallel::Backend::MPI; }
  struct Call {
    std::string op;
    int64_t begin, end;  // element range in the flat gradient buffer (or parameter buffer)
    int at;              // ready events seen when it started
  };
  std::vector<Call> calls;
  int ready_events = 0;

  parallel::WorkPtr all_reduce_async(Tensor& t, parallel::ReduceOp) override { return record("all_reduce", t); }
  parallel::WorkPtr broadcast_async(Tensor& t, int) override { return record("broadcast", t); }
  parallel::WorkPtr reduce_async(Tensor& t, int, parallel::ReduceOp) override { return record("reduce", t); }
  parallel::WorkPtr reduce_scatter_async(const Tensor& s, Tensor&, parallel::ReduceOp) override {
    return record("reduce_scatter", s);
  }
  parallel::WorkPtr all_gather_async(const Tensor&, Tensor& r) override { return record("all_gather", r); }
  void barrier() override {}
  void synchronize() override {}

 private:
  struct Done : parallel::Work {
    void wait() override {}
    bool test() override { return true; }
    void synchronize() override {}
  };
  parallel::WorkPtr record(const char* op, const Tensor& t) {
    const bool grads = op != std::string("broadcast");
    const float* base = (grads ? store_.flat_grads() : store_.flat_params()).data_as<float>();
    const int64_t b = t.data_as<float>() - base;
    calls.push_back({op, b, b + t.numel(), ready_events});
    return std::make_unique<Done>();
  }
  const ParamStore& store_;
};

// Counts ready events before forwarding them to the strategy.
class CountingListener : public GradReadyListener {
 public:
  explicit CountingListener(RecordingComm& c) : comm_(c) {}
  void on_grad_ready(Parameter&) override { ++comm_.ready_events; }  // added after the sync: told first

 private:
  RecordingComm& comm_;
};

std::vector<RecordingComm::Call> record_step(const std::string& ddp, double mb, bool zero1 = false) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  RecordingComm comm(*store);
  auto sync = zero1 ? parallel::make_zero1_sync(ddp, ctx, *store, comm, mb) : parallel::make_grad_sync(ddp, ctx, *store, &comm, mb);
  CountingListener counting(comm);
  store->add_listener(&counting);
  comm.calls.clear();  // the construction-time broadcast is checked elsewhere
  store->zero_grad(ctx);
  sync->begin_step(ctx);
  fake_backward(*store);
  comm.ready_events = 99;  // marks collectives started by finish()
  sync->finish(ctx);
  return comm.calls;
}

// Gradient element ranges: embed [0,32) tied [32,50) block.w [50,1050) block.b [1050,1075)
// unused [1075,1078) head [1078,1155). Ready events: head 1, block.b 2, block.w 3, tied 4, embed 5.
TEST(GradSyncSchedule, NaiveAndFlatStartOnlyInFinish) {
  auto naive = record_step("naive", 0);
  ASSERT_EQ(naive.size(), 6u);
  const std::vector<std::pair<int64_t, int64_t>> per_param = {
      {1078, 1155}, {1075, 1078}, {1050, 1075}, {50, 1050}, {32, 50}, {0, 32}};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(naive[i].at, 99);
    EXPECT_EQ(std::make_pair(naive[i].begin, naive[i].end), per_param[i]);
  }
  auto flat = record_step("flat", 0);
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].at, 99);
  EXPECT_EQ(flat[0].begin, 0);
  EXPECT_EQ(flat[0].end, 1155);
}

TEST(GradSyncSchedule, OverlapStartsEachParameterWhenReady) {
  auto calls = record_step("overlap", 0);
  ASSERT_EQ(calls.size(), 6u);
  // head at 1st event, block.b 2nd, block.w 3rd, tied only after its 2nd use (4th), embed 5th;
  // "unused" never became ready: finish() starts it.
  const std::vector<std::tuple<int64_t, int64_t, int>> want = {
      {1078, 1155, 1}, {1050, 1075, 2}, {50, 1050, 3}, {32, 50, 4}, {0, 32, 5}, {1075, 1078, 99}};
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(std::make_tuple(calls[i].begin, calls[i].end, calls[i].at), want[i]) << i;
}

TEST(GradSyncSchedule, BucketedStartsABucketWhenItsLastParameterIsReady) {
  auto calls = record_step("bucketed", 0.0003);
  ASSERT_EQ(calls.size(), 4u);
  // Buckets {head} {unused, block.b} {block.w} {tied, embed}: the second waits for "unused",
  // which never comes, so finish() starts it.
  const std::vector<std::tuple<int64_t, int64_t, int>> want = {
      {1078, 1155, 1}, {50, 1050, 3}, {0, 50, 5}, {1050, 1078, 99}};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(std::make_tuple(calls[i].begin, calls[i].end, calls[i].at), want[i]) << i;
}

// One rank: the layout's buckets are plan_buckets' (no boundary moves).
TEST(GradSyncSchedule, Zero1BucketedScattersABucketWhenReadyAndFlatScattersInFinish) {
  auto calls = record_step("bucketed", 0.0003, true);
  ASSERT_EQ(calls.size(), 4u);
  const std::vector<std::tuple<int64_t, int64_t, int>> want = {
      {1078, 1155, 1}, {50, 1050, 3}, {0, 50, 5}, {1050, 1078, 99}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(calls[i].op, "reduce_scatter");
    EXPECT_EQ(std::make_tuple(calls[i].begin, calls[i].end, calls[i].at), want[i]) << i;
  }
  auto flat = record_step("flat", 0, true);
  ASSERT_EQ(flat.size(), 1u);  // one rank: no tail
  EXPECT_EQ(flat[0].op, "reduce_scatter");
  EXPECT_EQ(flat[0].at, 99);
  EXPECT_THROW(record_step("ring", 0, true), Error);
}

TEST(GradSyncSchedule, EveryStrategyBroadcastsAllParametersAtConstruction) {
  for (const std::string ddp : {"naive", "flat", "overlap", "bucketed"}) {
    Context ctx(Device::cpu());
    auto store = make_store(ctx);
    RecordingComm comm(*store);
    auto sync = parallel::make_grad_sync(ddp, ctx, *store, &comm, 1);
    ASSERT_EQ(comm.calls.size(), 1u) << ddp;
    EXPECT_EQ(comm.calls[0].op, "broadcast");
    EXPECT_EQ(comm.calls[0].begin, 0);
    EXPECT_EQ(comm.calls[0].end, store->numel()) << "frozen parameters too";
  }
}

}  // namespace
}  // namespace pt::test

namespace pt::test {
namespace {

TEST(DdpOptions, ResolveAutoAndRejectContradictions) {
  parallel::DdpOptions o;
  EXPECT_EQ(parallel::resolve_ddp_options(o, 2).ddp, "bucketed");
  EXPECT_EQ(parallel::resolve_ddp_options(o, 1).ddp, "none");
  o.shard = "zero1";
  EXPECT_EQ(parallel::resolve_ddp_options(o, 1).shard, "none") << "one rank has nothing to shard";
  EXPECT_EQ(parallel::resolve_ddp_options(o, 4).shard, "zero1");
  o.ddp = "none";
  EXPECT_THROW(parallel::resolve_ddp_options(o, 2), Error);
  o = parallel::DdpOptions();
  o.ddp = "ring";
  EXPECT_THROW(parallel::resolve_ddp_options(o, 2), Error);
  o = parallel::DdpOptions();
  o.bucket_mb = -1;
  EXPECT_THROW(parallel::resolve_ddp_options(o, 2), Error);
  o = parallel::DdpOptions();
  o.shard = "zero3";
  EXPECT_THROW(parallel::resolve_ddp_options(o, 2), Error);
  for (const char* bad : {"-1", "16x", "", "many", "1e3"}) {
    o = parallel::DdpOptions();
    o.comm_sms = bad;
    EXPECT_THROW(parallel::resolve_ddp_options(o, 2), Error) << "--comm-sms '" << bad << "'";
  }
}

TEST(DdpOptions, GradCommIsFp32OrBf16AndFp32WhenNothingIsCommunicated) {
  parallel::DdpOptions o;
  EXPECT_EQ(o.grad_comm, "fp32");
  o.grad_comm = "bf16";
  EXPECT_EQ(parallel::resolve_ddp_options(o, 2).grad_comm, "bf16");
  EXPECT_EQ(parallel::resolve_ddp_options(o, 1).grad_comm, "fp32") << "one rank: accepted, no effect";
  o.ddp = "none";
  EXPECT_EQ(parallel::resolve_ddp_options(o, 2).grad_comm, "fp32") << "--ddp none: accepted, no effect";
  for (const char* bad : {"fp16", "BF16", "", "bfloat16"}) {
    o = parallel::DdpOptions();
    o.grad_comm = bad;
    const std::string msg = error_of([&] { parallel::resolve_ddp_options(o, 2); });
    EXPECT_NE(msg.find("--grad-comm"), std::string::npos) << "'" << bad << "': " << msg;
    EXPECT_NE(msg.find("fp32 or bf16"), std::string::npos) << msg;
  }
  EXPECT_EQ(parallel::grad_comm_from_name("bf16"), parallel::GradComm::BF16);
  EXPECT_STREQ(parallel::grad_comm_name(parallel::GradComm::FP32), "fp32");
}

TEST(DdpOptions, CommSmsAutoIsSixteenOnAGpuAndNothingOnTheCpu) {
  EXPECT_EQ(parallel::parse_comm_sms("auto"), parallel::kCommSmsAuto);
  EXPECT_EQ(parallel::parse_comm_sms("0"), 0);
  EXPECT_EQ(parallel::parse_comm_sms("24"), 24);
  Context cpu(Device::cpu());
  EXPECT_EQ(parallel::auto_comm_sms(cpu), 0);
  EXPECT_EQ(cpu.sm_count(), 0);
  cpu.reserve_sms(8);  // nothing to reserve on the CPU
  EXPECT_EQ(cpu.reserved_sms(), 0);
  if (cuda_device_count() > 0) {
    Context gpu(Device::cuda(0));
    EXPECT_EQ(parallel::auto_comm_sms(gpu), std::min(16, gpu.sm_count() / 4));
  }
}

}  // namespace
}  // namespace pt::test
