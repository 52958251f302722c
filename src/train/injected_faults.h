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

}  // namespace pt
