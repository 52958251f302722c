#include "model/param_store.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/profiler.h"
#include "ops/elementwise.h"
#include "ops/fp8.h"

namespace pt {

Tensor Parameter::data() const {
  PT_CHECK(store_ && store_->finalized(), "parameter '" + name + "' used before ParamStore::finalize");
  return store_->flat_params().narrow(0, offset, numel).reshape(shape);
}

Tensor Parameter::grad() const {
  if (!trainable) return Tensor();
  PT_CHECK(store_ && store_->finalized(), "parameter '" + name + "' used before ParamStore::finalize");
  return store_->flat_grads().narrow(0, grad_offset, numel).reshape(shape);
}

Tensor Parameter::data_lowp() const {
  if (!store_ || !store_->has_lowp()) return Tensor();
  PT_CHECK(fp8_run < 0 || !store_->keeps_fp8_run(fp8_run),
           "parameter '" + name + "' has no bf16 copy: its mirror bytes hold its FP8 casts");
  return store_->flat_lowp().narrow(0, offset, numel).reshape(shape);
}

Parameter& ParamStore::add(const std::string& name, const Shape& shape, bool trainable) {
  PT_CHECK(!finalized_, "ParamStore::add('" + name + "') after finalize");
  PT_CHECK(by_name_.count(name) == 0, "duplicate parameter name '" + name + "'");
  auto p = std::make_unique<Parameter>();
  p->name = name;
  p->shape = shape;
  p->numel = shape_numel(shape);
  p->offset = numel_;
  p->trainable = trainable;
  p->index = static_cast<int>(params_.size());
  p->store_ = this;
  numel_ += p->numel;
  if (trainable) {
    p->grad_offset = grad_numel_;
    grad_numel_ += p->numel;
  }
  params_.push_back(std::move(p));
  by_name_.emplace(name, params_.back().get());
  return *params_.back();
}

Parameter* ParamStore::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

void ParamStore::add_fp8_weight(const std::vector<Parameter*>& run) {
  PT_CHECK(!finalized_, "ParamStore::add_fp8_weight after finalize");
  PT_CHECK(!run.empty(), "add_fp8_weight: no parameters");
  const Parameter& first = *run.front();
  Fp8Run r;
  r.offset = first.offset;
  r.cols = first.shape.size() == 2 ? first.shape[1] : 0;
  for (Parameter* p : run) {  // checked whole before any parameter joins
    PT_CHECK(p->store_ == this && p->fp8_run < 0, "add_fp8_weight: '" + p->name + "' is in a run already");
    PT_CHECK(p->shape.size() == 2 && p->shape[1] == r.cols && p->offset == r.offset + r.rows * r.cols,
             "add_fp8_weight: '" + p->name + "' is not a 2-D weight adjacent to '" + first.name + "' with its columns");
    r.rows += p->shape[0];
  }
  for (Parameter* p : run) p->fp8_run = static_cast<int>(fp8_runs_.size());
  fp8_runs_.push_back(r);
}

bool ParamStore::keep_fp8_run(size_t i) {
  Fp8Run& r = fp8_runs_[i];
  const int64_t n = r.rows * r.cols;
  // Stored at byte 2·offset, transposed at 2·offset + n: both must start on 16 bytes.
  if ((2 * r.offset) % 16 != 0 || n % 16 != 0 || n == 0) return false;
  char* base = static_cast<char*>(flat_lowp_.data()) + 2 * r.offset;
  r.casts.format = Fp8Format::E4M3;
  r.casts.stored = Tensor::view_of(base, {r.rows, r.cols}, DType::F8E4M3, device_);
  r.casts.transposed = Tensor::view_of(base + n, {r.cols, r.rows}, DType::F8E4M3, device_);
  // Each scalar on its own 16-byte boundary (ops::kFp8ScalarStride).
  r.casts.amax = fp8_scalars_.narrow(0, ops::kFp8ScalarStride * int64_t(i), 1);
  r.casts.scale_inv = fp8_scalars_.narrow(0, ops::kFp8ScalarStride * int64_t(fp8_runs_.size() + i), 1);
  return true;
}

const ops::Fp8Operand* ParamStore::fp8_weight(const Parameter& first) const {
  if (!keeps_fp8_ || first.fp8_run < 0) return nullptr;
  const Fp8Run& r = fp8_runs_[size_t(first.fp8_run)];
  PT_CHECK(r.offset == first.offset, "fp8_weight: '" + first.name + "' does not begin its FP8 weight run");
  return r.casts.stored.defined() ? &r.casts : nullptr;
}

bool ParamStore::keeps_fp8_run(int run) const { return keeps_fp8_ && fp8_runs_.at(size_t(run)).casts.stored.defined(); }

void ParamStore::drop_fp8_weights(Context& ctx) {
  if (!keeps_fp8_) return;
  keeps_fp8_ = false;
  for (Fp8Run& r : fp8_runs_) r.casts = ops::Fp8Operand();
  fp8_scalars_ = fp8_run_bounds_ = Tensor();
  refresh_lowp(ctx);
}

std::pair<size_t, size_t> ParamStore::fp8_runs_ending_in(int64_t begin, int64_t end) const {
  const auto run_end = [](const Fp8Run& r) { return r.offset + r.rows * r.cols; };
  const auto first =
      std::partition_point(fp8_runs_.begin(), fp8_runs_.end(), [&](const Fp8Run& r) { return run_end(r) <= begin; });
  const auto last = std::partition_point(first, fp8_runs_.end(), [&](const Fp8Run& r) { return run_end(r) <= end; });
  return {size_t(first - fp8_runs_.begin()), size_t(last - fp8_runs_.begin())};
}

Fp8WeightRuns ParamStore::fp8_update_runs(int64_t begin, int64_t end) const {
  Fp8WeightRuns out;
  if (!keeps_fp8_ || begin >= end) return out;
  const auto [first, ended] = fp8_runs_ending_in(begin, end);
  size_t last = ended;  // past the runs that begin in the range (the last may end beyond it)
  while (last < fp8_runs_.size() && fp8_runs_[last].offset < end) ++last;
  for (size_t i = first; i < last; ++i) {
    const Fp8Run& r = fp8_runs_[i];
    if (r.casts.stored.defined()) out.elements += std::min(end, r.offset + r.rows * r.cols) - std::max(begin, r.offset);
  }
  if (out.elements == 0) return out;
  out.bounds = fp8_run_bounds_.data_as<const int64_t>() + 2 * first;
  out.amax = fp8_scalars_.data_as<float>() + ops::kFp8ScalarStride * int64_t(first);
  out.count = static_cast<int>(last - first);
  out.amax_stride = static_cast<int>(ops::kFp8ScalarStride);
  out.zero_from = fp8_runs_[first].offset < begin ? 1 : 0;
  out.base = begin;
  return out;
}

void ParamStore::cast_fp8_weights(Context& ctx, int64_t begin, int64_t end, cudaStream_t stream,
                                  bool amax_measured) const {
  if (!keeps_fp8_) return;
  const auto [first, last] = fp8_runs_ending_in(begin, end);
  for (size_t i = first; i < last; ++i) {
    const Fp8Run& r = fp8_runs_[i];
    if (!r.casts.stored.defined()) continue;
    const Tensor w = flat_params_.narrow(0, r.offset, r.rows * r.cols).reshape({r.rows, r.cols});
    ops::Fp8Operand o = r.casts;  // views of the store's bytes
    ops::fp8_cast_weight(ctx, o.stored, o.transposed, o.scale_inv, o.amax, w, stream, amax_measured);
  }
}

void ParamStore::finalize(Context& ctx, bool lowp_mirror, DType dtype) {
  PT_CHECK(!finalized_, "ParamStore::finalize called twice");
  PT_CHECK(dtype == DType::F32 || (dtype == DType::F64 && ctx.device().is_cpu()),
           std::string("parameters must be fp32 (fp64 only on the CPU), got ") + dtype_name(dtype));
  device_ = ctx.device();
  dtype_ = dtype;
  flat_params_ = Tensor::empty({numel_}, dtype, device_, "params", MemCategory::Parameters);
  fill_zero(ctx, flat_params_.data(), device_.kind, flat_params_.nbytes());
  // fp32 parameters take the context's gradient type (bf16 with --grad-dtype bf16); fp64 ones
  // (the CPU's finite-difference tests) keep fp64 gradients.
  const DType grad_dtype = dtype == DType::F32 ? ctx.grad_dtype() : dtype;
  flat_grads_ = Tensor::empty({grad_numel_}, grad_dtype, device_, "grads", MemCategory::Gradients);
  fill_zero(ctx, flat_grads_.data(), device_.kind, flat_grads_.nbytes());
  if (lowp_mirror) {
    PT_CHECK(device_.is_cuda(), "the bf16 parameter mirror needs a CUDA device");
    flat_lowp_ = Tensor::empty({numel_}, DType::BF16, device_, "params_bf16", MemCategory::Parameters);
  }
  finalized_ = true;
  // Runs in offset order (fp8_runs_ending_in): a layer may register its weights in another.
  std::vector<size_t> order(fp8_runs_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return fp8_runs_[a].offset < fp8_runs_[b].offset; });
  std::vector<Fp8Run> sorted;
  std::vector<int> index_of(fp8_runs_.size());
  for (size_t i = 0; i < order.size(); ++i) {
    sorted.push_back(fp8_runs_[order[i]]);
    index_of[order[i]] = static_cast<int>(i);
  }
  fp8_runs_ = std::move(sorted);
  for (auto& p : params_)
    if (p->fp8_run >= 0) p->fp8_run = index_of[size_t(p->fp8_run)];
  if (lowp_mirror && ctx.fp8_linear() && ctx.fp8_reuse() && !fp8_runs_.empty()) {
    fp8_scalars_ = Tensor::empty({2 * ops::kFp8ScalarStride * int64_t(fp8_runs_.size())}, DType::F32, device_,
                                 "fp8_weight_scalars", MemCategory::Parameters);
    fill_zero(ctx, fp8_scalars_.data(), device_.kind, fp8_scalars_.nbytes());
    std::vector<int64_t> bounds;
    for (size_t i = 0; i < fp8_runs_.size(); ++i) {
      keeps_fp8_ = keep_fp8_run(i) || keeps_fp8_;
      const Fp8Run& r = fp8_runs_[i];
      const int64_t end = r.offset + r.rows * r.cols;
      bounds.push_back(r.casts.stored.defined() ? r.offset : end);  // a run not kept: empty, its copy written
      bounds.push_back(end);
    }
    fp8_run_bounds_ =
        Tensor::empty({int64_t(bounds.size())}, DType::I64, device_, "fp8_weight_run_bounds", MemCategory::Parameters);
    copy_bytes(ctx, fp8_run_bounds_.data(), device_.kind, bounds.data(), DeviceKind::CPU, fp8_run_bounds_.nbytes());
  }
  if (lowp_mirror) refresh_lowp(ctx);
}

