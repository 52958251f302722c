#include "bench/ddp_tables.h"

#include <limits>
#include <utility>

#include "parallel/strategies.h"

namespace pt::bench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMB = 1e6;

void add_memory_columns(io::ResultTable& t, const std::string& prefix, const std::string& when, bool acts) {
  t.add_double(prefix + "_MB", "rank 0: " + when + " (MB)", 1)
      .add_double(prefix + "_params_MB", "rank 0: parameters (fp32 + bf16 copy), " + when + " (MB)", 1)
      .add_double(prefix + "_grads_MB", "rank 0: gradients, " + when + " (MB)", 1)
      .add_double(prefix + "_optstate_MB", "rank 0: optimizer state, " + when + " (MB)", 1);
  if (acts) t.add_double(prefix + "_acts_MB", "rank 0: activations, " + when + " (MB)", 1);
}

void set_memory(io::ResultTable::RowBuilder& row, const std::string& prefix, const DdpMemPoint& m, bool acts) {
  row.set(prefix + "_MB", m.total / kMB)
      .set(prefix + "_params_MB", m.params / kMB)
      .set(prefix + "_grads_MB", m.grads / kMB)
      .set(prefix + "_optstate_MB", m.optstate / kMB);
  if (acts) row.set(prefix + "_acts_MB", m.acts / kMB);
}

// A new /ddp or /ddp_events row with the configuration's columns set.
io::ResultTable::RowBuilder config_row(io::ResultTable& t, const DdpResult& r) {
  auto row = t.add_row();
  row.set("ddp", r.sync_name)
      .set("bucket_mb", r.cfg.bucket_mb)
      .set("shard", shard_mode_name(r.cfg.shard))
      .set("comm_sms", static_cast<int64_t>(r.comm_sms))
      .set("comm_engine", r.comm_engine)
      .set("grad_comm", parallel::grad_comm_name(r.cfg.grad_comm))
      .set("zero1_prefetch", zero1_prefetch_word(r.cfg));
  return row;
}

}  // namespace

const char* zero1_prefetch_word(const DdpConfig& c) {
  return c.shard != ShardMode::Zero1 ? "n/a" : c.zero1_prefetch ? "on" : "off";
}

DdpMemPoint mem_point(int64_t total, const std::array<int64_t, kMemCategories>& by) {
  auto cat = [&](MemCategory c) { return static_cast<double>(by[static_cast<int>(c)]); };
  return {static_cast<double>(total), cat(MemCategory::Parameters), cat(MemCategory::Gradients),
          cat(MemCategory::OptimizerState), cat(MemCategory::Activations)};
}

