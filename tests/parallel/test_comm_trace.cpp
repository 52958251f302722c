// The collective trace (dist/comm_trace.h), the gather of per-rank records to rank 0
// (dist/host_collectives.h), and bench ddp's step timeline built from both
// (bench/ddp_timeline.h) on a hand-built ParamStore and a fake backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "bench/ddp_timeline.h"
#include "common/test_util.h"
#include "core/error.h"
#include "parallel/comm_trace.h"
#include "parallel/communicator.h"
#include "parallel/dist_util.h"
#include "parallel/grad_sync.h"
#include "parallel/host_collectives.h"
#include "parallel/strategies.h"

namespace pt::test {
namespace {

using parallel::ReduceOp;

// Seconds between two marks of a traced collective: CUDA events or host clock.
double span_ms(Context& ctx, const parallel::TracedCollective& c) {
  if (!ctx.is_cuda()) {
    EXPECT_TRUE(c.host_done) << c.op << ": completion was never seen";
    return std::chrono::duration<double, std::milli>(c.host_end - c.host_start).count();
  }
  float ms = -1;
  PT_CUDA_CHECK(cudaEventElapsedTime(&ms, c.start, c.end));
  return ms;
}

class TraceTest : public BackendTest {};

TEST_P(TraceTest, RecordsEveryCollectiveWithItsBufferAndRootAndNothingAfterDetach) {
  const int64_t n = 1000;
  const int w = world();
  Tensor a = device_f32(ctx(), std::vector<double>(n, rank() + 1.0));
  Tensor b = device_f32(ctx(), std::vector<double>(n, 2.0));
  Tensor big = device_f32(ctx(), std::vector<double>(n * w, 1.0));
  Tensor small = device_f32(ctx(), std::vector<double>(n, 0.0));
  Tensor gathered = device_f32(ctx(), std::vector<double>(n * w, 0.0));

  parallel::CommTrace trace;
  comm().set_trace(&trace);
  EXPECT_EQ(comm().trace(), &trace);
  std::vector<parallel::WorkPtr> works;
  works.push_back(comm().all_reduce_async(a, ReduceOp::Sum));
  works.push_back(comm().broadcast_async(b, w - 1));
  works.push_back(comm().reduce_async(b, 0, ReduceOp::Average));
  works.push_back(comm().reduce_scatter_async(big, small, ReduceOp::Sum));
  works.push_back(comm().all_gather_async(small, gathered));
  for (auto& wk : works) wk->wait();
  comm().synchronize();
  ctx().synchronize();
  comm().set_trace(nullptr);
  comm().all_reduce(a, ReduceOp::Sum);  // untraced
  ctx().synchronize();

  const auto& e = trace.entries();
  ASSERT_EQ(e.size(), 5u);
  const std::vector<std::string> ops = {"all_reduce", "broadcast", "reduce", "reduce_scatter", "all_gather"};
  const std::vector<const void*> buffers = {a.data(), b.data(), b.data(), big.data(), gathered.data()};
  const std::vector<int64_t> bytes = {4 * n, 4 * n, 4 * n, 4 * n * w, 4 * n * w};
  const std::vector<int> roots = {-1, w - 1, 0, -1, -1};
  for (size_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(e[i].op, ops[i]);
    EXPECT_EQ(e[i].buffer, buffers[i]) << ops[i];
    EXPECT_EQ(e[i].bytes, bytes[i]) << ops[i];
    EXPECT_EQ(e[i].root, roots[i]) << ops[i];
    EXPECT_GE(span_ms(ctx(), e[i]), 0.0) << ops[i];
    EXPECT_EQ(ctx().is_cuda(), e[i].start != nullptr && e[i].end != nullptr) << ops[i];
  }
  // The trace leaves the results alone: a = sum over ranks of (r + 1), then summed again.
  const double once = w * (w + 1) / 2.0;
  EXPECT_EQ(host_f64(ctx(), a), std::vector<double>(n, once * w));
  // On one stream, a traced collective starts only after the previous one ended.
  if (ctx().is_cuda())
    for (size_t i = 1; i < e.size(); ++i) {
      float gap = -1;
      PT_CUDA_CHECK(cudaEventElapsedTime(&gap, e[i - 1].end, e[i].start));
      EXPECT_GE(gap, 0.0f) << ops[i];
    }
  trace.clear();
  EXPECT_TRUE(trace.entries().empty());
}
PT_INSTANTIATE_BACKENDS(TraceTest);

TEST(GatherToRoot, EveryRanksListOfItsOwnLengthInRankOrderOnRankZeroOnly) {
  const int r = parallel::Runtime::get().rank(), w = parallel::Runtime::get().world_size();
  std::vector<double> numbers;
  std::vector<std::string> names;
  for (int i = 0; i < r + 1; ++i) {
    numbers.push_back(100.0 * r + i + 0.25);
    names.push_back(i == 0 ? "" : "rank " + std::to_string(r) + " item " + std::to_string(i));
  }
  if (r == 1) {
    numbers.clear();  // a rank with nothing to say
    names.clear();
  }
  const auto all_numbers = parallel::gather_to_root(numbers);
  const auto all_names = parallel::gather_to_root(names);
  if (r != 0) {
    EXPECT_TRUE(all_numbers.empty());
    EXPECT_TRUE(all_names.empty());
    return;
  }
  ASSERT_EQ(all_numbers.size(), static_cast<size_t>(w));
  ASSERT_EQ(all_names.size(), static_cast<size_t>(w));
  for (int q = 0; q < w; ++q) {
    const size_t len = q == 1 ? 0 : static_cast<size_t>(q + 1);
    ASSERT_EQ(all_numbers[q].size(), len) << "rank " << q;
    ASSERT_EQ(all_names[q].size(), len) << "rank " << q;
    for (size_t i = 0; i < len; ++i) {
      EXPECT_EQ(all_numbers[q][i], 100.0 * q + static_cast<double>(i) + 0.25);
      EXPECT_EQ(all_names[q][i], i == 0 ? "" : "rank " + std::to_string(q) + " item " + std::to_string(i));
    }
  }
}

TEST(GatherToRoot, RejectsStringsWithNul) {
  // Checked before any communication, so one rank may throw alone.
  EXPECT_THROW(parallel::gather_to_root(std::vector<std::string>{std::string("a\0b", 3)}), Error);
}

// ---- the step timeline -----------------------------------------------------------------

// Registration order as a Transformer's: embedding, two layers, head.
std::unique_ptr<ParamStore> layered_store(Context& ctx) {
  auto store = std::make_unique<ParamStore>();
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{{"embed.weight", {16, 8}},
                                                                              {"layers.0.w", {8, 8}},
                                                                              {"layers.0.norm", {8}},
                                                                              {"layers.1.w", {8, 8}},
                                                                              {"layers.1.norm", {8}},
                                                                              {"head.weight", {16, 8}}}) {
    store->add_use(store->add(name, shape));
  }
  store->finalize(ctx, false);
  return store;
}

struct TimelineCase {
  parallel::Backend backend;
  std::string ddp;
  double bucket_mb;
  parallel::GradComm grad_comm = parallel::GradComm::FP32;
};
void PrintTo(const TimelineCase& c, std::ostream* os) {
  *os << parallel::backend_name(c.backend) << " " << c.ddp << " bucket_mb " << c.bucket_mb << " grad_comm "
      << parallel::grad_comm_name(c.grad_comm);
}
std::string timeline_case_name(const ::testing::TestParamInfo<TimelineCase>& info) {
  const auto& c = info.param;
  return std::string(parallel::backend_name(c.backend)) + "_" + c.ddp + (c.ddp == "bucketed" ? "_mixed" : "") +
         (c.grad_comm == parallel::GradComm::BF16 ? "_bf16" : "");
}

class TimelineTest : public ::testing::TestWithParam<TimelineCase> {
 protected:
  void SetUp() override {
    PT_REQUIRE_BACKEND(GetParam().backend);
    ASSERT_GE(parallel::Runtime::get().world_size(), 2) << "run the dist suite under mpiexec -n 2 (or more)";
  }
  Context& ctx() { return backend_context(GetParam().backend); }
  parallel::Communicator& comm() { return backend_comm(GetParam().backend); }
};

TEST_P(TimelineTest, PhasesInOrderBackwardPerModuleOneCommEventPerCollective) {
  const auto& c = GetParam();
  auto store = layered_store(ctx());
  auto sync = parallel::make_grad_sync(parallel::strategy(c.ddp), ctx(), *store, &comm(), c.bucket_mb, c.grad_comm);
  const auto plan = c.ddp == "bucketed" ? parallel::plan_buckets(*store, c.bucket_mb) : std::vector<parallel::Bucket>{};
  const int r = parallel::Runtime::get().rank(), w = parallel::Runtime::get().world_size();
  const int64_t g = store->grad_numel();
  Tensor work = Tensor::empty({1 << 22}, DType::F32, ctx().device(), "optimizer stand-in");
  std::vector<bench::TimelineEvent> events;
  {
    bench::StepTimeline timeline(ctx(), *store, comm(), plan);
    store->zero_grad(ctx());
    sync->begin_step(ctx());
    const std::vector<float> mine(static_cast<size_t>(g), static_cast<float>(r + 1));
    copy_bytes(ctx(), store->flat_grads().data(), ctx().device().kind, mine.data(), DeviceKind::CPU, g * 4);
    comm().barrier();
    timeline.begin();
    ASSERT_FALSE(store->listeners().empty());
    EXPECT_EQ(store->listeners().back(), &timeline);
    timeline.mark(bench::StepTimeline::ForwardEnd);
    for (int i = static_cast<int>(store->size()) - 1; i >= 0; --i) store->grad_contributed((*store)[i]);
    timeline.mark(bench::StepTimeline::BackwardEnd);
    sync->finish(ctx());
    timeline.mark(bench::StepTimeline::SyncEnd);
    fill_zero(ctx(), work.data(), ctx().device().kind, work.nbytes());  // the optimizer's time
    timeline.mark(bench::StepTimeline::End);
    comm().synchronize();
    ctx().synchronize();
    events = timeline.finish();
    EXPECT_EQ(store->listeners(),
              c.ddp == "none" ? std::vector<GradReadyListener*>{} : std::vector<GradReadyListener*>{sync.get()})
        << "finish() takes the timeline off, the sync stays";
    EXPECT_EQ(comm().trace(), nullptr);
  }
  // The gradients were still averaged: the timeline passes every gradient on. (In bf16 too:
  // r + 1 and their sum are small integers, exact in bf16.)
  const double want_grad = c.ddp == "none" ? r + 1.0 : (w + 1) / 2.0;
  EXPECT_EQ(host_f64(ctx(), store->flat_grads()), std::vector<double>(static_cast<size_t>(g), want_grad));

  std::vector<std::string> compute, comm_names;
  double last_end = 0;
  for (const auto& e : events) {
    EXPECT_LE(e.start_ms, e.end_ms) << e.name;
    EXPECT_GE(e.start_ms, 0.0) << e.name;
    if (e.stream == "compute") {
      EXPECT_GE(e.start_ms, last_end - 1e-9) << e.name << ": compute events do not overlap";
      last_end = e.end_ms;
      compute.push_back(e.name);
    } else {
      ASSERT_EQ(e.stream, "comm");
      comm_names.push_back(e.name);
    }
  }
  // Backward per module in the order backward finished them (the rest may join the last).
  ASSERT_GE(compute.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(compute.begin(), compute.begin() + 5),
            (std::vector<std::string>{"forward", "backward head", "backward layers.1", "backward layers.0",
                                      "backward embed"}));
  EXPECT_EQ(compute.back(), "optimizer");

  std::vector<std::string> want;
  if (c.ddp == "naive" || c.ddp == "overlap") {
    for (int i = static_cast<int>(store->size()) - 1; i >= 0; --i) want.push_back("all-reduce " + (*store)[i].name);
  } else if (c.ddp == "flat") {
    want.push_back("all-reduce all gradients");
  } else {
    for (size_t b = 0; b < plan.size(); ++b) want.push_back("all-reduce bucket " + std::to_string(b));
  }
  // A collective on a bf16 copy is named after the gradients it carries, its type beside the size.
  const std::string open = c.grad_comm == parallel::GradComm::BF16 ? " (bf16, " : " (";
  ASSERT_EQ(comm_names.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(comm_names[i].rfind(want[i] + open, 0), 0u) << comm_names[i] << " vs " << want[i];
}

std::vector<TimelineCase> timeline_cases(parallel::Backend b) {
  // 0.0003 MiB = 78 floats: head (128) alone, the layers' pieces grouped, the embedding alone.
  const auto bf16 = parallel::GradComm::BF16;
  return {{b, "none", 0},          {b, "naive", 0},      {b, "flat", 0},          {b, "overlap", 0},
          {b, "bucketed", 0.0003}, {b, "flat", 0, bf16}, {b, "overlap", 0, bf16}, {b, "bucketed", 0.0003, bf16}};
}
INSTANTIATE_TEST_SUITE_P(Mpi, TimelineTest, ::testing::ValuesIn(timeline_cases(parallel::Backend::MPI)),
                         timeline_case_name);
INSTANTIATE_TEST_SUITE_P(Nccl, TimelineTest, ::testing::ValuesIn(timeline_cases(parallel::Backend::NCCL)),
                         timeline_case_name);

}  // namespace
}  // namespace pt::test
