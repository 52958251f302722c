#pragma once
// Optimizers over flat ranges of the parameter/gradient buffers: AdamW (torch semantics) and
// SGD. A range is a contiguous run of parameters; sharded optimizers hand in their shard.
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "model/param_store.h"
#include "ops/optim_kernels.h"
#include "optim/grad_norm_overlap.h"

namespace pt {

// A contiguous run of trainable parameters: 1-D fp32 views of equal length into the flat
// parameter and gradient buffers, plus the bf16 mirror when it exists.
struct FlatRange {
  Tensor param;
  Tensor grad;
  Tensor param_lowp;                  // undefined without a mirror
  int64_t grad_begin = 0;             // element offset of this range in the flat gradient buffer
  const ParamStore* store = nullptr;  // whose buffers these are views of
  int64_t param_begin = 0;            // element offset of this range in the flat parameter buffer
};

// Merges neighbouring parameters (adjacent in both flat buffers) into maximal ranges.
// Frozen parameters are skipped. For the Transformer this yields one range.
std::vector<FlatRange> contiguous_ranges(const std::vector<Parameter*>& params);
// The same ranges cut at parameter boundaries into chunks: a chunk closes once it holds at least
// min_numel elements, so each is min_numel plus less than one parameter (the last may be
// smaller). The deferred update's unit (optim/deferred_update.h).
std::vector<FlatRange> chunked_ranges(const std::vector<Parameter*>& params, int64_t min_numel);
std::vector<Parameter*> trainable_params(const ParamStore& store);
// The ranges covering gradient elements [grad_begin, grad_end) (ZeRO-1's shard), cutting
// parameters at the boundaries.
std::vector<FlatRange> ranges_of_grad_slice(const ParamStore& store, int64_t grad_begin, int64_t grad_end);

enum class OptimizerKind { AdamW, SGD };
OptimizerKind optimizer_kind_from_name(const std::string& name);  // "adamw" | "sgd"
const char* optimizer_kind_name(OptimizerKind k);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  ops::AdamWHyper adamw;  // lr here is the peak/base lr; step() takes the scheduled lr
  float sgd_weight_decay = 0.0f;
  // The optimizer's half of TransformerConfig::fused. On: the clip is folded into the update
  // and the update writes the bf16 mirror in the same pass. Off, as torch.nn.utils.
  // clip_grad_norm_ + optimizer.step() in eager PyTorch: clip_grad_norm rewrites the gradient
  // buffer in a pass of its own (ops::clip_by_norm), the update reads the stored gradients and
  // writes the fp32 parameters only, and a separate cast pass refreshes the bf16 mirror. The
  // same parameters either way. Sharded optimizers pass it to the optimizer they wrap and clip
  // their own ranges (the gradients this rank's update reads), so it holds for them too.
  bool fused = true;
};

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& cfg, Context& ctx) : cfg_(cfg), ctx_(ctx) {}
  virtual ~Optimizer() = default;
  // One update of every range with learning rate `lr`.
  virtual void step(Context& ctx, float lr) = 0;
  // The same update one range at a time, on any stream: what the deferred update runs as the
  // next forward reaches each range (optim/deferred_update.h). begin_update(ctx, lr) takes the
  // step: counts it, fixes its scalars and takes the folded clip; update_range(ctx, i, stream)
  // updates ranges()[i] on `stream` (null: the compute stream); end_update(ctx) releases the
  // clip and, unfused, refreshes the bf16 mirrors. AdamW's and SGD's step() is exactly these
  // three; the sharded optimizers, which exchange parameters after their update, do not split
  // (splits_by_range() false, the three fail).
  virtual bool splits_by_range() const { return false; }
  virtual void begin_update(Context& ctx, float lr);
  virtual void update_range(Context& ctx, size_t i, cudaStream_t stream);
  virtual void end_update(Context& ctx);
  // Adds ranges after construction (ZeroRedundancyOptimizer's add_param_group).
  virtual void add_ranges(const std::vector<FlatRange>& ranges) = 0;
  const std::vector<FlatRange>& ranges() const { return ranges_; }
  // Named state tensors for checkpoints (e.g. "exp_avg", "exp_avg_sq": flat, in range order).
  virtual std::vector<std::pair<std::string, Tensor>> state() = 0;
  // The state as pieces of whole-model tensors, which a checkpoint stores independently of the
  // sharding and rank count (optim/optimizer_state.h): for each kind of state ("exp_avg",
  // "exp_avg_sq"; SGD has none) and each range this optimizer updates, that range's state and
  // where the range starts in the gradient buffer. A sharded optimizer lists this rank's pieces;
  // over the ranks they cover every trainable element once. The default takes each state()
  // tensor as a whole-buffer piece starting at 0.
  struct StatePiece {
    std::string kind;
    int64_t grad_begin = 0;
    Tensor values;  // 1-D, contiguous, the parameters' dtype
  };
  virtual std::vector<StatePiece> state_pieces();
  virtual int64_t state_bytes() const = 0;
  int64_t steps_taken() const { return steps_; }
  // Global-norm clipping over this optimizer's ranges with coefficient
  // min(1, max_norm/(norm + 1e-6)); max_norm <= 0 only measures. Sharded optimizers sum the
  // squared norm over ranks first (reduce_sumsq), so every rank clips by the global norm.
  // Returns the pre-clip squared norm: a 1-element fp32 tensor on the device (no host sync).
  // Fused (OptimizerConfig::fused), the clip itself is folded into the next step(), which reads
  // each gradient scaled by the coefficient (GradClip): the parameters are those of
  // clip-then-step, but the gradient buffer keeps its unclipped values and is read once instead
  // of three times. Unfused, the gradient ranges are scaled here, in place.
  Tensor clip_grad_norm(Context& ctx, float max_norm);
  // The caller promises that nothing changes a gradient after `store` reports it final (no
  // data-parallel sync): clip_grad_norm then takes the squared norm summed during backward
  // (optim/grad_norm_overlap.h) instead of its own pass. Only on the GPU, fused
  // (--fused off keeps the pass as the comparison), and when this optimizer's ranges hold every
  // gradient of the store; otherwise a no-op. Returns whether the overlap is on.
  bool overlap_norm_with_backward(Context& ctx, ParamStore& store);
  void set_steps_taken(int64_t s) { steps_ = s; }
  // CUDA graphs (TrainStep with a graph): the per-step scalars of step() — the learning rate,
  // AdamW's bias corrections — kept in device memory, so an update captured in a graph reads
  // each replay's values (kernel arguments would keep the captured step's). stage_step(ctx, lr)
  // writes those of the next step (steps_taken() + 1) with an asynchronous copy on the compute
  // stream; the next step() uses them instead of writing its own. finish_replayed_step() counts a
  // step that a graph replay ran. The results are bit for bit those of kernel arguments.
  // Unsharded AdamW and SGD on the GPU.
  void use_device_scalars(Context& ctx);
  bool uses_device_scalars() const { return device_scalars_.defined(); }
  void stage_step(Context& ctx, float lr);
  void finish_replayed_step() {
    ++steps_;
    staged_ = false;
  }
  // Parameters step() left still arriving from other ranks (ZeRO-1's prefetched all-gathers):
  // the next forward waits for them itself, so between steps a benchmark synchronises with the
  // compute stream only — waiting for the communicator would hide what the gathers cost.
  virtual bool parameters_in_flight() const { return false; }
  // Bytes of parameters this rank's buffer sends or receives per step (a sharded optimizer's
  // broadcasts or gathers; 0 for one that updates every parameter itself).
  virtual int64_t parameter_bytes_communicated() const { return 0; }
  const OptimizerConfig& config() const { return cfg_; }

 protected:
  // The clip clip_grad_norm folded into this step (no clip when none), and its release at the
  // end of step(); a wrapping optimizer hands its clip to the optimizer it wraps.
  GradClip folded_clip() const { return {clip_sumsq_.defined() ? &clip_sumsq_ : nullptr, clip_max_norm_}; }
  void drop_folded_clip() { clip_sumsq_ = Tensor(); }
  void hand_folded_clip_to(Optimizer& inner) {
    inner.clip_sumsq_ = clip_sumsq_;
    inner.clip_max_norm_ = clip_max_norm_;
    drop_folded_clip();
  }
  // A sharded optimizer's update of this rank's ranges: `inner` (null when the rank owns none)
  // steps with this optimizer's step count and folded clip; the count advances either way.
  void step_wrapped(Optimizer* inner, Context& ctx, float lr) {
    if (inner) {
      inner->set_steps_taken(steps_);
      hand_folded_clip_to(*inner);
      inner->step(ctx, lr);
    }
    drop_folded_clip();
    ++steps_;
  }
  // The bf16 mirror an update writes in its own pass: the range's when fused, none unfused
  // (cast_mirrors then refreshes every range's mirror after the update, one cast each).
  Tensor* mirror_in_update(FlatRange& r) const {
    return cfg_.fused && r.param_lowp.defined() ? &r.param_lowp : nullptr;
  }
  void cast_mirrors(Context& ctx);
  // After range r's update: the store remakes the FP8 casts of the kept weights that end in r
  // (ParamStore::cast_fp8_weights), on the update's stream; amax_measured when the update took
  // r's fp8_update_runs.
  void cast_fp8_weights(Context& ctx, const FlatRange& r, cudaStream_t stream, bool amax_measured) const {
    if (r.store && r.param_lowp.defined())
      r.store->cast_fp8_weights(ctx, r.param_begin, r.param_begin + r.param.numel(), stream, amax_measured);
  }
  // For step(): the device scalars of this step (staged now unless stage_step did), or none.
  ops::DeviceScalars take_device_scalars(Context& ctx, float lr);

  OptimizerConfig cfg_;
  Context& ctx_;
  std::vector<FlatRange> ranges_;
  int64_t steps_ = 0;
  // Sum a partial squared norm over the ranks that share the parameters (sharded optimizers).
  virtual void reduce_sumsq(Context& ctx, Tensor& sumsq) {}
  DType norm_dtype() const;  // the squared norm's accumulator: fp32, fp64 for fp64 gradients

 private:
  Tensor clip_sumsq_;      // (1) fp32 on the device; undefined: no clip pending
  Tensor device_scalars_;  // (bytes) on the device: AdamWStepScalars or SgdStepScalars
  bool staged_ = false;    // stage_step wrote the next step's scalars
  float clip_max_norm_ = 0;
  std::unique_ptr<GradNormOverlap> norm_overlap_;  // null unless overlap_norm_with_backward
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Context& ctx,
                                          const std::vector<FlatRange>& ranges);

// Cosine schedule with linear warm-up (the course's get_lr_cosine_schedule):
// t < warmup: max_lr·t/warmup; warmup ≤ t ≤ cycle: min_lr + ½(1 + cos(π(t−warmup)/(cycle−warmup)))
// ·(max_lr − min_lr); t > cycle: min_lr.
double cosine_lr(int64_t t, double max_lr, double min_lr, int64_t warmup, int64_t cycle);

}  // namespace pt
