#pragma once
// The data-parallel command-line options shared by `train` and the benchmarks:
// --ddp, --bucket-mb, --shard-optimizer, checked once and turned into concrete choices.
#include <boost/program_options.hpp>

#include <string>

#include "dist/grad_sync.h"

namespace pt::dist {

struct DdpOptions {
  std::string ddp = "auto";      // auto: bucketed with several ranks, none alone
  double bucket_mb = kDefaultBucketMB;
  std::string shard = "none";    // none | broadcast | zero1
};

void add_ddp_options(boost::program_options::options_description& desc, DdpOptions& o);

// Validates the names and their combination for `world` ranks and resolves "auto". With one
// rank every strategy is replaced by none and sharding by none (nothing to communicate).
// Throws pt::Error for unknown names, a negative bucket size, or sharding with --ddp none.
DdpOptions resolve_ddp_options(const DdpOptions& o, int world);

}  // namespace pt::dist