DdpTables ddp_tables(const std::vector<DdpResult>& results, const DdpRun& run) {
  double floor_ms = kNaN;
  for (const auto& r : results)
    if (r.cfg.ddp->buckets == parallel::BucketPolicy::None) floor_ms = r.step_ms_max_rank;

  io::ResultTable table("ddp", "data-parallel training step per strategy, bucket cap and optimizer sharding");
  table
      .add_string("ddp", "gradient sync: none (no communication: the floor), naive, flat, overlap, bucketed; with "
                         "zero1 reduce_scatter (one bucket, after backward) or bucketed_reduce_scatter (per bucket, "
                         "overlapped with backward)")
      .add_double("bucket_mb", "bucket cap in MiB (bucketed only; NaN otherwise)", 2)
      .add_string("shard", "optimizer sharding: none, broadcast, zero1")
      .add_int("comm_sms", "--comm-sms: CTAs per NCCL collective and SMs kept from GEMMs while overlapped "
                           "collectives are in flight (0: NCCL's choice, GEMMs on every SM)")
      .add_string("comm_engine", "--comm-engine: what moved the gradient and parameter collectives: nccl (NCCL's "
                                 "kernels), ce (the copy engines), mpi (CPU ranks)")
      .add_string("grad_comm", "--grad-comm: gradients on the wire as fp32, or as bf16 (cast, summed in bf16, "
                               "scaled by 1/ranks in fp32); fp32 for none")
      .add_string("zero1_prefetch", "--zero1-prefetch: on (parameter all-gathers overlap the next forward), off "
                                    "(waited for at the end of the step); n/a without zero1")
      .add_int(
          "buckets",
          "gradient collectives per step: 0 for none, 1 for flat, one per trainable parameter "
          "for naive and overlap, parallel::plan_buckets's count for bucketed; zero1: one reduce-scatter per bucket "
          "of its layout (parallel::Zero1Layout; 1 for reduce_scatter), plus 1 for a tail")
      .add_int("ranks", "data-parallel ranks")
      .add_string("precision", "fp32, tf32 or bf16")
      .add_string("grad_dtype", "weight-gradient type (--grad-dtype): fp32, or bf16 (moved as they are)")
      .add_string("residual_dtype", "residual stream type (--residual-dtype): fp32, or bf16")
      .add_int("grad_accum", "micro-batches per step (--grad-accum), gradients synchronised in the last")
      .add_double("step_ms", "time per training step, mean over steps and ranks (ms)", 2)
      .add_double("step_sd_ms", "standard deviation over steps, largest over ranks (ms)", 2)
      .add_double("step_ms_max_rank", "mean step time of the slowest rank (ms)", 2)
      .add_double("rank_spread_pct", "slowest rank's mean step over the fastest's (%)", 2)
      .add_double("overhead_pct", "step_ms_max_rank over the ddp=none floor's, in this run (%)", 2)
      .add_double("exposed_comm_ms", "end of backward to end of gradient sync on the slowest rank: not hidden (ms)", 3)
      .add_double("host_ms",
                  "host time to queue a step, slowest rank: near step_ms_max_rank, the host sets the pace (ms)", 2)
      .add_double("comm_MB",
                  "bytes this rank put into collectives per step (gradients in their wire type + "
                  "sharded parameters as gathered, MB)",
                  1)
      .add_double("tokens_per_s", "global tokens per second, at the slowest rank's pace", 0)
      .add_double("peak_MB", "peak tracked memory over the timed steps, largest rank (MB)", 1);
  add_memory_columns(table, "init", "in use after model, strategy and optimizer are built", false);
  add_memory_columns(table, "before_step", "peak of the first step before the optimizer step", true);
  add_memory_columns(table, "step", "peak during the first optimizer step", true);
  for (const auto& r : results) {
    auto row = config_row(table, r);
    row.set("buckets", r.buckets)
        .set("ranks", static_cast<int64_t>(run.ranks))
        .set("precision", run.precision)
        .set("grad_dtype", run.grad_dtype)
        .set("residual_dtype", run.residual_dtype)
        .set("grad_accum", run.grad_accum)
        .set("step_ms", r.step_ms)
        .set("step_sd_ms", r.step_sd)
        .set("step_ms_max_rank", r.step_ms_max_rank)
        .set("rank_spread_pct", r.rank_spread_pct)
        .set("overhead_pct", (r.step_ms_max_rank / floor_ms - 1.0) * 100.0)
        .set("exposed_comm_ms", r.exposed_ms)
        .set("host_ms", r.host_ms)
        .set("comm_MB", r.comm_bytes / kMB)
        .set("tokens_per_s", run.tokens_per_step / (r.step_ms_max_rank * 1e-3))
        .set("peak_MB", r.peak / kMB);
    set_memory(row, "init", r.init, false);
    set_memory(row, "before_step", r.before_step, true);
    set_memory(row, "step", r.during_step, true);
  }
  io::ResultTable events("ddp_events", "per-rank timeline of one untimed step per configuration, after the timed "
                                       "ones: compute phases and collectives (docs/REPORT.md)");
  events.add_string("ddp", "gradient sync, as in /ddp")
      .add_double("bucket_mb", "bucket cap in MiB, as in /ddp", 2)
      .add_string("shard", "optimizer sharding, as in /ddp")
      .add_int("comm_sms", "--comm-sms, as in /ddp")
      .add_string("comm_engine", "--comm-engine, as in /ddp")
      .add_string("grad_comm", "--grad-comm, as in /ddp")
      .add_string("zero1_prefetch", "--zero1-prefetch, as in /ddp")
      .add_int("rank", "the rank that recorded the event")
      .add_int("step", "index of the step in the configuration's run (warm-up and timed steps come first)")
      .add_string("stream", "compute or comm")
      .add_string("name", "forward, backward <module>, optimizer; <collective> <buffer> (MB), or (bf16, MB) for a "
                          "collective on a bf16 copy of the gradients")
      .add_double("start_ms",
                  "since the step started on this rank (after a barrier): CUDA events on the GPU, "
                  "the host clock on the CPU (ms)",
                  3)
      .add_double("end_ms", "as start_ms (ms)", 3);
  for (const auto& r : results)
    for (size_t rank = 0; rank < r.events.size(); ++rank)
      for (const auto& e : r.events[rank])
        config_row(events, r)
            .set("rank", static_cast<int64_t>(rank))
            .set("step", r.traced_step)
            .set("stream", e.stream)
            .set("name", e.name)
            .set("start_ms", e.start_ms)
            .set("end_ms", e.end_ms);
  return {std::move(table), std::move(events)};
}

}  // namespace pt::bench
