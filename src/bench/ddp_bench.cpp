#include "bench/ddp_bench.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "core/timing.h"
#include "parallel/grad_sync.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"
#include "parallel/zero1.h"

namespace pt::bench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The points of a step the bench times, on the compute stream (indices of its StreamClock's
// marks), read after the step has been waited for.
enum StepMark { kStart, kBackwardEnd, kSyncEnd, kEnd, kStepMarks };

double bucket_mb_of(const DdpConfig& c) { return std::isnan(c.bucket_mb) ? parallel::kDefaultBucketMB : c.bucket_mb; }

// The bucket plan of a configuration's gradient sync (empty unless bucketed: zero1's layout
// with overlap or bucketed; one bucket is "all gradients").
std::vector<parallel::Bucket> bucket_plan(const ParamStore& store, const DdpConfig& c, int world) {
  if (c.shard == ShardMode::Zero1 && c.ddp->overlapped)
    return parallel::zero1_layout(*c.ddp, store, world, bucket_mb_of(c))->buckets;
  if (c.ddp->buckets != parallel::BucketPolicy::Capped || c.shard == ShardMode::Zero1) return {};
  return parallel::plan_buckets(store, bucket_mb_of(c));
}

// Gradient collectives per step: none 0, flat 1, naive and overlap one per trainable
// parameter, bucketed its plan's count; zero1 one reduce-scatter per bucket of its layout
// (one with flat) and an all-reduce of the tail if it has one.
int64_t bucket_count(const ParamStore& store, const DdpConfig& c, int world) {
  using parallel::BucketPolicy;
  const BucketPolicy policy = c.ddp->buckets;
  if (policy == BucketPolicy::None) return 0;
  if (c.shard == ShardMode::Zero1) {
    const auto layout = parallel::zero1_layout(*c.ddp, store, world, bucket_mb_of(c));
    return static_cast<int64_t>(layout->buckets.size()) + (layout->tail_begin < layout->numel ? 1 : 0);
  }
  if (policy == BucketPolicy::One) return 1;
  if (policy == BucketPolicy::Capped) return static_cast<int64_t>(bucket_plan(store, c, world).size());
  int64_t n = 0;
  for (const auto& p : store.params()) n += p->trainable ? 1 : 0;
  return n;
}

// Every rank's events on rank 0 (empty elsewhere). Collective.
std::vector<std::vector<TimelineEvent>> gather_events(const std::vector<TimelineEvent>& mine) {
  std::vector<double> numbers;  // (compute 0 | comm 1, start, end) per event
  std::vector<std::string> names;
  for (const auto& e : mine) {
    numbers.insert(numbers.end(), {e.stream == "comm" ? 1.0 : 0.0, e.start_ms, e.end_ms});
    names.push_back(e.name);
  }
  const auto all_numbers = parallel::gather_to_root(numbers);
  const auto all_names = parallel::gather_to_root(names);
  std::vector<std::vector<TimelineEvent>> out(all_numbers.size());
  for (size_t r = 0; r < out.size(); ++r) {
    PT_CHECK(all_numbers[r].size() == 3 * all_names[r].size(),
             "bench ddp: rank " + std::to_string(r) + "'s timeline arrived garbled");
    for (size_t i = 0; i < all_names[r].size(); ++i) {
      const double* v = &all_numbers[r][3 * i];
      out[r].push_back({v[0] == 1.0 ? "comm" : "compute", all_names[r][i], v[1], v[2]});
    }
  }
  return out;
}

Tensor random_tokens(const DdpBenchSetup& s, std::mt19937_64& rng, const char* name) {
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(s.model.vocab_size - 1));
  Tensor t = Tensor::empty({s.batch, s.context}, DType::I32, Device::cpu(), name);
  for (int64_t i = 0; i < s.batch * s.context; ++i) t.data_as<int32_t>()[i] = tok(rng);
  return t;
}

}  // namespace

