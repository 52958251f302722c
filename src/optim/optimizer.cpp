#include "optim/optimizer.h"
#include "core/enum_names.h"

#include <cuda_runtime_api.h>

#include <cmath>

#include "core/error.h"
#include "core/profiler.h"
#include "ops/elementwise.h"

namespace pt {

std::vector<Parameter*> trainable_params(const ParamStore& store) {
  std::vector<Parameter*> out;
  for (const auto& p : store.params())
    if (p->trainable) out.push_back(p.get());
  return out;
}

namespace {
FlatRange make_range(const ParamStore& store, int64_t param_begin, int64_t grad_begin, int64_t n) {
  FlatRange r;
  r.param = store.flat_params().narrow(0, param_begin, n);
  r.grad = store.flat_grads().narrow(0, grad_begin, n);
  if (store.has_lowp()) r.param_lowp = store.flat_lowp().narrow(0, param_begin, n);
  r.grad_begin = grad_begin;
  r.store = &store;
  r.param_begin = param_begin;
  return r;
}
}  // namespace

std::vector<FlatRange> contiguous_ranges(const std::vector<Parameter*>& params) {
  std::vector<FlatRange> out;
  int64_t p0 = 0, g0 = 0, n = 0;
  const ParamStore* store = nullptr;
  for (Parameter* p : params) {
    if (!p->trainable || p->numel == 0) continue;
    if (store && &p->store() == store && p->offset == p0 + n && p->grad_offset == g0 + n) {
      n += p->numel;
      continue;
    }
    if (store) out.push_back(make_range(*store, p0, g0, n));
    store = &p->store();
    p0 = p->offset;
    g0 = p->grad_offset;
    n = p->numel;
  }
  if (store) out.push_back(make_range(*store, p0, g0, n));
  return out;
}

std::vector<FlatRange> chunked_ranges(const std::vector<Parameter*>& params, int64_t min_numel) {
  PT_CHECK(min_numel >= 1, "chunked_ranges: min_numel must be at least 1");
  std::vector<FlatRange> out;
  std::vector<Parameter*> chunk;
  int64_t n = 0;
  for (Parameter* p : params) {
    if (!p->trainable || p->numel == 0) continue;
    chunk.push_back(p);
    n += p->numel;
    if (n >= min_numel) {
      for (FlatRange& r : contiguous_ranges(chunk)) out.push_back(r);
      chunk.clear();
      n = 0;
    }
  }
  for (FlatRange& r : contiguous_ranges(chunk)) out.push_back(r);
  return out;
}

std::vector<FlatRange> ranges_of_grad_slice(const ParamStore& store, int64_t grad_begin, int64_t grad_end) {
  PT_CHECK(0 <= grad_begin && grad_begin <= grad_end && grad_end <= store.grad_numel(),
           "ranges_of_grad_slice: [" + std::to_string(grad_begin) + ", " + std::to_string(grad_end) +
               ") outside the gradient buffer");
  std::vector<FlatRange> out;
  int64_t p0 = 0, g0 = 0, n = 0;
  bool open = false;
  for (const auto& pp : store.params()) {
    const Parameter& p = *pp;
    if (!p.trainable) continue;
    const int64_t lo = std::max(grad_begin, p.grad_offset);
    const int64_t hi = std::min(grad_end, p.grad_offset + p.numel);
    if (lo >= hi) continue;
    const int64_t param_lo = p.offset + (lo - p.grad_offset);
    if (open && param_lo == p0 + n && lo == g0 + n) {
      n += hi - lo;
      continue;
    }
    if (open) out.push_back(make_range(store, p0, g0, n));
    p0 = param_lo;
    g0 = lo;
    n = hi - lo;
    open = true;
  }
  if (open) out.push_back(make_range(store, p0, g0, n));
  return out;
}

namespace {
constexpr EnumName<OptimizerKind> kOptimizerKinds[] = {{OptimizerKind::AdamW, "adamw"}, {OptimizerKind::SGD, "sgd"}};
}

OptimizerKind optimizer_kind_from_name(const std::string& name) {
  return enum_from_name(kOptimizerKinds, name, "the optimizer");
}
const char* optimizer_kind_name(OptimizerKind k) { return enum_name(kOptimizerKinds, k); }

// The squared norm's accumulator: fp64 for fp64 gradients (the CPU's tests), else fp32 (bf16
// gradients too: their squares are summed in fp32).
DType Optimizer::norm_dtype() const {
  return !ranges_.empty() && ranges_.front().grad.dtype() == DType::F64 ? DType::F64 : DType::F32;
}

Tensor Optimizer::clip_grad_norm(Context& ctx, float max_norm) {
  Tensor sumsq = Tensor::zeros({1}, norm_dtype(), ctx, "grad_sumsq");
  if (!(norm_overlap_ && norm_overlap_->take(ctx, sumsq)))
    for (const FlatRange& r : ranges_) ops::squared_norm_accumulate(ctx, sumsq, r.grad);
  reduce_sumsq(ctx, sumsq);
  drop_folded_clip();
  // The next step() always reads the norm: to clip (fused, max_norm > 0) and to leave every
  // parameter as it is when the norm is not finite (GradClip's guard).
  clip_sumsq_ = sumsq;
  clip_max_norm_ = max_norm > 0 && cfg_.fused ? max_norm : kNoClip;
  if (max_norm > 0 && !cfg_.fused)
    for (FlatRange& r : ranges_) ops::clip_by_norm(ctx, r.grad, sumsq, max_norm);
  return sumsq;
}

bool Optimizer::overlap_norm_with_backward(Context& ctx, ParamStore& store) {
  if (norm_overlap_) return true;
  if (!ctx.is_cuda() || !cfg_.fused || ranges_.empty()) return false;
  int64_t covered = 0;
  for (const FlatRange& r : ranges_) covered += r.grad.numel();
  if (covered != store.grad_numel()) return false;  // a shard: its norm needs the other ranks'
  norm_overlap_ = std::make_unique<GradNormOverlap>(ctx, store, norm_dtype());
  return true;
}

void Optimizer::use_device_scalars(Context& ctx) {
  PT_CHECK(ctx.is_cuda(), "device scalars are for the GPU");
  if (!device_scalars_.defined()) TrackingAllocator::Scope scope("optimizer", MemCategory::OptimizerState);
  device_scalars_ = Tensor::zeros({16}, DType::F32, ctx, "step_scalars");
}

void Optimizer::stage_step(Context& ctx, float lr) {
  PT_CHECK(device_scalars_.defined(), "stage_step: call use_device_scalars first");
  // Pageable host memory: cudaMemcpyAsync copies it to a staging buffer before returning, so
  // the locals may go; the device copy runs in stream order before the step's kernels.
  if (cfg_.kind == OptimizerKind::AdamW) {
    ops::AdamWHyper h = cfg_.adamw;
    h.lr = lr;
    h.step = steps_ + 1;
    const AdamWStepScalars s = ops::adamw_step_scalars(h);
    PT_CUDA_CHECK(cudaMemcpyAsync(device_scalars_.data(), &s, sizeof s, cudaMemcpyHostToDevice, ctx.stream()));
  } else {
    const SgdStepScalars s{lr};
    PT_CUDA_CHECK(cudaMemcpyAsync(device_scalars_.data(), &s, sizeof s, cudaMemcpyHostToDevice, ctx.stream()));
  }
  staged_ = true;
}

ops::DeviceScalars Optimizer::take_device_scalars(Context& ctx, float lr) {
  if (!device_scalars_.defined()) return {};
  if (!staged_) stage_step(ctx, lr);
  staged_ = false;
  return {&device_scalars_};
}

void Optimizer::begin_update(Context&, float) { PT_FAIL("this optimizer does not update range by range"); }
void Optimizer::update_range(Context&, size_t, cudaStream_t) {
  PT_FAIL("this optimizer does not update range by range");
}
void Optimizer::end_update(Context&) { PT_FAIL("this optimizer does not update range by range"); }

void Optimizer::cast_mirrors(Context& ctx) {
  if (cfg_.fused) return;  // the update wrote them
  for (FlatRange& r : ranges_)
    if (r.param_lowp.defined()) {
      ops::cast(ctx, r.param_lowp, r.param);
      cast_fp8_weights(ctx, r, nullptr, false);
    }
}

namespace {

// An optimizer whose update is one pass per range (AdamW, SGD): step() is begin_update, every
// range on the compute stream, end_update; the subclass updates one range's values
// (update_values). When the pass writes the mirror it measures the amax of the kept FP8 weights
// it meets instead of their bf16 copies, and those that end in the range are cast after it
// (cast_mirrors makes both, with amax passes, after an unfused update).
class RangeOptimizer : public Optimizer {
 public:
  using Optimizer::Optimizer;
  void update_range(Context& ctx, size_t i, cudaStream_t stream) final {
    FlatRange& r = ranges_.at(i);
    const bool fused = mirror_in_update(r) != nullptr;
    const Fp8WeightRuns runs =
        fused && r.store ? r.store->fp8_update_runs(r.param_begin, r.param_begin + r.param.numel()) : Fp8WeightRuns{};
    update_values(ctx, i, stream, runs);
    if (fused) cast_fp8_weights(ctx, r, stream, true);
  }
  void step(Context& ctx, float lr) override {
    begin_update(ctx, lr);
    for (size_t i = 0; i < ranges_.size(); ++i) update_range(ctx, i, nullptr);
    end_update(ctx);
  }
  bool splits_by_range() const override { return true; }
  void begin_update(Context& ctx, float lr) override {
    device_ = take_device_scalars(ctx, lr);
    ++steps_;
    lr_ = lr;
  }
  void end_update(Context& ctx) override {
    drop_folded_clip();
    cast_mirrors(ctx);
  }

