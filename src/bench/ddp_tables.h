#pragma once
// The DDP benchmark's configurations and results, and the run record's tables made from them:
// /ddp (one row per configuration: time, exposed communication, bytes, memory) and /ddp_events
// (every rank's timeline of one untimed step per configuration).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/ddp_timeline.h"
#include "core/allocator.h"
#include "io/table.h"
#include "optim/sharded_optimizer.h"
#include "parallel/comm_engine.h"
#include "parallel/grad_sync.h"
#include "parallel/strategies.h"

namespace pt::bench {

struct DdpConfig {
  const parallel::StrategySpec* ddp;  // an entry of parallel::strategies()
  double bucket_mb;                   // NaN unless bucketed
  ShardMode shard;
  int comm_sms = 0;  // the communicator's --comm-sms as asked (parallel::kCommSmsAuto: auto)
  parallel::CommEngine engine = parallel::CommEngine::NCCL;  // --comm-engine as asked
  parallel::GradComm grad_comm = parallel::GradComm::FP32;
  bool zero1_prefetch = true;  // zero1 only
};

// "on" or "off" with zero1, "n/a" without.
const char* zero1_prefetch_word(const DdpConfig& c);

// Memory at one moment: total and the categories the issue asks for (bytes).
struct DdpMemPoint {
  double total = 0, params = 0, grads = 0, optstate = 0, acts = 0;
};
DdpMemPoint mem_point(int64_t total, const std::array<int64_t, kMemCategories>& by);

struct DdpResult {
  DdpConfig cfg;
  std::string sync_name;
  int comm_sms = 0;         // what --comm-sms resolved to: NCCL's CTA cap (0: NCCL's own choice)
  std::string comm_engine;  // what --comm-engine resolved to: nccl, ce or mpi
  int64_t buckets = 0;
  double step_ms = 0, step_sd = 0, step_ms_max_rank = 0, comm_bytes = 0, peak = 0;
  double rank_spread_pct = 0;                      // slowest rank's mean step over the fastest's, minus one (%)
  double exposed_ms = 0;                           // on the rank that waits least: the slowest rank's unhidden sync
  double host_ms = 0;                              // the host's time to queue a step, slowest rank
  DdpMemPoint init, before_step, during_step;      // rank 0
  int64_t traced_step = 0;                         // index of the timeline's step (after the timed ones)
  std::vector<std::vector<TimelineEvent>> events;  // rank 0: every rank's timeline, rank order
};

// What every row of a sweep shares.
struct DdpRun {
  int ranks = 1;
  std::string precision;
  std::string grad_dtype = "fp32";      // --grad-dtype
  std::string residual_dtype = "fp32";  // --residual-dtype
  int64_t grad_accum = 1;
  double tokens_per_step = 0;  // global: ranks × batch × grad_accum × context
};

struct DdpTables {
  io::ResultTable ddp, events;
};
// /ddp and /ddp_events of the configurations measured so far (overhead_pct against the ddp=none
// floor among them).
DdpTables ddp_tables(const std::vector<DdpResult>& results, const DdpRun& run);

}  // namespace pt::bench
