#pragma once
// Data parallelism assembled: the gradient-sync strategy (parallel/) and the optimizer that
// goes with it (optim/), one choice made in one place for train and bench ddp.
#include <memory>
#include <string>

#include "core/context.h"
#include "optim/deferred_update.h"
#include "optim/optimizer.h"
#include "optim/sharded_optimizer.h"
#include "parallel/comm_engine.h"
#include "parallel/communicator.h"
#include "parallel/grad_sync.h"
#include "parallel/strategies.h"

namespace pt {

// --ddp, --bucket-mb, --shard-optimizer, --comm-sms, --comm-engine, --grad-comm and
// --zero1-prefetch, resolved (cli/ddp_options.h turns the options into it).
struct DataParallelConfig {
  const parallel::StrategySpec* ddp = &parallel::strategy("none");  // an entry of parallel::strategies()
  double bucket_mb = parallel::kDefaultBucketMB;
  ShardMode shard = ShardMode::None;
  int comm_sms = parallel::kCommSmsAuto;  // NCCL's CTAs a collective (kCommSmsAuto: by GPU)
  parallel::CommEngine comm_engine = parallel::CommEngine::NCCL;
  parallel::GradComm grad_comm = parallel::GradComm::FP32;
  bool zero1_prefetch = true;
};

// --comm-engine auto for one configuration: the copy engines (auto's "ce where the ranks allow,
// else NCCL") where they were measured faster than NCCL on one node, NCCL elsewhere; nccl and ce
// pass through. XL, batch 4 × 512 a rank, 2 and 4 × H200, overhead over the floor's slowest rank
// (docs/reports/2026-11-28_ce-pipeline_2xh200-4xh200.md):
//   ZeRO-1, bucketed reduce-scatters, bf16 gradients: ce +2.7 % / +11.5 % (2 / 4 ranks), nccl +13.4 / +14.9
//   bucketed all-reduce, bf16 gradients: ce +7.0 to +9.5 % / +31.6 %, nccl +18.7 / +19.5: ce on 2 ranks only
//     (4 ranks want larger buckets on ce: +27.2 / +14.1 / +10.8 % at 25 / 100 / 200 MiB, nccl +18 to
//     +22 % at each; docs/reports/2026-11-28_ce-push_2xh200-4xh200.md)
//   one reduce-scatter after backward: ce loses (+17.6 % against +13.0); fp32 gradients: a tie on 2
//   ranks (ce +22.8 %, nccl +22.6 to +24.2 in other calls), and ce leaves 11.6 ms exposed
// bf16_gradients: the gradients cross the wire in bf16 (gradients_in_bf16).
parallel::CommEngine comm_engine_for(parallel::CommEngine requested, const parallel::StrategySpec& ddp, ShardMode shard,
                                     bool bf16_gradients, int ranks);
// Whether gradients cross the wire in bf16: stored so (--grad-dtype bf16) or sent so (--grad-comm bf16).
inline bool gradients_in_bf16(DType grad_dtype, parallel::GradComm grad_comm) {
  return grad_dtype == DType::BF16 || grad_comm == parallel::GradComm::BF16;
}

// What a data-parallel run needs: the gradient-sync strategy and the optimizer.
//   shard none:      make_grad_sync(ddp) + the ordinary optimizer over all trainable ranges,
//                    its update deferred under the next forward as update_overlap and
//                    cuda_graph allow (make_update_optimizer; auto is off with a communicator,
//                    on is refused for the sharded modes)
//   shard broadcast: make_grad_sync(ddp) + BroadcastShardedOptimizer
//   shard zero1:     on one parallel::zero1_layout(ddp, bucket_mb): parallel::Zero1Sync (naive/flat: one
//                    reduce-scatter after backward; overlap/bucketed: one per bucket, during
//                    backward) + Zero1Optimizer (its all-gathers prefetched for the next
//                    forward unless zero1_prefetch is false)
// Sharding needs a communicator and gradient averaging (ddp "none" is rejected). grad_comm
// (--grad-comm) reaches the gradient sync of every mode; the parameter exchange stays fp32.
struct DataParallel {
  std::unique_ptr<parallel::GradSync> sync;
  std::unique_ptr<Optimizer> optimizer;
};
DataParallel make_data_parallel(Context& ctx, ParamStore& store, parallel::Communicator* comm,
                                const parallel::StrategySpec& ddp, double bucket_mb, ShardMode shard,
                                const OptimizerConfig& cfg, parallel::GradComm grad_comm = parallel::GradComm::FP32,
                                bool zero1_prefetch = true, UpdateOverlap update_overlap = UpdateOverlap::Off,
                                bool cuda_graph = false);

// The same from a resolved configuration.
DataParallel make_data_parallel(Context& ctx, ParamStore& store, parallel::Communicator* comm,
                                const DataParallelConfig& dp, const OptimizerConfig& cfg, UpdateOverlap update_overlap,
                                bool cuda_graph);

}  // namespace pt
