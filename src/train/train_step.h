#pragma once
// One optimisation step of the LM, shared by `paratrain train` and the benchmarks:
// zero_grad → (forward → backward) per micro-batch (gradient sync listening) → sync finish →
// clip → update.
#include "core/context.h"
#include "core/tensor.h"
#include "parallel/grad_sync.h"
#include "model/transformer.h"
#include "optim/optimizer.h"

namespace pt {

struct StepOutputs {
  Tensor loss;        // (1) fp32 on the device: this rank's mean loss
  Tensor grad_sumsq;  // (1) fp32 on the device: squared global gradient norm before clipping
};

class TrainStep {
 public:
  // max_grad_norm <= 0 disables clipping (the norm is still measured).
  TrainStep(TransformerLM& model, Optimizer& optimizer, parallel::GradSync& sync, float max_grad_norm);
  ~TrainStep();
  // ids, targets (B_local, T) int32 on the model's device. No host synchronisation.
  // micro_batches M > 1 (gradient accumulation, --grad-accum): the rows are M micro-batches of
  // B_local / M, run one after another into the same gradients, each loss gradient scaled by
  // 1/M, so the update is that of one batch of B_local rows; the gradients are final — and
  // synchronised over ranks — only in the last micro-batch's backward (no_sync before). The loss
  // is the mean of the micro-batches' means.
  StepOutputs run(Context& ctx, const Tensor& ids, const Tensor& targets, float lr, int micro_batches = 1);

 private:
  TransformerLM& model_;
  Optimizer& optimizer_;
  parallel::GradSync& sync_;
  float max_grad_norm_;
  bool norm_overlap_decided_ = false;  // the first run() asks the optimizer to sum the norm during backward
};

}  // namespace pt
