#include "train/data_parallel.h"

#include "core/error.h"
#include "optim/zero1_optimizer.h"
#include "parallel/zero1.h"

namespace pt {

DataParallel make_data_parallel(Context& ctx, ParamStore& store, parallel::Communicator* comm,
                                const parallel::StrategySpec& ddp, double bucket_mb, ShardMode shard,
                                const OptimizerConfig& cfg, parallel::GradComm grad_comm, bool zero1_prefetch,
                                UpdateOverlap update_overlap, bool cuda_graph) {
  DataParallel dp;
  const auto params = trainable_params(store);
  if (shard == ShardMode::None) {
    dp.sync = parallel::make_grad_sync(ddp, ctx, store, comm, bucket_mb, grad_comm);
    // Several ranks: auto stays off until the overlap is measured and tested beside NCCL's
    // collectives on several GPUs; on runs it.
    const UpdateOverlap overlap = comm && update_overlap == UpdateOverlap::Auto ? UpdateOverlap::Off : update_overlap;
    dp.optimizer = make_update_optimizer(cfg, ctx, store, overlap, cuda_graph);
    return dp;
  }
  // The sharded updates refresh the mirror from parameters other ranks send: FP8 weights take
  // their bf16 copies back there, and their layers cast them at each use.
  store.drop_fp8_weights(ctx);
  PT_CHECK(update_overlap != UpdateOverlap::On,
           std::string("--update-overlap on cannot run with --shard-optimizer ") + shard_mode_name(shard) +
               " (the sharded update exchanges parameters after it): use --update-overlap off or auto");
  PT_CHECK(comm != nullptr,
           std::string("--shard-optimizer ") + shard_mode_name(shard) + " needs a communicator (several ranks)");
  PT_CHECK(ddp.buckets != parallel::BucketPolicy::None, std::string("--shard-optimizer ") + shard_mode_name(shard) +
                                                            " needs averaged gradients; it cannot run with --ddp none");
  if (shard == ShardMode::Broadcast) {
    dp.sync = parallel::make_grad_sync(ddp, ctx, store, comm, bucket_mb, grad_comm);
    dp.optimizer = std::make_unique<BroadcastShardedOptimizer>(cfg, ctx, *comm, per_parameter_ranges(params));
  } else {
    auto layout = parallel::zero1_layout(ddp, store, comm->world_size(), bucket_mb);
    dp.sync = parallel::make_zero1_sync(ddp, ctx, store, *comm, layout, grad_comm);
    dp.optimizer = std::make_unique<Zero1Optimizer>(cfg, ctx, *comm, store, layout, zero1_prefetch);
  }
  return dp;
}

parallel::CommEngine comm_engine_for(parallel::CommEngine requested, const parallel::StrategySpec& ddp, ShardMode shard,
                                     bool bf16_gradients, int ranks) {
  if (requested != parallel::CommEngine::Auto) return requested;
  const bool bucketed = ddp.overlapped && ddp.buckets == parallel::BucketPolicy::Capped;
  const bool ce = bf16_gradients && bucketed && (shard == ShardMode::Zero1 || ranks <= 2);
  return ce ? parallel::CommEngine::Auto : parallel::CommEngine::NCCL;
}

DataParallel make_data_parallel(Context& ctx, ParamStore& store, parallel::Communicator* comm,
                                const DataParallelConfig& dp, const OptimizerConfig& cfg, UpdateOverlap update_overlap,
                                bool cuda_graph) {
  return make_data_parallel(ctx, store, comm, *dp.ddp, dp.bucket_mb, dp.shard, cfg, dp.grad_comm, dp.zero1_prefetch,
                            update_overlap, cuda_graph);
}

}  // namespace pt
