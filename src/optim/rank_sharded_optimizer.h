#pragma once
// What both optimizer-state sharding schemes (broadcast, zero1) share: the ordinary optimizer
// over this rank's own ranges, whose state is this rank's state, and the sum of the clip's
// partial norms over the ranks.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"
#include "parallel/communicator.h"

namespace pt {

class RankShardedOptimizer : public Optimizer {
 public:
  std::vector<std::pair<std::string, Tensor>> state() override {
    return inner_ ? inner_->state() : std::vector<std::pair<std::string, Tensor>>{};
  }
  std::vector<StatePiece> state_pieces() override {
    return inner_ ? inner_->state_pieces() : std::vector<StatePiece>{};
  }
  int64_t state_bytes() const override { return inner_ ? inner_->state_bytes() : 0; }

 protected:
  RankShardedOptimizer(const OptimizerConfig& cfg, Context& ctx, parallel::Communicator& comm)
      : Optimizer(cfg, ctx), comm_(comm) {}
  void reduce_sumsq(Context& ctx, Tensor& sumsq) override { comm_.all_reduce(sumsq, parallel::ReduceOp::Sum); }

  parallel::Communicator& comm_;
  std::unique_ptr<Optimizer> inner_;  // over this rank's ranges; null while it owns none
};

}  // namespace pt