void ParamStore::zero_grad(Context& ctx, int micro_batches) {
  PT_CHECK(micro_batches >= 1, "zero_grad: micro_batches must be at least 1");
  micro_batches_ = micro_batches;
  ++steps_;
  // Runs of adjacent gradients to zero, in gradient-buffer order (registration order).
  std::vector<std::pair<int64_t, int64_t>> runs;  // [begin, end) in elements
  int64_t zeroed = 0;
  for (auto& p : params_) {
    p->contributions_ = 0;
    if (!zeroed_by_zero_grad(*p)) continue;
    if (read_listener_) read_listener_->before_grad_write(*p);
    if (runs.empty() || runs.back().second != p->grad_offset) runs.push_back({p->grad_offset, p->grad_offset});
    runs.back().second = p->grad_offset + p->numel;
    zeroed += p->numel;
  }
  if (runs.empty()) return;
  // One op in the kernel-time breakdown and the roofline (the fills were invisible there when
  // they covered the whole buffer: 4–8 GB a step for XL).
  const size_t elem = dtype_size(flat_grads_.dtype());
  OpCost cost;
  cost.bytes = static_cast<double>(zeroed) * static_cast<double>(elem);
  OpScope scope(ctx, "zero_grad", OpFamily::Elementwise, cost);
  for (const auto& [begin, end] : runs)
    fill_zero(ctx, static_cast<char*>(flat_grads_.data()) + begin * static_cast<int64_t>(elem), device_.kind,
              static_cast<size_t>(end - begin) * elem);
}

