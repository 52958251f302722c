#include "train/train_step.h"

#include "core/profiler.h"

namespace pt {

TrainStep::TrainStep(TransformerLM& model, Optimizer& optimizer, parallel::GradSync& sync, float max_grad_norm)
    : model_(model), optimizer_(optimizer), sync_(sync), max_grad_norm_(max_grad_norm) {
  model_.store().add_listener(&sync_);  // a sync with collectives has already added itself
}

TrainStep::~TrainStep() {
  model_.store().remove_listener(&sync_);
}

StepOutputs TrainStep::run(Context& ctx, const Tensor& ids, const Tensor& targets, float lr) {
  StepOutputs out;
  if (!norm_overlap_decided_) {
    if (!sync_.changes_gradients()) optimizer_.overlap_norm_with_backward(ctx, model_.store());
    norm_overlap_decided_ = true;
  }
  model_.store().zero_grad(ctx);
  sync_.begin_step(ctx);
  out.loss = model_.forward(ctx, ids, targets, /*save_for_backward=*/true);
  model_.backward(ctx);
  {
    NvtxRange r("gradient sync");
    sync_.finish(ctx);
  }
  NvtxRange r("optimizer step");
  out.grad_sumsq = optimizer_.clip_grad_norm(ctx, max_grad_norm_);
  optimizer_.step(ctx, lr);
  return out;
}

}  // namespace pt
