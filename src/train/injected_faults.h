#pragma once
// PARATRAIN_FAULT's nan-grad (core/fault_injection.h) in a training loop: a gradient listener
// that turns element 0 of one parameter's gradient into NaN on one step, as soon as backward
// makes that gradient final, before any sync or norm reads it.
#include <cstdint>
#include <string>

#include "core/context.h"
#include "model/param_store.h"

namespace pt {

class NanGradInjector : public GradReadyListener {
 public:
  // Does nothing unless PARATRAIN_FAULT asks for nan-grad; then PARAM must name a trainable
  // parameter of `store` (else one error listing where to find the names).
  NanGradInjector(Context& ctx, ParamStore& store);
  ~NanGradInjector() override;
  // Call before each step (1-based). It listens only on the step asked for, added last so it is
  // told first (ParamStore tells the last-added listener first).
  void before_step(int64_t step);
  void on_grad_ready(Parameter& p) override;

 private:
  Context& ctx_;
  ParamStore& store_;
  int64_t step_ = 0;
  std::string param_;
  bool listening_ = false;
};

// PARATRAIN_FAULT's signal:STEP:NAME: rank 0 (root) raises the signal on itself during step STEP
// (call it before the ranks agree on stopping); the others learn of it through that agreement.
void raise_injected_signal(int64_t step, bool root);

}  // namespace pt