float ParamStore::grad_beta(const Parameter& p) const {
  return p.contributions_ == 0 && !zeroed_by_zero_grad(p) ? 0.0f : 1.0f;
}

float ParamStore::grad_beta(const std::vector<Parameter*>& ps) const {
  PT_CHECK(!ps.empty(), "grad_beta: no parameters");
  const float beta = grad_beta(*ps.front());
  for (const Parameter* p : ps)
    PT_CHECK(grad_beta(*p) == beta, "parameters '" + ps.front()->name + "' and '" + p->name +
                                        "' share a GEMM but are at different gradient contributions");
  return beta;
}

void ParamStore::refresh_lowp(Context& ctx) {
  if (!has_lowp()) return;
  about_to_read_all();
  ops::cast(ctx, flat_lowp_, flat_params_);
  cast_fp8_weights(ctx, 0, numel_);  // over the bf16 copies the cast just wrote into the runs' bytes
}

void ParamStore::add_listener(GradReadyListener* l) {
  if (l && std::find(listeners_.begin(), listeners_.end(), l) == listeners_.end()) listeners_.push_back(l);
}

void ParamStore::remove_listener(GradReadyListener* l) {
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), l), listeners_.end());
}

void ParamStore::grad_contributed(Parameter& p) {
  if (!p.trainable) return;
  ++p.contributions_;
  PT_CHECK(p.contributions_ <= p.uses * micro_batches_,
           "parameter '" + p.name + "' received more gradient contributions than it has uses");
  if (p.contributions_ == p.uses * micro_batches_)
    for (auto it = listeners_.rbegin(); it != listeners_.rend(); ++it) (*it)->on_grad_ready(p);
}

