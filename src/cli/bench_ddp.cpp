// `paratrain bench ddp`: the Transformer's training step under each gradient-sync strategy,
// bucket size, optimizer-sharding mode and gradient wire type (--grad-comm) on the same ranks:
// step time, the communication not hidden behind compute, bytes sent, memory (peak and its
// breakdown), and the per-rank timeline of one extra, untimed step (/ddp_events: what
// overlapped with what).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cli/bench_ddp_tables.h"
#include "cli/bench_sweep.h"
#include "cli/ddp_options.h"
#include "cli/ddp_timeline.h"
#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/allocator.h"
#include "core/context.h"
#include "core/error.h"
#include "core/timing.h"
#include "io/run_record.h"
#include "io/table.h"
#include "model/transformer.h"
#include "optim/sharded_optimizer.h"
#include "parallel/communicator.h"
#include "parallel/grad_sync.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"
#include "parallel/strategies.h"
#include "parallel/zero1.h"

namespace pt::cli {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The points of a step bench ddp times, on the compute stream (indices of its StreamClock's
// marks), read after the step has been waited for.
enum StepMark { kStart, kBackwardEnd, kSyncEnd, kEnd, kStepMarks };

double bucket_mb_of(const DdpConfig& c) { return std::isnan(c.bucket_mb) ? parallel::kDefaultBucketMB : c.bucket_mb; }

// The bucket plan of a configuration's gradient sync (empty unless bucketed: zero1's layout
// with overlap or bucketed; one bucket is "all gradients").
std::vector<parallel::Bucket> bucket_plan(const ParamStore& store, const DdpConfig& c, int world) {
  const parallel::StrategySpec& spec = parallel::strategy(c.ddp);
  if (c.shard == ShardMode::Zero1 && spec.overlapped)
    return parallel::zero1_layout(c.ddp, store, world, bucket_mb_of(c))->buckets;
  if (spec.buckets != parallel::BucketPolicy::Capped || c.shard == ShardMode::Zero1) return {};
  return parallel::plan_buckets(store, bucket_mb_of(c));
}

// Gradient collectives per step: none 0, flat 1, naive and overlap one per trainable
// parameter, bucketed its plan's count; zero1 one reduce-scatter per bucket of its layout
// (one with flat) and an all-reduce of the tail if it has one.
int64_t bucket_count(const ParamStore& store, const DdpConfig& c, int world) {
  using parallel::BucketPolicy;
  const BucketPolicy policy = parallel::strategy(c.ddp).buckets;
  if (policy == BucketPolicy::None) return 0;
  if (c.shard == ShardMode::Zero1) {
    const auto layout = parallel::zero1_layout(c.ddp, store, world, bucket_mb_of(c));
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

struct Bench {
  Context& ctx;
  parallel::Communicator* comm_ptr;  // the current --comm-sms value's communicator
  TransformerLM& model;
  Tensor ids, targets;
  OptimizerConfig opt_cfg;
  int warmup, steps;
  int micro_batches = 1;  // --grad-accum: the rows run this many times per step, synchronised once
  parallel::Communicator& comm() { return *comm_ptr; }

  // Forward and backward of the step's micro-batches (the same rows each time: only the cost
  // matters here); gradients are final, and the strategy's collectives start, in the last one.
  void forward_backward() {
    for (int i = 0; i < micro_batches; ++i) {
      model.forward(ctx, ids, targets, true, 1.0f / static_cast<float>(micro_batches));
      model.backward(ctx);
    }
  }

  DdpResult run(const DdpConfig& c) {
    auto& alloc = TrackingAllocator::instance();
    const DeviceKind kind = ctx.device().kind;
    ParamStore& store = model.store();
    DdpResult r;
    r.cfg = c;
    comm().barrier();
    alloc.reset_peak(kind);
    DataParallel dp = make_data_parallel(ctx, store, &comm(), c.ddp, bucket_mb_of(c), c.shard, opt_cfg, c.grad_comm,
                                         c.zero1_prefetch);
    r.sync_name = dp.sync->name();
    r.comm_sms = comm().reserved_sms();
    r.comm_engine = comm().engine();
    r.buckets = bucket_count(store, c, comm().world_size());
    const MemoryStats at_init = alloc.stats(kind);
    r.init = mem_point(at_init.in_use, at_init.in_use_by_category);

    StreamClock marks(ctx, kStepMarks);
    std::vector<double> step_ms, exposed_ms;
    int64_t bytes = 0;
    for (int s = 0; s < warmup + steps; ++s) {
      const bool first = s == 0, timed = s >= warmup;
      if (s == warmup) alloc.reset_peak(kind);
      if (first) alloc.reset_peak(kind);
      store.zero_grad(ctx, micro_batches);
      dp.sync->begin_step(ctx);
      marks.reset();
      marks.mark();  // kStart
      forward_backward();
      marks.mark();  // kBackwardEnd
      dp.sync->finish(ctx);
      marks.mark();  // kSyncEnd
      if (first) {
        const MemoryStats m = alloc.stats(kind);
        r.before_step = mem_point(m.peak, m.at_peak_by_category);
        alloc.reset_peak(kind);
      }
      dp.optimizer->step(ctx, opt_cfg.adamw.lr);
      marks.mark();  // kEnd
      // A stuck collective must time out here rather than hang the compute-stream wait. Not
      // for parameters still in flight (zero1's prefetched gathers): the next step's forward
      // waits for them, and its time must include what they cost.
      if (!dp.optimizer->parameters_in_flight()) comm().synchronize();
      ctx.synchronize();
      if (first) {
        const MemoryStats m = alloc.stats(kind);
        r.during_step = mem_point(m.peak, m.at_peak_by_category);
      }
      if (timed) {
        step_ms.push_back(marks.elapsed_ms(kStart, kEnd));
        exposed_ms.push_back(marks.elapsed_ms(kBackwardEnd, kSyncEnd));
        bytes = dp.sync->bytes_communicated();
      }
    }
    // The sharded optimizers move every trainable parameter once per step as well.
    if (c.shard != ShardMode::None) bytes += store.grad_numel() * static_cast<int64_t>(sizeof(float));

    const auto step = parallel::spread_over_ranks(summarize(step_ms).mean);
    r.step_ms = step.mean;
    r.step_ms_max_rank = step.max;
    r.step_sd = parallel::spread_over_ranks(summarize(step_ms).sd).max;
    r.exposed_ms = parallel::spread_over_ranks(summarize(exposed_ms).mean).mean;
    r.comm_bytes = static_cast<double>(bytes);
    r.peak = parallel::spread_over_ranks(static_cast<double>(alloc.stats(kind).peak)).max;

    r.traced_step = warmup + steps;
    r.events = gather_events(traced_step(dp, c));
    return r;
  }

  // One more step, untimed, with the timeline recorder attached (its event records and
  // per-gradient stamps stay out of the timed steps). Ranks start it together after a barrier.
  std::vector<TimelineEvent> traced_step(DataParallel& dp, const DdpConfig& c) {
    ParamStore& store = model.store();
    StepTimeline timeline(ctx, store, comm(), bucket_plan(store, c, comm().world_size()));
    store.zero_grad(ctx, micro_batches);
    dp.sync->begin_step(ctx);
    comm().barrier();
    timeline.begin();
    for (int i = 0; i < micro_batches; ++i) {
      model.forward(ctx, ids, targets, true, 1.0f / static_cast<float>(micro_batches));
      if (i == micro_batches - 1) timeline.mark(StepTimeline::ForwardEnd);  // the last micro-batch's
      model.backward(ctx);
    }
    timeline.mark(StepTimeline::BackwardEnd);
    dp.sync->finish(ctx);
    timeline.mark(StepTimeline::SyncEnd);
    dp.optimizer->step(ctx, opt_cfg.adamw.lr);
    timeline.mark(StepTimeline::End);
    comm().synchronize();
    ctx.synchronize();
    return timeline.finish();
  }
};

// Grouped by --comm-engine and --comm-sms value (one communicator each, made in turn), then by
// --grad-comm; the floor, which communicates nothing, runs once, first (in fp32: it has nothing to
// compress).
std::vector<DdpConfig> configs(const std::vector<std::string>& ddps, const std::vector<double>& buckets,
                               const std::vector<std::string>& shards, const std::vector<parallel::CommEngine>& engines,
                               const std::vector<int>& comm_sms, const std::vector<parallel::GradComm>& grad_comms,
                               const std::vector<bool>& prefetches) {
  using parallel::BucketPolicy;
  std::vector<DdpConfig> out;
  for (const auto& d : ddps)  // the floor
    if (parallel::strategy(d).buckets == BucketPolicy::None)
      out.push_back({d, kNaN, ShardMode::None, comm_sms.front(), engines.front(), parallel::GradComm::FP32});
  for (parallel::CommEngine engine : engines)
    for (int sms : comm_sms) {
      for (parallel::GradComm gc : grad_comms) {
        for (const auto& d : ddps) {
          const BucketPolicy policy = parallel::strategy(d).buckets;
          if (policy == BucketPolicy::Capped)
            for (double mb : buckets) out.push_back({d, mb, ShardMode::None, sms, engine, gc});
          else if (policy != BucketPolicy::None)
            out.push_back({d, kNaN, ShardMode::None, sms, engine, gc});
        }
        for (const auto& s : shards) {
          const ShardMode m = shard_mode_from_name(s);
          if (m == ShardMode::Broadcast) out.push_back({"bucketed", parallel::kDefaultBucketMB, m, sms, engine, gc});
          if (m == ShardMode::Zero1)
            for (bool prefetch : prefetches) {
              out.push_back({"flat", kNaN, m, sms, engine, gc, prefetch});  // one reduce-scatter after backward
              // reduce-scatters overlapped with backward
              out.push_back({"bucketed", parallel::kDefaultBucketMB, m, sms, engine, gc, prefetch});
            }
        }
      }
    }
  return out;
}

}  // namespace

int run_bench_ddp(const std::vector<std::string>& args) {
  RunOptions run;
  std::string size = "xl", attention = "naive", optimizer = "adamw";
  int64_t context = 512, batch = 4, d_model = 0, num_layers = 0, num_heads = 0, d_ff = 0, vocab = 0;
  int steps = 10, warmup = 3;
  int64_t grad_accum = 1;
  std::vector<std::string> ddp_words, bucket_words, shard_words, sms_words, engine_words, grad_comm_words,
      prefetch_words;
  LogOptions log_opt;
  po::options_description desc = bench_options("bench ddp options", run, log_opt);
  add_storage_dtype_options(desc, run);
  add_gemm_option(desc, run);
  add_flash_options(desc, run);
  // clang-format off
  desc.add_options()
      ("model", po::value(&size)->default_value(size), "named size: small, medium, large, xl, 2.7b")
      ("d-model", po::value(&d_model)->default_value(0), "override the size's d_model (0: keep)")
      ("num-layers", po::value(&num_layers)->default_value(0), "override the number of layers (0: keep)")
      ("num-heads", po::value(&num_heads)->default_value(0), "override the number of heads (0: keep)")
      ("d-ff", po::value(&d_ff)->default_value(0), "override d_ff (0: keep)")
      ("vocab-size", po::value(&vocab)->default_value(0), "override the vocabulary (0: keep)")
      ("context-length", po::value(&context)->default_value(context), "sequence length")
      ("batch-size", po::value(&batch)->default_value(batch), "sequences per rank per micro-batch")
      ("grad-accum", po::value(&grad_accum)->default_value(grad_accum),
       "micro-batches per step into the same gradients, synchronised once, in the last")
      ("attention", po::value(&attention)->default_value(attention), "naive or flash")
      ("optimizer", po::value(&optimizer)->default_value(optimizer), "adamw or sgd")
      ("ddp", po::value(&ddp_words)->multitoken(),
       ("strategies to time (default: all of " + parallel::strategy_names_text() + "); none is the floor").c_str())
      ("bucket-mb", po::value(&bucket_words)->multitoken(),
       "bucket caps for bucketed, MiB (default 1,10,100,1000; 0 = one bucket per parameter)")
      ("shard-optimizer", po::value(&shard_words)->multitoken(),
       "sharding modes to add (default none): broadcast (with bucketed 25 MiB), zero1 (with flat "
       "and with bucketed 25 MiB)")
      ("comm-sms", po::value(&sms_words)->multitoken(),
       "values to time (default auto): NCCL's CTAs a collective, kept from GEMMs while gradients sync")
      ("comm-engine", po::value(&engine_words)->multitoken(),
       "values to time (default nccl), each with its own communicator: nccl, ce or auto")
      ("grad-comm", po::value(&grad_comm_words)->multitoken(),
       "values to time (default fp32): gradients on the wire, fp32 or bf16 (as bf16_compress_hook)")
      ("zero1-prefetch", po::value(&prefetch_words)->multitoken(),
       "values to time with zero1 (default on): all-gathers left for the next forward, or waited for")
      ("steps", po::value(&steps)->default_value(steps), "timed steps per configuration")
      ("warmup", po::value(&warmup)->default_value(warmup), "untimed steps first");
  // clang-format on
  auto vm = parse_or_help(desc, args, "mpirun -np N paratrain bench ddp [options]   (one rank per GPU)");
  if (!vm) return 0;
  PT_CHECK(steps >= 1 && warmup >= 1, "--steps and --warmup must be at least 1");
  PT_CHECK(context >= 1 && batch >= 1, "--context-length and --batch-size must be positive");
  const auto ddps = split_list(ddp_words.empty() ? parallel::grad_sync_names() : ddp_words);
  const auto buckets =
      parse_double_list(bucket_words.empty() ? std::vector<std::string>{"1,10,100,1000"} : bucket_words, "bucket-mb");
  const auto shards = split_list(shard_words.empty() ? std::vector<std::string>{"none"} : shard_words);
  for (const auto& d : ddps) parallel::strategy(d);  // one clear error for a name not in the table
  for (double mb : buckets) PT_CHECK(mb >= 0, "--bucket-mb values must be >= 0");
  std::vector<int> comm_sms;  // as asked (kCommSmsAuto for auto); rows show what it resolved to
  for (const auto& w : split_list(sms_words.empty() ? std::vector<std::string>{"auto"} : sms_words))
    comm_sms.push_back(parse_comm_sms(w));
  std::vector<parallel::CommEngine> engines;
  for (const auto& w : split_list(engine_words.empty() ? std::vector<std::string>{"nccl"} : engine_words))
    engines.push_back(parallel::comm_engine_from_name(w));
  std::vector<parallel::GradComm> grad_comms;
  for (const auto& w : split_list(grad_comm_words.empty() ? std::vector<std::string>{"fp32"} : grad_comm_words))
    grad_comms.push_back(parallel::grad_comm_from_name(w));
  std::vector<bool> prefetches;
  for (const auto& w : split_list(prefetch_words.empty() ? std::vector<std::string>{"on"} : prefetch_words))
    prefetches.push_back(parse_on_off(w, "zero1-prefetch"));
  const auto plan = configs(ddps, buckets, shards, engines, comm_sms, grad_comms, prefetches);
  const DType grad_dtype = grad_dtype_for_precision(run);
  const DType residual_dtype = residual_dtype_for_precision(run);

  TransformerConfig cfg = TransformerConfig::named(size);
  if (d_model) cfg.d_model = d_model;
  if (num_layers) cfg.num_layers = num_layers;
  if (num_heads) cfg.num_heads = num_heads;
  if (d_ff) cfg.d_ff = d_ff;
  if (vocab) cfg.vocab_size = vocab;
  cfg.context_length = std::max(cfg.context_length, context);
  cfg.attention = attention_impl_from_name(attention);
  cfg.validate();

  auto& rt = parallel::Runtime::get();
  const Device device = resolve_device(run);
  check_memory_floor(
      cfg, batch, dtype_size(grad_dtype), precision_from_name(run.precision) == Precision::BF16 && device.is_cuda(),
      device,
      "the size comes from --model, --num-layers, --d-model, --d-ff, --vocab-size, --batch-size and --context-length");
  BenchSweep sweep("bench ddp", run, log_opt, static_cast<int64_t>(plan.size()));
  io::RunRecord& record = sweep.record();  // --out checked now, not after the sweep
  Context ctx(device, precision_from_name(run.precision));
  ctx.set_grad_dtype(grad_dtype);
  ctx.set_residual_dtype(residual_dtype);
  apply_gemm_option(ctx, run);
  apply_flash_options(ctx, run);
  auto comm = parallel::make_communicator(parallel::backend_for(device), ctx, comm_sms.front(), engines.front());
  int comm_sms_now = comm_sms.front();
  parallel::CommEngine engine_now = engines.front();
  record.collect_environment(ctx);
  record.set_options(options_as_strings(*vm));
  record.set_attr("backend", comm->name());
  record.set_attr("device", device.str());
  record.set_attr("model.d_model", cfg.d_model);
  record.set_attr("model.num_layers", cfg.num_layers);
  record.set_attr("model.num_heads", cfg.num_heads);
  record.set_attr("model.d_ff", cfg.d_ff);
  record.set_attr("model.vocab_size", cfg.vocab_size);
  record.set_attr("model.parameters", cfg.num_params());
  sweep.start();

  TransformerLM model(cfg, ctx);
  model.init_weights(ctx, run.seed);
  // Each rank its own batch (as in data-parallel training); the same one every step.
  std::mt19937_64 rng(run.seed + 1000 * static_cast<uint64_t>(rt.rank()));
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(cfg.vocab_size - 1));
  Tensor host_ids = Tensor::empty({batch, context}, DType::I32, Device::cpu(), "ids");
  Tensor host_targets = Tensor::empty({batch, context}, DType::I32, Device::cpu(), "targets");
  for (int64_t i = 0; i < batch * context; ++i) {
    host_ids.data_as<int32_t>()[i] = tok(rng);
    host_targets.data_as<int32_t>()[i] = tok(rng);
  }
  OptimizerConfig opt_cfg;
  opt_cfg.kind = optimizer_kind_from_name(optimizer);
  opt_cfg.adamw.lr = 1e-4f;
  Bench bench{ctx,     comm.get(), model, host_ids.to(device, ctx),    host_targets.to(device, ctx),
              opt_cfg, warmup,     steps, static_cast<int>(grad_accum)};

  std::vector<DdpResult> results;
  record.set_attr("ddp_order", parallel::strategy_report_order());  // the report lists rows in this order
  const DdpRun ddp_run{rt.world_size(),
                       run.precision,
                       dtype_name(grad_dtype),
                       dtype_name(residual_dtype),
                       grad_accum,
                       static_cast<double>(rt.world_size() * batch * grad_accum * context)};
  for (const auto& c : plan) {
    if (c.comm_sms != comm_sms_now || c.engine != engine_now) {
      comm.reset();  // NCCL's resources go before the next communicator's come
      comm = parallel::make_communicator(parallel::backend_for(device), ctx, c.comm_sms, c.engine);
      comm_sms_now = c.comm_sms;
      engine_now = c.engine;
      bench.comm_ptr = comm.get();
    }
    results.push_back(bench.run(c));
    const DdpResult& r = results.back();
    const std::string name = r.sync_name + " bucket_mb " + std::to_string(c.bucket_mb) + " shard " +
                             shard_mode_name(c.shard) + " comm_sms " + std::to_string(r.comm_sms) + " " +
                             r.comm_engine + " grad_comm " + parallel::grad_comm_name(c.grad_comm) +
                             " zero1_prefetch " + zero1_prefetch_word(c);
    // The record's tables from every configuration measured so far, written after each one: a
    // long or interrupted sweep keeps what it has measured.
    const DdpTables tables = ddp_tables(results, ddp_run);
    sweep.done(name,
               std::to_string(r.step_ms) + " ms/step, exposed communication " + std::to_string(r.exposed_ms) + " ms",
               {{"step_ms", r.step_ms}, {"exposed_comm_ms", r.exposed_ms}}, {&tables.ddp, &tables.events});
  }
  const DdpTables tables = ddp_tables(results, ddp_run);
  sweep.finish({&tables.ddp});
  return 0;
}

}  // namespace pt::cli
