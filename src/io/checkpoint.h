#pragma once
// Checkpoints in HDF5, laid out like a PyTorch state_dict saved with h5py: one fp32 dataset
// per parameter at the root, named and shaped as in PyTorch; optimizer state in /optimizer;
// the step, the data sampler's state and the model configuration as root attributes.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "io/token_data.h"
#include "model/param_store.h"

namespace pt {
class Optimizer;
struct OptimizerConfig;
struct WholeOptimizerState;
}  // namespace pt

namespace pt::io {

// What a checkpoint says about the run besides tensors: root attributes. Keys are free-form
// ("model.d_model", "data.seed", ...); see docs/HDF5_SCHEMA.md for the ones train writes.
struct CheckpointInfo {
  int64_t step = 0;  // training steps completed
  std::map<std::string, std::string> text;
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> reals;
};

// Writes `path` atomically (temp file + rename; an existing file is replaced when `replace`,
// else refused: use check_output_path first to refuse one before any work). opt_cfg/state may
// be null (weights only); `state` is the whole-model optimizer state (rank 0's
// gather_optimizer_state), stored as /optimizer/<kind>, which any sharding and rank count can
// resume from.
void save_checkpoint(const std::string& path, const ParamStore& params, Context& ctx, const OptimizerConfig* opt_cfg,
                     const WholeOptimizerState* state, const CheckpointInfo& info, bool replace = true);
// The same for an optimizer that holds its whole state in this process (opt may be null).
void save_checkpoint(const std::string& path, const ParamStore& params, Context& ctx, Optimizer* opt,
                     const CheckpointInfo& info);

// Loads every parameter of `params` from `path`: each must be present with exactly its shape
// (fp32 or fp64 datasets, converted; other float widths too). Missing, mis-shaped or
// non-float tensors give one error naming each, with expected and found shapes; nothing is
// changed then. Datasets the model does not have are ignored. Refreshes the bf16 mirror.
void load_weights(const std::string& path, ParamStore& params, Context& ctx);

// The tensors `wanted` (name, shape) of `path` as fp32, one at a time in the order given, to
// `each(index into wanted, values)`: a model's size in host memory is never needed at once.
// Missing, mis-shaped or non-float tensors give one error naming each, before any is read;
// non-finite values one error naming each after the last (`each` has seen them by then: a
// caller writes where a failure leaves nothing, or keeps what it read until the end).
void read_tensors(const std::string& path, const std::vector<std::pair<std::string, Shape>>& wanted,
                  const std::function<void(size_t index, const std::vector<float>& values)>& each);

// Loads /optimizer into `opt`: the slice of each whole-model state tensor (of
// trainable_numel elements) that its Optimizer::state_pieces() hold (a sharded optimizer reads
// its shard only), and the step count. Missing or mis-shaped tensors, non-finite values and
// negative second moments are refused, named.
void load_optimizer_state(const std::string& path, Optimizer& opt, Context& ctx, int64_t trainable_numel);

// The root attributes (step and every free-form attribute).
CheckpointInfo read_checkpoint_info(const std::string& path);

// Reads the whole of `path` as a load would, without a model: its format and attributes, and
// every floating-point dataset (weights and optimizer state) in bounded pieces, each value
// finite (a checkpoint is never written with a non-finite one). Throws naming the first
// problem: a truncated or damaged file fails here rather than halfway through a resume.
void verify_checkpoint(const std::string& path);

// The sampler has no state but its config and the step (its windows are a function of
// (seed, step)): these record it as "data.*" attributes, and restore sampling and seed.
void add_sampler_state(CheckpointInfo& info, const SamplerConfig& cfg);
void restore_sampler_state(const CheckpointInfo& info, SamplerConfig& cfg);

}  // namespace pt::io
