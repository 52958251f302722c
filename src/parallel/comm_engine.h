#pragma once
// --comm-engine: what moves the data of the gradient and parameter collectives on one node.
//   nccl  NCCL's kernels, on --comm-sms CTAs (SMs that backward's GEMMs then do without).
//   ce    the GPUs' copy engines over NVLink (comm_ce.cpp): no SM but one short sum pass a
//         chunk; collectives on buffers the strategies register (the gradient and parameter
//         buffers). Everything else, and every rank count across nodes, stays with NCCL.
//   auto  ce when every rank is on one node and every GPU can map every other's memory, else
//         nccl; train and bench ddp ask for it only where ce measured faster (comm_engine_for,
//         train/data_parallel.h) and take nccl otherwise.
#include <stdexcept>
#include <string>

namespace pt::parallel {

enum class CommEngine { NCCL, CE, Auto };
CommEngine comm_engine_from_name(const std::string& name);  // "nccl" | "ce" | "auto"; throws on others
const char* comm_engine_name(CommEngine e);

// The copy engines cannot serve these ranks (another node, no peer mapping, no stream memory
// operations): --comm-engine auto falls back to NCCL, ce stops with the reason.
class CeUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace pt::parallel
