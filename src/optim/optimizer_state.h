#pragma once
// An optimizer's state as whole-model tensors on the host, the form checkpoints store: each kind
// ("exp_avg", "exp_avg_sq") over every trainable element, in gradient-buffer order. The layout is
// the same for every sharding (none, broadcast, zero1) and rank count, so a checkpoint written
// by one resumes under any other.
#include <cstdint>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/dtype.h"
#include "optim/optimizer.h"

namespace pt {

struct WholeOptimizerState {
  int64_t steps = 0;  // updates taken
  int64_t numel = 0;  // trainable elements: each tensor's length
  struct Tensor {
    std::string kind;
    DType dtype = DType::F32;
    int64_t offset = 0;  // bytes into `bytes`
  };
  std::vector<Tensor> tensors;  // in the order the lowest rank holding each kind lists it
  std::vector<char> bytes;      // every tensor back to back
  const char* data(const Tensor& t) const { return bytes.data() + t.offset; }
};

// Collective (every rank calls it): rank 0 assembles the whole state of `numel` trainable
// elements from every rank's Optimizer::state_pieces() (host copies, then MPI point-to-point);
// the other ranks return only `steps`. `replicated`: every rank holds the whole state (no
// sharding), so rank 0's own pieces are the state and nothing is sent.
WholeOptimizerState gather_optimizer_state(Optimizer& opt, Context& ctx, int64_t numel, bool replicated);

}  // namespace pt
