#include "optim/optimizer_state.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"

namespace pt {

namespace {
// "kind dtype" of a piece: what every rank tells the others about its state.
std::string label(const Optimizer::StatePiece& p) { return p.kind + " " + dtype_name(p.values.dtype()); }
}  // namespace

WholeOptimizerState gather_optimizer_state(Optimizer& opt, Context& ctx, int64_t numel, bool replicated) {
  // One process without MPI (unit tests) is rank 0 of 1.
  const bool mpi = parallel::Runtime::initialized();
  const bool root = !mpi || parallel::Runtime::get().rank() == 0;
  const bool exchange = !replicated && mpi && parallel::Runtime::get().world_size() > 1;
  WholeOptimizerState whole;
  whole.steps = opt.steps_taken();
  whole.numel = numel;

  std::vector<Optimizer::StatePiece> pieces;
  if (root || exchange) pieces = opt.state_pieces();
  std::string labels;
  for (const auto& p : pieces) {
    check_contiguous(p.values, "optimizer state");
    PT_CHECK(p.grad_begin >= 0 && p.grad_begin + p.values.numel() <= numel,
             "optimizer state '" + p.kind + "' reaches past the " + std::to_string(numel) + " trainable elements");
    labels += label(p) + "\n";
  }

  // The whole state's layout, the same on every rank: one tensor per kind, in order of first
  // appearance over the ranks, back to back in one buffer.
  const std::vector<std::string> every =
      exchange ? parallel::all_gather_strings(labels) : std::vector<std::string>{labels};
  std::vector<std::string> kinds;  // "kind dtype"
  for (const std::string& text : every) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
      if (std::find(kinds.begin(), kinds.end(), l) == kinds.end()) kinds.push_back(l);
  }
  int64_t total = 0;
  for (const std::string& k : kinds) {
    const std::string kind = k.substr(0, k.find(' '));
    const DType dt = dtype_from_name(k.substr(k.find(' ') + 1));
    for (const auto& t : whole.tensors)
      PT_CHECK(t.kind != kind, "optimizer state '" + kind + "' has different dtypes on different ranks");
    whole.tensors.push_back({kind, dt, total});
    total += numel * static_cast<int64_t>(dtype_size(dt));
  }
  auto offset_of = [&](const Optimizer::StatePiece& p) {
    const size_t k = static_cast<size_t>(std::find(kinds.begin(), kinds.end(), label(p)) - kinds.begin());
    return whole.tensors[k].offset + p.grad_begin * static_cast<int64_t>(dtype_size(p.values.dtype()));
  };

  // Rank 0 copies its pieces straight into place; the others send host copies of theirs.
  if (root) {
    whole.bytes.resize(static_cast<size_t>(total));
    for (const auto& p : pieces)
      copy_bytes(ctx, whole.bytes.data() + offset_of(p), DeviceKind::CPU, p.values.data(), p.values.device().kind,
                 p.values.nbytes());
  }
  if (exchange) {
    std::vector<std::vector<char>> host(root ? 0 : pieces.size());
    std::vector<parallel::BytePiece> mine;
    for (size_t i = 0; i < host.size(); ++i) {
      const Tensor& t = pieces[i].values;
      host[i].resize(t.nbytes());
      copy_bytes(ctx, host[i].data(), DeviceKind::CPU, t.data(), t.device().kind, t.nbytes());
      mine.push_back({offset_of(pieces[i]), host[i].data(), static_cast<int64_t>(t.nbytes())});
    }
    parallel::gather_pieces_to_root(whole.bytes, mine);
  }
  if (!root) whole.tensors.clear();
  return whole;
}

}  // namespace pt
