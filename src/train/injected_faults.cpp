#include "train/injected_faults.h"

#include <signal.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fault_injection.h"

namespace pt {

NanGradInjector::NanGradInjector(Context& ctx, ParamStore& store) : ctx_(ctx), store_(store) {
  const fault::Fault* f = fault::find("nan-grad");
  if (!f) return;
  bool found = false;
  for (const auto& p : store.params()) found = found || (p->name == f->param && p->trainable);
  PT_CHECK(found, "PARATRAIN_FAULT nan-grad: no trainable parameter '" + f->param +
                      "' (the names are those of a checkpoint's datasets)");
  step_ = f->step;
  param_ = f->param;
}

NanGradInjector::~NanGradInjector() { store_.remove_listener(this); }

void NanGradInjector::before_step(int64_t step) {
  if (step_ == 0) return;
  listening_ = step == step_;
  if (listening_) {
    store_.remove_listener(this);
    store_.add_listener(this);
  } else {
    store_.remove_listener(this);
  }
}

void NanGradInjector::on_grad_ready(Parameter& p) {
  if (!listening_ || p.name != param_) return;
  Tensor nan = Tensor::empty({1}, p.grad().dtype(), Device::cpu(), "injected_nan");
  switch (nan.dtype()) {
    case DType::F32: *nan.data_as<float>() = std::numeric_limits<float>::quiet_NaN(); break;
    case DType::F64: *nan.data_as<double>() = std::numeric_limits<double>::quiet_NaN(); break;
    case DType::BF16: *nan.data_as<uint16_t>() = 0x7FC0; break;
    case DType::F16: *nan.data_as<uint16_t>() = 0x7E00; break;
    default: PT_FAIL("nan-grad: gradient of '" + p.name + "' is not floating point");
  }
  p.grad().reshape({-1}).narrow(0, 0, 1).copy_from(nan, ctx_);
}

void raise_injected_signal(int64_t step, bool root) {
  const fault::Fault* f = fault::find("signal");
  if (f && root && f->step == step) ::raise(f->signal);
}

}  // namespace pt
