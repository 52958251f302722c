#pragma once
// The data-parallel command-line options shared by `train`, `plan` and the benchmarks: --ddp,
// --bucket-mb, --shard-optimizer, --grad-comm, --comm-sms, --comm-engine, --zero1-prefetch,
// parsed into the library's types once and resolved for the ranks at hand.
#include <boost/program_options.hpp>

#include <string>

#include "parallel/communicator.h"
#include "parallel/grad_sync.h"
#include "plan/plan.h"
#include "train/data_parallel.h"

namespace pt::cli {

// The options as given, parsed: the library's configuration, with ddp nullptr for auto
// (bucketed with several ranks, none alone) until resolve_ddp_options.
struct DdpOptions : DataParallelConfig {
  DdpOptions() { ddp = nullptr; }
  // --shard-optimizer as given; `shard` holds it when paratrain runs it (zero2 and zero3 are
  // plan's estimates only).
  plan::Sharding sharding = plan::Sharding::None;
};

// A --comm-sms value: "auto" → parallel::kCommSmsAuto, else a whole number >= 0. Throws pt::Error.
int parse_comm_sms(const std::string& word);

// --comm-sms's help (add_ddp_options).
inline constexpr const char* kCommSmsHelp =
    "NCCL: N CTAs a collective, GEMMs kept off them while gradients sync; 0: NCCL's choice; auto: "
    "by GPU";

// --comm-engine's help (add_ddp_options).
inline constexpr const char* kCommEngineHelp =
    "nccl, ce (NVLink copy engines) or auto (ce on one node for bf16 gradients, bucketed: ZeRO-1, "
    "or 2 ranks)";

// --grad-comm's help (add_ddp_options).
inline constexpr const char* kGradCommHelp =
    "gradients on the wire: fp32, or bf16 (as DDP's bf16_compress_hook: summed in bf16, averaged "
    "in fp32, half the bytes)";

// --zero1-prefetch's help (add_ddp_options).
inline constexpr const char* kZero1PrefetchHelp =
    "zero1: on leaves the all-gathers in flight for the next forward; off waits for them at the "
    "step's end";

// --shard-optimizer's help (add_ddp_strategy_options).
inline constexpr const char* kShardOptimizerHelp =
    "optimizer state: none, broadcast (owners step, broadcast), zero1 (reduce-scatter, step, "
    "all-gather); plan also zero2, zero3";

// Declares --ddp (default `ddp_default`), --bucket-mb, --shard-optimizer and --grad-comm, each
// parsed into `o` when the variables map is notified (parse_or_help): --ddp into its entry of
// parallel::strategies(). Throws pt::Error there for an unknown name.
void add_ddp_strategy_options(boost::program_options::options_description& desc, DdpOptions& o,
                              const char* ddp_default = "auto");
// The same with --comm-sms, --comm-engine and --zero1-prefetch: what a run needs.
void add_ddp_options(boost::program_options::options_description& desc, DdpOptions& o);

// Checks the combination for `world` ranks and resolves auto. With one rank every strategy is
// replaced by none and sharding by none (nothing to communicate); with none, --grad-comm becomes
// fp32 (it has nothing to compress). Throws pt::Error for a negative bucket size or sharding
// with --ddp none.
DdpOptions resolve_ddp_options(const DdpOptions& o, int world);

// Resolved options as the library takes them.
DataParallelConfig data_parallel_config(const DdpOptions& resolved);

}  // namespace pt::cli
