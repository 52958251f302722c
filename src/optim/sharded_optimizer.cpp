// Sharded optimizers: the broadcast scheme's assignment of parameters to ranks, its inner
// optimizer over this rank's part and the broadcasts of updated parameters; and the assembly of
// a data-parallel run (ZeRO-1's optimizer is in zero1_optimizer.cpp).
#include "optim/sharded_optimizer.h"
#include "core/enum_names.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/profiler.h"
#include "ops/elementwise.h"
#include "parallel/communicator.h"

namespace pt {

namespace {
constexpr EnumName<ShardMode> kShardModes[] = {
    {ShardMode::None, "none"}, {ShardMode::Broadcast, "broadcast"}, {ShardMode::Zero1, "zero1"}};
}

ShardMode shard_mode_from_name(const std::string& name) {
  return enum_from_name(kShardModes, name, "--shard-optimizer");
}
const char* shard_mode_name(ShardMode m) { return enum_name(kShardModes, m); }

std::vector<FlatRange> per_parameter_ranges(const std::vector<Parameter*>& params) {
  std::vector<FlatRange> out;
  for (Parameter* p : params)
    if (p->trainable)
      for (auto& r : contiguous_ranges({p})) out.push_back(r);
  return out;
}

namespace {

// Two ranges that follow each other in the parameter, gradient and bf16 buffers.
bool adjacent(const FlatRange& a, const FlatRange& b) {
  auto follows = [](const Tensor& x, const Tensor& y) {
    if (!x.defined() || !y.defined()) return !x.defined() && !y.defined();
    return static_cast<const char*>(x.data()) + x.nbytes() == y.data();
  };
  return a.grad_begin + a.param.numel() == b.grad_begin && follows(a.param, b.param) && follows(a.grad, b.grad) &&
         follows(a.param_lowp, b.param_lowp);
}

Tensor extend(const Tensor& first, int64_t numel) {
  if (!first.defined()) return Tensor();
  return Tensor::view_of(first.data(), {numel}, first.dtype(), first.device());
}

FlatRange merge(const FlatRange& a, const FlatRange& b) {
  const int64_t n = a.param.numel() + b.param.numel();
  return {extend(a.param, n), extend(a.grad, n), extend(a.param_lowp, n), a.grad_begin};
}

// Refreshes the bf16 copy of ranges another rank updated (no-op without a mirror).
void refresh_lowp(Context& ctx, const FlatRange& r) {
  if (!r.param_lowp.defined()) return;
  Tensor dst = r.param_lowp;
  ops::cast(ctx, dst, r.param);
}

}  // namespace

// ---- broadcast ------------------------------------------------------------------------

std::vector<int> broadcast_owners(const std::vector<int64_t>& numels, int world) {
  int64_t total = 0;
  for (int64_t n : numels) total += n;
  std::vector<int> owners;
  int64_t before = 0;
  for (int64_t n : numels) {
    const double mid = static_cast<double>(before) + 0.5 * static_cast<double>(n);
    int owner = total > 0 ? static_cast<int>(mid * world / static_cast<double>(total)) : 0;
    owners.push_back(std::min(std::max(owner, 0), world - 1));
    before += n;
  }
  return owners;
}

BroadcastShardedOptimizer::BroadcastShardedOptimizer(const OptimizerConfig& cfg, Context& ctx,
                                                     parallel::Communicator& comm, const std::vector<FlatRange>& units)
    : RankShardedOptimizer(cfg, ctx, comm), load_(comm.world_size(), 0) {
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return units[a].grad_begin < units[b].grad_begin; });
  std::vector<FlatRange> sorted;
  std::vector<int64_t> numels;
  for (size_t i : order) {
    sorted.push_back(units[i]);
    numels.push_back(units[i].param.numel());
  }
  take(sorted, broadcast_owners(numels, comm.world_size()));
}

void BroadcastShardedOptimizer::add_ranges(const std::vector<FlatRange>& units) {
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return units[a].param.numel() > units[b].param.numel(); });
  std::vector<int> owners(units.size());
  std::vector<int64_t> load = load_;
  for (size_t i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owners[i] = r;
    load[r] += units[i].param.numel();
  }
  take(units, owners);
}

void BroadcastShardedOptimizer::take(const std::vector<FlatRange>& units, const std::vector<int>& owners) {
  std::vector<FlatRange> mine;
  for (size_t i = 0; i < units.size(); ++i) {
    for (const auto& u : units_)
      PT_CHECK(u.grad_begin != units[i].grad_begin || units[i].param.numel() == 0,
               "BroadcastShardedOptimizer: a parameter range was added twice");
    units_.push_back(units[i]);
    owner_.push_back(owners[i]);
    load_[owners[i]] += units[i].param.numel();
    if (owners[i] == comm_.rank()) mine.push_back(units[i]);
  }
  if (!mine.empty()) {
    if (inner_) {
      inner_->add_ranges(mine);
    } else {
      inner_ = make_optimizer(cfg_, ctx_, mine);
      inner_->set_steps_taken(steps_);
    }
  }
  ranges_ = inner_ ? inner_->ranges() : std::vector<FlatRange>{};
  plan_broadcasts();
}

void BroadcastShardedOptimizer::plan_broadcasts() {
  std::vector<size_t> order(units_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return units_[a].grad_begin < units_[b].grad_begin; });
  runs_.clear();
  for (size_t i : order) {
    if (!runs_.empty() && runs_.back().owner == owner_[i] && adjacent(runs_.back().range, units_[i]))
      runs_.back().range = merge(runs_.back().range, units_[i]);
    else
      runs_.push_back({units_[i], owner_[i]});
  }
}

void BroadcastShardedOptimizer::step(Context& ctx, float lr) {
  step_wrapped(inner_.get(), ctx, lr);
  OpScope scope(ctx, "sharded optimizer: broadcast parameters", OpFamily::Communication);
  std::vector<parallel::WorkPtr> works;
  for (auto& run : runs_) works.push_back(comm_.broadcast_async(run.range.param, run.owner));
  for (auto& w : works) w->wait();
  for (const auto& run : runs_)
    if (run.owner != comm_.rank()) refresh_lowp(ctx, run.range);
}

int64_t BroadcastShardedOptimizer::parameter_bytes_communicated() const {
  int64_t n = 0;
  for (const auto& run : runs_) n += static_cast<int64_t>(run.range.param.nbytes());
  return n;
}

}  // namespace pt
