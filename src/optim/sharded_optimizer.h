#pragma once
// Optimizer-state sharding (`--shard-optimizer none|broadcast|zero1`): each rank keeps state
// for and updates only its part of the parameters, then the parts are exchanged. Both wrap the
// ordinary Optimizer (AdamW or SGD) over the rank's own ranges and give its results exactly.
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "dist/grad_sync.h"
#include "optim/optimizer.h"

namespace pt {

namespace dist {
class Communicator;
}

enum class ShardMode { None, Broadcast, Zero1 };
ShardMode shard_mode_from_name(const std::string& name);  // "none" | "broadcast" | "zero1"
const char* shard_mode_name(ShardMode m);

// One FlatRange per parameter (frozen ones skipped): the units the broadcast scheme assigns.
std::vector<FlatRange> per_parameter_ranges(const std::vector<Parameter*>& params);

// The simple scheme (PyTorch's ZeroRedundancyOptimizer): whole parameters are assigned to
// ranks, balanced by element count; each rank steps its own, then every owner broadcasts its
// updated parameters. Gradients must already be averaged (any GradSync strategy).
// Assignment: at construction a contiguous split of the units in buffer order, cut where the
// running element count crosses k·total/world (so each owner broadcasts one run); units added
// later go, largest first, to the least-loaded rank.
class BroadcastShardedOptimizer : public Optimizer {
 public:
  BroadcastShardedOptimizer(const OptimizerConfig& cfg, Context& ctx, dist::Communicator& comm,
                            const std::vector<FlatRange>& units);
  void step(Context& ctx, float lr) override;
  // Each range is one unit (a parameter group added after construction).
  void add_ranges(const std::vector<FlatRange>& units) override;
  std::vector<std::pair<std::string, Tensor>> state() override;
  int64_t state_bytes() const override;

  int owner_of(size_t unit) const { return owner_.at(unit); }
  const std::vector<int64_t>& elements_per_rank() const { return load_; }

 protected:
  void reduce_sumsq(Context& ctx, Tensor& sumsq) override;

 private:
  void take(const std::vector<FlatRange>& units, const std::vector<int>& owners);
  void plan_broadcasts();

  dist::Communicator& comm_;
  std::vector<FlatRange> units_;
  std::vector<int> owner_;       // by unit
  std::vector<int64_t> load_;    // elements per rank
  std::unique_ptr<Optimizer> inner_;  // over this rank's units; null while it owns none
  struct Run {
    FlatRange range;  // adjacent units of one owner, merged
    int owner;
  };
  std::vector<Run> runs_;  // the broadcasts after each step, in buffer order
};

// ZeRO stage 1: the flat gradient buffer is cut into a contiguous partition
// (dist::GradPartition); make_zero1_sync's strategy leaves this rank's part averaged, this
// optimizer updates the matching parameters, then one all-gather (and, for a tail shorter
// than world_size, one broadcast) gives every rank all parameters. Parameters are gathered in
// place when the trainable parameters are one contiguous run of the parameter buffer (any
// model without frozen parameters in between); otherwise through a packed copy.
class Zero1Optimizer : public Optimizer {
 public:
  Zero1Optimizer(const OptimizerConfig& cfg, Context& ctx, dist::Communicator& comm, ParamStore& store);
  void step(Context& ctx, float lr) override;
  // The partition already covers every trainable parameter: adding ranges is an error.
  void add_ranges(const std::vector<FlatRange>& ranges) override;
  std::vector<std::pair<std::string, Tensor>> state() override;
  int64_t state_bytes() const override;
  const dist::GradPartition& partition() const { return partition_; }

 protected:
  void reduce_sumsq(Context& ctx, Tensor& sumsq) override;

 private:
  void gather_in_place(Context& ctx);
  void gather_packed(Context& ctx);
  void all_gather_blocks(Tensor& buf);

  dist::Communicator& comm_;
  ParamStore& store_;
  dist::GradPartition partition_;
  std::unique_ptr<Optimizer> inner_;  // over ranges_ (this rank's part); null if empty
  int64_t param_shift_ = -1;  // offset − grad_offset when equal for all trainable params, else −1
  Tensor packed_;             // (grad_numel) fp32 staging for the packed gather
};

// What a data-parallel run needs: the gradient-sync strategy and the optimizer.
//   shard none:      make_grad_sync(ddp) + the ordinary optimizer over all trainable ranges
//   shard broadcast: make_grad_sync(ddp) + BroadcastShardedOptimizer
//   shard zero1:     make_zero1_sync(ddp) (naive/flat: one reduce-scatter after backward;
//                    overlap/bucketed: bucketed reduces onto the owners) + Zero1Optimizer
// Sharding needs a communicator and gradient averaging (ddp "none" is rejected). grad_comm
// (--grad-comm) reaches the gradient sync of every mode; the parameter exchange stays fp32.
struct DataParallel {
  std::unique_ptr<dist::GradSync> sync;
  std::unique_ptr<Optimizer> optimizer;
};
DataParallel make_data_parallel(Context& ctx, ParamStore& store, dist::Communicator* comm,
                                const std::string& ddp, double bucket_mb, ShardMode shard,
                                const OptimizerConfig& cfg, dist::GradComm grad_comm = dist::GradComm::FP32);

}  // namespace pt
