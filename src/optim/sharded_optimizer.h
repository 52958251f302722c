#pragma once
// Optimizer-state sharding (`--shard-optimizer none|broadcast|zero1`): each rank keeps state
// for and updates only its part of the parameters, then the parts are exchanged. Both wrap the
// ordinary Optimizer (AdamW or SGD) over the rank's own ranges and give its results exactly.
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "optim/deferred_update.h"
#include "optim/optimizer.h"
#include "optim/rank_sharded_optimizer.h"
#include "optim/zero1_optimizer.h"
#include "parallel/grad_sync.h"

namespace pt {

namespace parallel {
class Communicator;
}

enum class ShardMode { None, Broadcast, Zero1 };
ShardMode shard_mode_from_name(const std::string& name);  // "none" | "broadcast" | "zero1"
const char* shard_mode_name(ShardMode m);

// The broadcast scheme's owner of each unit (numels in gradient-buffer order): the rank whose
// share [k·total/W, (k+1)·total/W) of the elements holds the unit's midpoint.
std::vector<int> broadcast_owners(const std::vector<int64_t>& numels, int world);

// One FlatRange per parameter (frozen ones skipped): the units the broadcast scheme assigns.
std::vector<FlatRange> per_parameter_ranges(const std::vector<Parameter*>& params);

// The simple scheme (PyTorch's ZeroRedundancyOptimizer): whole parameters are assigned to
// ranks, balanced by element count; each rank steps its own, then every owner broadcasts its
// updated parameters. Gradients must already be averaged (any GradSync strategy).
// Assignment: at construction a contiguous split of the units in buffer order, cut where the
// running element count crosses k·total/world (so each owner broadcasts one run); units added
// later go, largest first, to the least-loaded rank.
class BroadcastShardedOptimizer : public RankShardedOptimizer {
 public:
  BroadcastShardedOptimizer(const OptimizerConfig& cfg, Context& ctx, parallel::Communicator& comm,
                            const std::vector<FlatRange>& units);
  void step(Context& ctx, float lr) override;
  // Each range is one unit (a parameter group added after construction).
  void add_ranges(const std::vector<FlatRange>& units) override;
  int64_t parameter_bytes_communicated() const override;  // every broadcast parameter, fp32

  int owner_of(size_t unit) const { return owner_.at(unit); }
  const std::vector<int64_t>& elements_per_rank() const { return load_; }

 private:
  void take(const std::vector<FlatRange>& units, const std::vector<int>& owners);
  void plan_broadcasts();

  std::vector<FlatRange> units_;
  std::vector<int> owner_;     // by unit
  std::vector<int64_t> load_;  // elements per rank
  struct Run {
    FlatRange range;  // adjacent units of one owner, merged
    int owner;
  };
  std::vector<Run> runs_;  // the broadcasts after each step, in buffer order
};

}  // namespace pt
