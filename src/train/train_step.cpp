#include "train/train_step.h"

#include "core/error.h"
#include "core/profiler.h"
#include "ops/elementwise.h"

namespace pt {

TrainStep::TrainStep(TransformerLM& model, Optimizer& optimizer, parallel::GradSync& sync, float max_grad_norm)
    : model_(model), optimizer_(optimizer), sync_(sync), max_grad_norm_(max_grad_norm) {
  model_.store().add_listener(&sync_);  // a sync with collectives has already added itself
}

TrainStep::~TrainStep() {
  model_.store().remove_listener(&sync_);
}

StepOutputs TrainStep::run(Context& ctx, const Tensor& ids, const Tensor& targets, float lr, int micro_batches) {
  const int64_t rows = ids.size(0);
  PT_CHECK(micro_batches >= 1 && rows % micro_batches == 0,
           "TrainStep: " + std::to_string(rows) + " rows do not split into " + std::to_string(micro_batches) +
               " micro-batches");
  StepOutputs out;
  if (!norm_overlap_decided_) {
    if (!sync_.changes_gradients()) optimizer_.overlap_norm_with_backward(ctx, model_.store());
    norm_overlap_decided_ = true;
  }
  model_.store().zero_grad(ctx, micro_batches);
  sync_.begin_step(ctx);
  const int64_t micro_rows = rows / micro_batches;
  for (int i = 0; i < micro_batches; ++i) {
    NvtxRange r(micro_batches > 1 ? "micro-batch" : "batch");
    const Tensor mi = ids.narrow(0, i * micro_rows, micro_rows), mt = targets.narrow(0, i * micro_rows, micro_rows);
    Tensor loss = model_.forward(ctx, mi, mt, /*save_for_backward=*/true, 1.0f / static_cast<float>(micro_batches));
    model_.backward(ctx);
    if (i == 0)
      out.loss = loss;
    else
      ops::add_inplace(ctx, out.loss, loss, 1.0f);
  }
  if (micro_batches > 1) ops::scale_inplace(ctx, out.loss, 1.0f / static_cast<float>(micro_batches));
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