std::vector<DdpConfig> ddp_configs(const DdpSweep& s) {
  using parallel::BucketPolicy;
  const parallel::StrategySpec* flat = &parallel::strategy("flat");
  const parallel::StrategySpec* bucketed = &parallel::strategy("bucketed");
  std::vector<DdpConfig> out;
  for (const auto* d : s.ddps)  // the floor
    if (d->buckets == BucketPolicy::None)
      out.push_back({d, kNaN, ShardMode::None, s.comm_sms.front(), s.engines.front(), parallel::GradComm::FP32});
  for (parallel::CommEngine engine : s.engines)
    for (int sms : s.comm_sms) {
      for (parallel::GradComm gc : s.grad_comms) {
        for (const auto* d : s.ddps) {
          if (d->buckets == BucketPolicy::Capped)
            for (double mb : s.buckets) out.push_back({d, mb, ShardMode::None, sms, engine, gc});
          else if (d->buckets != BucketPolicy::None)
            out.push_back({d, kNaN, ShardMode::None, sms, engine, gc});
        }
        for (ShardMode m : s.shards) {
          if (m == ShardMode::Broadcast) out.push_back({bucketed, parallel::kDefaultBucketMB, m, sms, engine, gc});
          if (m == ShardMode::Zero1)
            for (bool prefetch : s.prefetches) {
              out.push_back({flat, kNaN, m, sms, engine, gc, prefetch});  // one reduce-scatter after backward
              // reduce-scatters overlapped with backward
              out.push_back({bucketed, parallel::kDefaultBucketMB, m, sms, engine, gc, prefetch});
            }
        }
      }
    }
  return out;
}

DdpBench::DdpBench(Context& ctx, const DdpBenchSetup& setup)
    : ctx_(ctx),
      setup_(setup),
      comm_(parallel::make_communicator(parallel::backend_for(ctx.device()), ctx, setup.comm_sms, setup.engine)),
      comm_sms_(setup.comm_sms),
      engine_(setup.engine),
      model_(setup.model, ctx) {
  model_.init_weights(ctx, setup.seed);
  // Each rank its own batch (as in data-parallel training); the same one every step.
  std::mt19937_64 rng(setup.seed + 1000 * static_cast<uint64_t>(parallel::Runtime::get().rank()));
  host_ids_ = random_tokens(setup, rng, "ids");
  host_targets_ = random_tokens(setup, rng, "targets");
  ids_ = host_ids_.to(ctx.device(), ctx);
  targets_ = host_targets_.to(ctx.device(), ctx);
}

DdpBench::~DdpBench() = default;

void DdpBench::use_communicator(int comm_sms, parallel::CommEngine engine) {
  if (comm_sms == comm_sms_ && engine == engine_) return;
  comm_.reset();  // NCCL's resources go before the next communicator's come
  comm_ = parallel::make_communicator(parallel::backend_for(ctx_.device()), ctx_, comm_sms, engine);
  comm_sms_ = comm_sms;
  engine_ = engine;
}

// Forward and backward of the step's micro-batches (the same rows each time: only the cost
// matters here); gradients are final, and the strategy's collectives start, in the last one.
void DdpBench::forward_backward() {
  for (int i = 0; i < setup_.micro_batches; ++i) {
    model_.forward(ctx_, ids_, targets_, true, 1.0f / static_cast<float>(setup_.micro_batches));
    model_.backward(ctx_);
  }
}

