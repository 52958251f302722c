#include "cli/ddp_options.h"

#include <algorithm>

#include "cli/options.h"
#include "core/error.h"
#include "parallel/strategies.h"

namespace pt::cli {

namespace po = boost::program_options;

void add_ddp_options(po::options_description& desc, DdpOptions& o) {
  // clang-format off
  desc.add_options()
      ("ddp", po::value(&o.ddp)->default_value(o.ddp),
       ("gradient sync: auto (bucketed with several ranks), " + parallel::strategy_names_text()).c_str())
      ("bucket-mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb),
       "bucketed: cap per bucket in MiB of fp32 gradients (PyTorch DDP's 25); 0: a bucket per "
       "parameter")
      ("shard-optimizer", po::value(&o.shard)->default_value(o.shard),
       "optimizer state: none, broadcast (owners step and broadcast) or zero1 (reduce-scatter, step, "
       "all-gather)")
      ("comm-sms", po::value(&o.comm_sms)->default_value(o.comm_sms), kCommSmsHelp)
      ("comm-engine", po::value(&o.comm_engine)->default_value(o.comm_engine), kCommEngineHelp)
      ("grad-comm", po::value(&o.grad_comm)->default_value(o.grad_comm), kGradCommHelp)
      ("zero1-prefetch", po::value(&o.zero1_prefetch)->default_value(o.zero1_prefetch), kZero1PrefetchHelp);
  // clang-format on
}

int parse_comm_sms(const std::string& word) {
  if (word == "auto") return parallel::kCommSmsAuto;
  size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(word, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  PT_CHECK(used == word.size() && !word.empty() && n >= 0,
           "--comm-sms must be auto or a whole number >= 0 (got '" + word + "')");
  return n;
}

DdpOptions resolve_ddp_options(const DdpOptions& o, int world) {
  DdpOptions r = o;
  const auto& names = parallel::grad_sync_names();
  PT_CHECK(o.ddp == "auto" || std::find(names.begin(), names.end(), o.ddp) != names.end(),
           "--ddp must be auto, " + parallel::strategy_names_text() + " (got '" + o.ddp + "')");
  PT_CHECK(o.shard == "none" || o.shard == "broadcast" || o.shard == "zero1",
           "--shard-optimizer must be none, broadcast or zero1 (got '" + o.shard + "')");
  parse_comm_sms(o.comm_sms);                        // validates
  parallel::comm_engine_from_name(o.comm_engine);    // validates
  parallel::grad_comm_from_name(o.grad_comm);        // validates
  parse_on_off(o.zero1_prefetch, "zero1-prefetch");  // validates
  PT_CHECK(o.bucket_mb >= 0, "--bucket-mb must be >= 0 (got " + std::to_string(o.bucket_mb) + ")");
  PT_CHECK(!(o.ddp == "none" && o.shard != "none"),
           "--shard-optimizer " + o.shard + " needs averaged gradients; it cannot run with --ddp none");
  if (r.ddp == "auto") r.ddp = world > 1 ? "bucketed" : "none";
  if (world == 1) {
    r.ddp = "none";
    r.shard = "none";
  }
  if (r.ddp == "none") r.grad_comm = "fp32";
  return r;
}

DataParallelConfig data_parallel_config(const DdpOptions& resolved) {
  DataParallelConfig c;
  c.ddp = &parallel::strategy(resolved.ddp);
  c.bucket_mb = resolved.bucket_mb;
  c.shard = shard_mode_from_name(resolved.shard);
  c.comm_sms = parse_comm_sms(resolved.comm_sms);
  c.comm_engine = parallel::comm_engine_from_name(resolved.comm_engine);
  c.grad_comm = parallel::grad_comm_from_name(resolved.grad_comm);
  c.zero1_prefetch = parse_on_off(resolved.zero1_prefetch, "zero1-prefetch");
  return c;
}

}  // namespace pt::cli
