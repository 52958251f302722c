#pragma once
// The data-parallel gradient strategies, one table: every name, help text, error text, bucket
// plan, ZeRO-1 layout, bench sweep and report order derives from it. Adding a strategy is one
// entry here plus its GradSync class (grad_sync.cpp).
#include <memory>
#include <string>
#include <vector>

#include "parallel/grad_sync.h"

namespace pt::parallel {

// The gradient collectives a strategy issues per step.
enum class BucketPolicy {
  None,          // no communication (the floor)
  PerParameter,  // one per trainable parameter
  One,           // one over the whole buffer
  Capped,        // one per plan_buckets(--bucket-mb) bucket
};

struct StrategySpec {
  const char* name;  // --ddp
  const char* help;  // what it does, for --help
  bool overlapped;   // its collectives start during backward (as parameters become ready)
  BucketPolicy buckets;
  // Its ZeRO-1 form (--shard-optimizer zero1): the reduce-scatter layout's bucket cap
  // (Zero1Layout::kOneBucket: one bucket; 0: one per parameter; the --bucket-mb value otherwise);
  // the sync is named zero1_sync_name(overlapped).
  double zero1_bucket_mb(double bucket_mb) const;
  // The sync itself (nullptr for none: it needs no communicator).
  std::unique_ptr<GradSync> (*make)(Context&, ParamStore&, Communicator&, double bucket_mb, GradComm);
};

const std::vector<StrategySpec>& strategies();
const StrategySpec& strategy(const std::string& name);  // throws naming every strategy
std::string strategy_names_text();                      // "none, naive, flat, overlap or bucketed"
// Every name a bench ddp row can carry, in the order reports list them: the strategies, then
// their ZeRO-1 forms.
std::vector<std::string> strategy_report_order();

}  // namespace pt::parallel
