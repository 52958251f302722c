#include "cli/ddp_options.h"

#include "cli/options.h"
#include "core/error.h"
#include "parallel/strategies.h"

namespace pt::cli {

namespace po = boost::program_options;

namespace {

// A word option parsed into `field` by `parse` once the map is notified. An empty word leaves
// the field alone: check_option_values refuses it with its own message.
template <class T, class Parse>
po::typed_value<std::string>* parsed_word(const std::string& default_word, T& field, Parse parse) {
  return po::value<std::string>()->default_value(default_word)->notifier([&field, parse](const std::string& w) {
    if (!w.empty()) field = parse(w);
  });
}

const parallel::StrategySpec* strategy_or_auto(const std::string& w) {
  if (w == "auto") return nullptr;
  for (const parallel::StrategySpec& s : parallel::strategies())
    if (w == s.name) return &s;
  PT_FAIL("--ddp must be auto, " + parallel::strategy_names_text() + " (got '" + w + "')");
}

}  // namespace

void add_ddp_strategy_options(po::options_description& desc, DdpOptions& o, const char* ddp_default) {
  // clang-format off
  desc.add_options()
      ("ddp", parsed_word(ddp_default, o.ddp, strategy_or_auto),
       ("gradient sync: auto (bucketed with several ranks), " + parallel::strategy_names_text()).c_str())
      ("bucket-mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb),
       "bucketed: cap per bucket in MiB of fp32 gradients (PyTorch DDP's 25); 0: a bucket per "
       "parameter")
      ("shard-optimizer", parsed_word(plan::sharding_name(o.sharding), o.sharding, plan::sharding_from_name),
       kShardOptimizerHelp)
      ("grad-comm", parsed_word(parallel::grad_comm_name(o.grad_comm), o.grad_comm, parallel::grad_comm_from_name),
       kGradCommHelp);
  // clang-format on
}

void add_ddp_options(po::options_description& desc, DdpOptions& o) {
  add_ddp_strategy_options(desc, o);
  auto on_off = [](const std::string& w) { return parse_on_off(w, "zero1-prefetch"); };
  // clang-format off
  desc.add_options()
      ("comm-sms", parsed_word("auto", o.comm_sms, parse_comm_sms), kCommSmsHelp)
      ("comm-engine", parsed_word("nccl", o.comm_engine, parallel::comm_engine_from_name), kCommEngineHelp)
      ("zero1-prefetch", parsed_word("on", o.zero1_prefetch, on_off), kZero1PrefetchHelp);
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
  const char* sharding = plan::sharding_name(o.sharding);
  PT_CHECK(plan::sharding_runs_in_paratrain(o.sharding),
           std::string("--shard-optimizer must be none, broadcast or zero1 (got '") + sharding + "')");
  PT_CHECK(o.bucket_mb >= 0, "--bucket-mb must be >= 0 (got " + std::to_string(o.bucket_mb) + ")");
  const bool none = o.ddp && o.ddp->buckets == parallel::BucketPolicy::None;
  PT_CHECK(!(none && o.sharding != plan::Sharding::None),
           std::string("--shard-optimizer ") + sharding + " needs averaged gradients; it cannot run with --ddp none");
  DdpOptions r = o;
  r.shard = shard_mode_from_name(sharding);
  if (!r.ddp) r.ddp = &parallel::strategy(world > 1 ? "bucketed" : "none");
  if (world == 1) {
    r.ddp = &parallel::strategy("none");
    r.shard = ShardMode::None;
  }
  if (r.ddp->buckets == parallel::BucketPolicy::None) r.grad_comm = parallel::GradComm::FP32;
  return r;
}

DataParallelConfig data_parallel_config(const DdpOptions& resolved) {
  PT_CHECK(resolved.ddp != nullptr, "data_parallel_config: --ddp auto is not resolved yet");
  return resolved;
}

}  // namespace pt::cli