DdpResult DdpBench::run(const DdpConfig& c) {
  use_communicator(c.comm_sms,
                   comm_engine_for(c.engine, *c.ddp, c.shard, gradients_in_bf16(ctx_.grad_dtype(), c.grad_comm),
                                   parallel::Runtime::get().world_size()));
  auto& alloc = TrackingAllocator::instance();
  const DeviceKind kind = ctx_.device().kind;
  ParamStore& store = model_.store();
  const OptimizerConfig& opt_cfg = setup_.optimizer;
  DdpResult r;
  r.cfg = c;
  comm().barrier();
  alloc.reset_peak(kind);
  DataParallel dp = make_data_parallel(ctx_, store, &comm(), *c.ddp, bucket_mb_of(c), c.shard, opt_cfg, c.grad_comm,
                                       c.zero1_prefetch);
  r.sync_name = dp.sync->name();
  r.comm_sms = comm().reserved_sms();
  r.comm_engine = comm().engine();
  r.buckets = bucket_count(store, c, comm().world_size());
  const MemoryStats at_init = alloc.stats(kind);
  r.init = mem_point(at_init.in_use, at_init.in_use_by_category);

  StreamClock marks(ctx_, kStepMarks);
  std::vector<double> step_ms, exposed_ms, host_ms;
  int64_t bytes = 0;
  for (int s = 0; s < setup_.warmup + setup_.steps; ++s) {
    const bool first = s == 0, timed = s >= setup_.warmup;
    if (s == setup_.warmup) alloc.reset_peak(kind);
    if (first) alloc.reset_peak(kind);
    store.zero_grad(ctx_, setup_.micro_batches);
    dp.sync->begin_step(ctx_);
    marks.reset();
    const auto queued_from = std::chrono::steady_clock::now();
    marks.mark();  // kStart
    forward_backward();
    marks.mark();  // kBackwardEnd
    dp.sync->finish(ctx_);
    marks.mark();  // kSyncEnd
    if (first) {
      const MemoryStats m = alloc.stats(kind);
      r.before_step = mem_point(m.peak, m.at_peak_by_category);
      alloc.reset_peak(kind);
    }
    dp.optimizer->step(ctx_, opt_cfg.adamw.lr);
    marks.mark();  // kEnd
    const double queued_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - queued_from).count();
    // A stuck collective must time out here rather than hang the compute-stream wait. Not
    // for parameters still in flight (zero1's prefetched gathers): the next step's forward
    // waits for them, and its time must include what they cost.
    if (!dp.optimizer->parameters_in_flight()) comm().synchronize();
    ctx_.synchronize();
    if (first) {
      const MemoryStats m = alloc.stats(kind);
      r.during_step = mem_point(m.peak, m.at_peak_by_category);
    }
    if (timed) {
      step_ms.push_back(marks.elapsed_ms(kStart, kEnd));
      exposed_ms.push_back(marks.elapsed_ms(kBackwardEnd, kSyncEnd));
      host_ms.push_back(queued_ms);
      bytes = dp.sync->bytes_communicated();
    }
  }
  bytes += dp.optimizer->parameter_bytes_communicated();  // a sharded optimizer's broadcasts or gathers

  const auto step = parallel::spread_over_ranks(summarize(step_ms).mean);
  r.step_ms = step.mean;
  r.step_ms_max_rank = step.max;
  r.rank_spread_pct = (step.max / step.min - 1.0) * 100.0;
  r.step_sd = parallel::spread_over_ranks(summarize(step_ms).sd).max;
  // A faster rank's wait for a slower one's backward is not communication: the slowest rank's
  // wait (the least of any rank's) is what the collectives leave unhidden.
  r.exposed_ms = parallel::spread_over_ranks(summarize(exposed_ms).mean).min;
  r.host_ms = parallel::spread_over_ranks(summarize(host_ms).mean).max;
  r.comm_bytes = static_cast<double>(bytes);
  r.peak = parallel::spread_over_ranks(static_cast<double>(alloc.stats(kind).peak)).max;

  r.traced_step = setup_.warmup + setup_.steps;
  r.events = gather_events(traced_step(dp, c));
  return r;
}

// One more step, untimed, with the timeline recorder attached (its event records and
// per-gradient stamps stay out of the timed steps). Ranks start it together after a barrier.
std::vector<TimelineEvent> DdpBench::traced_step(DataParallel& dp, const DdpConfig& c) {
  ParamStore& store = model_.store();
  const int micro_batches = setup_.micro_batches;
  StepTimeline timeline(ctx_, store, comm(), bucket_plan(store, c, comm().world_size()));
  store.zero_grad(ctx_, micro_batches);
  dp.sync->begin_step(ctx_);
  comm().barrier();
  timeline.begin();
  for (int i = 0; i < micro_batches; ++i) {
    model_.forward(ctx_, ids_, targets_, true, 1.0f / static_cast<float>(micro_batches));
    if (i == micro_batches - 1) timeline.mark(StepTimeline::ForwardEnd);  // the last micro-batch's
    model_.backward(ctx_);
  }
  timeline.mark(StepTimeline::BackwardEnd);
  dp.sync->finish(ctx_);
  timeline.mark(StepTimeline::SyncEnd);
  dp.optimizer->step(ctx_, setup_.optimizer.adamw.lr);
  timeline.mark(StepTimeline::End);
  comm().synchronize();
  ctx_.synchronize();
  return timeline.finish();
}

}  // namespace pt::bench
