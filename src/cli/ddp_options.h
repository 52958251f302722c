#pragma once
// The data-parallel command-line options shared by `train` and the benchmarks:
// --ddp, --bucket-mb, --shard-optimizer, --comm-sms, --grad-comm, checked once and turned into
// concrete choices.
#include <boost/program_options.hpp>

#include <string>

#include "parallel/communicator.h"
#include "parallel/grad_sync.h"

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

// --comm-sms's help, shared with `bench ddp` (which takes a list).
inline constexpr const char* kCommSmsHelp =
    "NCCL only: run every collective on exactly N CTAs and, while an overlapped gradient sync "
    "(overlap, bucketed, zero1 bucketed) has collectives in flight during backward, make GEMMs "
    "target (SMs - N) so both run side by side instead of queueing behind each other; 0 = "
    "NCCL's own CTA count and every SM for GEMMs; auto = the count measured best for the GPU "
    "(32 on an H100 SXM or an H200, 16 elsewhere; at most a quarter of its SMs); ignored by the MPI backend";

// --comm-engine's help, shared with `bench ddp` and `bench allreduce` (which take a list).
inline constexpr const char* kCommEngineHelp =
    "what moves gradients and ZeRO-1's parameters between the GPUs of one node: nccl (NCCL's "
    "kernels on --comm-sms SMs), ce (the copy engines over NVLink; one short sum pass on the SMs), "
    "auto (ce when every rank is on one node and can map the others' memory, else nccl); "
    "across nodes always nccl";

// --grad-comm's help, shared with `bench ddp` (which takes a list).
inline constexpr const char* kGradCommHelp =
    "element type of the gradients on the wire: fp32 (as they are) or bf16 (as PyTorch DDP's "
    "bf16_compress_hook): each gradient collective (every --ddp strategy, zero1's reduce-scatter "
    "and reduces) casts its fp32 gradients to bf16 (round to nearest even), sums them over the "
    "ranks in bf16 (each partial sum rounded to bf16), casts the sum back and multiplies it by "
    "1/ranks in fp32: half the bytes, 8 significant bits per averaged gradient (2 ranks: "
    "exactly float(bf16(bf16(g0) + bf16(g1))) / 2). Gradients, optimizer and weights stay fp32, "
    "parameter broadcasts and all-gathers are not compressed; no effect with --ddp none or one rank";

// --zero1-prefetch's help, shared with `bench ddp` (which takes a list).
inline constexpr const char* kZero1PrefetchHelp =
    "zero1 only: on leaves each bucket's parameter all-gather in flight after the optimizer step, "
    "and the next forward waits for a bucket (on the GPU's compute stream, no host block) only "
    "when it first reads one of its parameters, so the gathers overlap the forward; off waits for "
    "every gather at the end of the step. The same parameters either way. Gathers through a "
    "packed copy (frozen parameters between trainable ones) are always waited for";

void add_ddp_options(boost::program_options::options_description& desc, DdpOptions& o);

// Validates the names and their combination for `world` ranks and resolves "auto". With one
// rank every strategy is replaced by none and sharding by none (nothing to communicate); with
// none, --grad-comm becomes fp32 (it has nothing to compress).
// Throws pt::Error for unknown names, a negative bucket size, or sharding with --ddp none.
DdpOptions resolve_ddp_options(const DdpOptions& o, int world);

}  // namespace pt::cli
