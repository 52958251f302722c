// When each strategy starts its collectives, seen by a recording communicator as a fake
// backward reports gradients (grad_sync_fixture.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/grad_sync.h"
#include "parallel/strategies.h"
#include "parallel/zero1.h"

#include "parallel/grad_sync_fixture.h"

namespace pt::test {
namespace {

using namespace grad_sync_fixture;

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
  auto sync = zero1 ? parallel::make_zero1_sync(parallel::strategy(ddp), ctx, *store, comm, mb)
                    : parallel::make_grad_sync(parallel::strategy(ddp), ctx, *store, &comm, mb);
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
  const std::vector<std::pair<int64_t, int64_t>> per_param = {{1078, 1155}, {1075, 1078}, {1050, 1075},
                                                              {50, 1050},   {32, 50},     {0, 32}};
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
  const std::vector<std::tuple<int64_t, int64_t, int>> want = {{1078, 1155, 1}, {1050, 1075, 2}, {50, 1050, 3},
                                                               {32, 50, 4},     {0, 32, 5},      {1075, 1078, 99}};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(std::make_tuple(calls[i].begin, calls[i].end, calls[i].at), want[i]) << i;
}

TEST(GradSyncSchedule, BucketedStartsABucketWhenItsLastParameterIsReady) {
  auto calls = record_step("bucketed", 0.0003);
  ASSERT_EQ(calls.size(), 4u);
  // Buckets {head} {unused, block.b} {block.w} {tied, embed}: the second waits for "unused",
  // which never comes, so finish() starts it.
  const std::vector<std::tuple<int64_t, int64_t, int>> want = {
      {1078, 1155, 1}, {50, 1050, 3}, {0, 50, 5}, {1050, 1078, 99}};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(std::make_tuple(calls[i].begin, calls[i].end, calls[i].at), want[i]) << i;
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
    auto sync = parallel::make_grad_sync(parallel::strategy(ddp), ctx, *store, &comm, 1);
    ASSERT_EQ(comm.calls.size(), 1u) << ddp;
    EXPECT_EQ(comm.calls[0].op, "broadcast");
    EXPECT_EQ(comm.calls[0].begin, 0);
    EXPECT_EQ(comm.calls[0].end, store->numel()) << "frozen parameters too";
  }
}

}  // namespace
}  // namespace pt::test