 protected:
  virtual void update_values(Context& ctx, size_t i, cudaStream_t stream, const Fp8WeightRuns& runs) = 0;
  float lr_ = 0;  // the step begin_update took (steps_ counts it)
  ops::DeviceScalars device_;
};

// AdamW with first and second moments kept in two flat buffers laid out in range order.
class AdamW final : public RangeOptimizer {
 public:
  AdamW(const OptimizerConfig& cfg, Context& ctx, const std::vector<FlatRange>& ranges) : RangeOptimizer(cfg, ctx) {
    add_ranges(ranges);
  }

  void add_ranges(const std::vector<FlatRange>& ranges) override {
    TrackingAllocator::Scope scope("optimizer", MemCategory::OptimizerState);
    for (const FlatRange& r : ranges) {
      ranges_.push_back(r);
      m_.push_back(Tensor::zeros({r.param.numel()}, r.param.dtype(), ctx_, "exp_avg"));
      v_.push_back(Tensor::zeros({r.param.numel()}, r.param.dtype(), ctx_, "exp_avg_sq"));
    }
  }

  void update_values(Context& ctx, size_t i, cudaStream_t stream, const Fp8WeightRuns& runs) override {
    ops::AdamWHyper h = cfg_.adamw;
    h.lr = lr_;
    h.step = steps_;
    FlatRange& r = ranges_.at(i);
    ops::adamw_step(ctx, r.param, r.grad, m_[i], v_[i], h, mirror_in_update(r), folded_clip(), device_, stream, runs);
  }