std::vector<double> ParamStore::params_to_host_f64(Context& ctx) const {
  about_to_read_all();
  return flat_params_.to_host_f64(ctx);
}

ParamStore::NonFinite ParamStore::first_nonfinite(Context& ctx, bool grads) const {
  if (!grads) about_to_read_all();
  const std::vector<double> host = (grads ? flat_grads_ : flat_params_).to_host_f64(ctx);
  for (const auto& up : params_) {
    const Parameter& p = *up;
    const int64_t offset = grads ? p.grad_offset : p.offset;
    if (offset < 0) continue;  // frozen: no gradient
    for (int64_t i = offset; i < offset + p.numel; ++i)
      if (!std::isfinite(host[size_t(i)])) return {&p, host[size_t(i)]};
  }
  return {};
}

std::vector<float> ParamStore::params_to_host(Context& ctx) const {
  about_to_read_all();
  return flat_params_.to_host_f32(ctx);
}

void ParamStore::params_from_host_f64(Context& ctx, const std::vector<double>& values) {
  PT_CHECK(static_cast<int64_t>(values.size()) == numel_, "params_from_host: " + std::to_string(values.size()) +
                                                              " values for " + std::to_string(numel_) + " parameters");
  about_to_read_all();  // nothing in flight may land on the loaded values
  Tensor host = Tensor::empty({numel_}, dtype_, Device::cpu(), "params_staging");
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype_ == DType::F64)
      host.data_as<double>()[i] = values[i];
    else
      host.data_as<float>()[i] = static_cast<float>(values[i]);
  }
  copy_bytes(ctx, flat_params_.data(), device_.kind, host.data(), DeviceKind::CPU, host.nbytes());
  refresh_lowp(ctx);
}

void ParamStore::params_from_host(Context& ctx, const std::vector<float>& values) {
  params_from_host_f64(ctx, std::vector<double>(values.begin(), values.end()));
}

}  // namespace pt
