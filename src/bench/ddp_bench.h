#pragma once
// The DDP benchmark (`paratrain bench ddp`): the Transformer's training step under each
// gradient-sync strategy, bucket size, optimizer-sharding mode and gradient wire type on the
// same ranks: step time, the communication not hidden behind compute, bytes sent, memory (peak
// and its breakdown), and the per-rank timeline of one extra, untimed step (what overlapped
// with what). The configurations come first (ddp_configs), then one DdpBench times each.
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/ddp_tables.h"
#include "core/context.h"
#include "model/transformer.h"
#include "optim/optimizer.h"
#include "parallel/communicator.h"
#include "parallel/strategies.h"
#include "train/data_parallel.h"

namespace pt::bench {

// The values a sweep crosses (each list non-empty; comm_sms as asked, kCommSmsAuto for auto).
struct DdpSweep {
  std::vector<const parallel::StrategySpec*> ddps;
  std::vector<double> buckets;  // bucketed's caps
  std::vector<ShardMode> shards;
  std::vector<parallel::CommEngine> engines;
  std::vector<int> comm_sms;
  std::vector<parallel::GradComm> grad_comms;
  std::vector<bool> prefetches;  // zero1 only
};

// Grouped by engine and comm_sms value (one communicator each, made in turn), then by wire
// type; the floor, which communicates nothing, runs once, first (in fp32: it has nothing to
// compress). Broadcast sharding runs with bucketed at the default cap; zero1 with flat and
// with bucketed at the default cap.
std::vector<DdpConfig> ddp_configs(const DdpSweep& sweep);

// What every configuration runs on.
struct DdpBenchSetup {
  TransformerConfig model;
  int64_t batch = 4, context = 512;
  int micro_batches = 1;  // the rows run this many times per step, synchronised once
  OptimizerConfig optimizer;
  int warmup = 3, steps = 10;
  uint64_t seed = 0;
  int comm_sms = parallel::kCommSmsAuto;  // the first communicator's
  parallel::CommEngine engine = parallel::CommEngine::NCCL;
};

// The model (initialised from the seed), each rank's batch (its own, the same every step: only
// the cost matters) and the current communicator. run() is collective.
class DdpBench {
 public:
  DdpBench(Context& ctx, const DdpBenchSetup& setup);
  ~DdpBench();
  DdpBench(const DdpBench&) = delete;
  DdpBench& operator=(const DdpBench&) = delete;

  parallel::Communicator& comm() { return *comm_; }
  // Times c: warm-up and timed steps, memory at its points, then the traced step. A new
  // communicator first when c's comm_sms or engine differ from the current one's.
  DdpResult run(const DdpConfig& c);

 private:
  void use_communicator(int comm_sms, parallel::CommEngine engine);
  void forward_backward();
  std::vector<TimelineEvent> traced_step(DataParallel& dp, const DdpConfig& c);

  Context& ctx_;
  DdpBenchSetup setup_;
  std::unique_ptr<parallel::Communicator> comm_;
  int comm_sms_ = 0;
  parallel::CommEngine engine_ = parallel::CommEngine::NCCL;
  TransformerLM model_;
  // The host rows stay for the run: on the CPU they count in the memory columns, as they
  // always have.
  Tensor host_ids_, host_targets_;
  Tensor ids_, targets_;
};

}  // namespace pt::bench
