#pragma once
// The data-parallel command-line options shared by `train` and the benchmarks:
// --ddp, --bucket-mb, --shard-optimizer, --comm-sms, --grad-comm, checked once and turned into
// concrete choices.
#include <boost/program_options.hpp>

#include <string>

#include "parallel/communicator.h"
#include "parallel/grad_sync.h"
#include "train/data_parallel.h"

namespace pt::cli {

struct DdpOptions {
  std::string ddp = "auto";  // auto: bucketed with several ranks, none alone
  double bucket_mb = parallel::kDefaultBucketMB;
  std::string shard = "none";         // none | broadcast | zero1
  std::string comm_sms = "auto";      // NCCL's CTAs and the SMs GEMMs leave them (parse_comm_sms)
  std::string comm_engine = "nccl";   // nccl | ce | auto: what moves the collectives' data (parallel::CommEngine)
  std::string grad_comm = "fp32";     // fp32 | bf16: gradients on the wire (parallel::GradComm)
  std::string zero1_prefetch = "on";  // on | off: zero1's all-gathers left for the next forward
};

// A --comm-sms value: "auto" → parallel::kCommSmsAuto, else a whole number >= 0. Throws pt::Error.
int parse_comm_sms(const std::string& word);

// --comm-sms's help (add_ddp_options).
inline constexpr const char* kCommSmsHelp =
    "NCCL: N CTAs a collective, GEMMs kept off them while gradients sync; 0: NCCL's choice; auto: "
    "by GPU";

// --comm-engine's help (add_ddp_options).
inline constexpr const char* kCommEngineHelp =
    "nccl, ce (copy engines over NVLink) or auto (ce when all ranks share a node)";

// --grad-comm's help (add_ddp_options).
inline constexpr const char* kGradCommHelp =
    "gradients on the wire: fp32, or bf16 (as DDP's bf16_compress_hook: summed in bf16, averaged "
    "in fp32, half the bytes)";

// --zero1-prefetch's help (add_ddp_options).
inline constexpr const char* kZero1PrefetchHelp =
    "zero1: on leaves the all-gathers in flight for the next forward; off waits for them at the "
    "step's end";

void add_ddp_options(boost::program_options::options_description& desc, DdpOptions& o);

// Validates the names and their combination for `world` ranks and resolves "auto". With one
// rank every strategy is replaced by none and sharding by none (nothing to communicate); with
// none, --grad-comm becomes fp32 (it has nothing to compress).
// Throws pt::Error for unknown names, a negative bucket size, or sharding with --ddp none.
DdpOptions resolve_ddp_options(const DdpOptions& o, int world);

// Resolved options (resolve_ddp_options) as the library takes them: --ddp as its entry of
// parallel::strategies().
DataParallelConfig data_parallel_config(const DdpOptions& resolved);

}  // namespace pt::cli