  std::vector<std::pair<std::string, Tensor>> state() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (size_t i = 0; i < ranges_.size(); ++i) {
      out.emplace_back("exp_avg." + std::to_string(i), m_[i]);
      out.emplace_back("exp_avg_sq." + std::to_string(i), v_[i]);
    }
    return out;
  }

  std::vector<StatePiece> state_pieces() override {
    std::vector<StatePiece> out;
    for (size_t i = 0; i < ranges_.size(); ++i) {
      out.push_back({"exp_avg", ranges_[i].grad_begin, m_[i]});
      out.push_back({"exp_avg_sq", ranges_[i].grad_begin, v_[i]});
    }
    return out;
  }

  int64_t state_bytes() const override {
    int64_t b = 0;
    for (size_t i = 0; i < m_.size(); ++i) b += static_cast<int64_t>(m_[i].nbytes() + v_[i].nbytes());
    return b;
  }

 private:
  std::vector<Tensor> m_, v_;  // (range numel) each, the parameters' dtype
};

class SGD final : public RangeOptimizer {
 public:
  SGD(const OptimizerConfig& cfg, Context& ctx, const std::vector<FlatRange>& ranges) : RangeOptimizer(cfg, ctx) {
    add_ranges(ranges);
  }
  void add_ranges(const std::vector<FlatRange>& ranges) override {
    ranges_.insert(ranges_.end(), ranges.begin(), ranges.end());
  }
  void update_values(Context& ctx, size_t i, cudaStream_t stream, const Fp8WeightRuns& runs) override {
    FlatRange& r = ranges_.at(i);
    ops::sgd_step(ctx, r.param, r.grad, lr_, cfg_.sgd_weight_decay, mirror_in_update(r), folded_clip(), device_, stream,
                  runs);
  }
  std::vector<std::pair<std::string, Tensor>> state() override { return {}; }
  int64_t state_bytes() const override { return 0; }
};

}  // namespace

std::vector<Optimizer::StatePiece> Optimizer::state_pieces() {
  std::vector<StatePiece> out;
  for (auto& [name, t] : state()) out.push_back({name, 0, t});
  return out;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Context& ctx,
                                          const std::vector<FlatRange>& ranges) {
  switch (cfg.kind) {
    case OptimizerKind::AdamW: return std::make_unique<AdamW>(cfg, ctx, ranges);
    case OptimizerKind::SGD: return std::make_unique<SGD>(cfg, ctx, ranges);
  }
  PT_FAIL("unknown optimizer kind");
}

double cosine_lr(int64_t t, double max_lr, double min_lr, int64_t warmup, int64_t cycle) {
  if (t < warmup) return max_lr * static_cast<double>(t) / static_cast<double>(warmup);
  if (t <= cycle) {
    if (cycle == warmup) return min_lr;
    const double progress = static_cast<double>(t - warmup) / static_cast<double>(cycle - warmup);
    return min_lr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (max_lr - min_lr);
  }
  return min_lr;
}

}  // namespace pt
