#pragma once
// One optimisation step of the LM, shared by `paratrain train` and the benchmarks:
// zero_grad → forward → backward (gradient sync listening) → sync finish → clip → update.
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
  StepOutputs run(Context& ctx, const Tensor& ids, const Tensor& targets, float lr);

 private:
  TransformerLM& model_;
  Optimizer& optimizer_;
  parallel::GradSync& sync_;
  float max_grad_norm_;
  bool norm_overlap_decided_ = false;  // the first run() asks the optimizer to sum the norm during backward
};

}  // namespace pt
