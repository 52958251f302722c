#include "core/profiler.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>

#include "core/context.h"
#include "core/error.h"
#include "core/tensor.h"

namespace pt {

const char* op_family_name(OpFamily f) {
  static const char* names[] = {"matmul", "attention", "softmax",       "normalization", "elementwise",
                                "loss",   "optimizer", "communication", "other"};
  return names[static_cast<int>(f)];
}

NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }

OpCost& OpCost::read(const Tensor& t) {
  bytes += static_cast<double>(t.nbytes());
  return *this;
}
OpCost& OpCost::write(const Tensor& t) { return read(t); }
OpCost& OpCost::update(const Tensor& t) {
  bytes += 2.0 * static_cast<double>(t.nbytes());
  return *this;
}

double RooflineRates::compute_s(const OpCost& c) const {
  if (flops_per_s <= 0) return 0;
  const double fp8_rate = fp8_flops_per_s > 0 ? fp8_flops_per_s : flops_per_s;
  return (c.flops - c.fp8_flops) / flops_per_s + c.fp8_flops / fp8_rate;
}

double RooflineRates::floor_ms(const OpCost& c) const {
  const double memory = bytes_per_s > 0 ? c.bytes / bytes_per_s : 0;
  return 1e3 * std::max(compute_s(c), memory);
}

bool RooflineRates::compute_bound(const OpCost& c) const {
  if (flops_per_s <= 0) return false;
  const double memory = bytes_per_s > 0 ? c.bytes / bytes_per_s : 0;
  return compute_s(c) > memory;
}

KernelTimer::KernelTimer(const Context& ctx, RooflineRates rates) : cuda_(ctx.is_cuda()), rates_(rates) {
  sums_.assign(1, std::vector<Sums>(kOpFamilies));
}

KernelTimer::~KernelTimer() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void KernelTimer::set_phase(const std::string& phase) {
  for (size_t i = 0; i < phases_.size(); ++i)
    if (phases_[i] == phase) {
      phase_ = static_cast<int>(i);
      return;
    }
  phases_.push_back(phase);
  sums_.emplace_back(kOpFamilies);
  phase_ = static_cast<int>(phases_.size()) - 1;
}

int KernelTimer::next_event() {
  if (events_used_ == static_cast<int>(events_.size())) {
    cudaEvent_t e;
    PT_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  return events_used_++;
}

void KernelTimer::begin(OpFamily family, cudaStream_t stream, const OpCost& cost) {
  if (depth_++ > 0) return;
  open_family_ = family;
  // The cost is known now; only the time waits for the events.
  Sums& s = sums_[phase_][static_cast<int>(family)];
  s.flops += cost.flops;
  s.fp8_flops += cost.fp8_flops;
  s.bytes += cost.bytes;
  const double floor = rates_.floor_ms(cost);
  s.floor_ms += floor;
  if (rates_.compute_bound(cost)) s.compute_floor_ms += floor;
  if (cuda_) {
    open_start_ = next_event();
    PT_CUDA_CHECK(cudaEventRecord(events_[open_start_], stream));
  } else {
    open_t0_ = std::chrono::steady_clock::now();
  }
}

void KernelTimer::end(cudaStream_t stream) {
  if (--depth_ > 0) return;
  Sums& s = sums_[phase_][static_cast<int>(open_family_)];
  if (cuda_) {
    int e = next_event();
    PT_CUDA_CHECK(cudaEventRecord(events_[e], stream));
    pending_.push_back({open_start_, e, phase_, open_family_});
  } else {
    s.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - open_t0_).count();
    s.count += 1;
  }
}

std::vector<KernelTimer::Entry> KernelTimer::collect() {
  for (const Pending& p : pending_) {
    PT_CUDA_CHECK(cudaEventSynchronize(events_[p.end_event]));
    float ms = 0;
    PT_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[p.start_event], events_[p.end_event]));
    Sums& s = sums_[p.phase][static_cast<int>(p.family)];
    s.ms += ms;
    s.count += 1;
  }
  pending_.clear();
  events_used_ = 0;
  std::vector<Entry> out;
  for (size_t ph = 0; ph < phases_.size(); ++ph)
    for (int f = 0; f < kOpFamilies; ++f) {
      const Sums& s = sums_[ph][f];
      if (s.count > 0)
        out.push_back({phases_[ph], static_cast<OpFamily>(f), s.ms, s.count, s.flops, s.bytes, s.floor_ms,
                       s.compute_floor_ms, s.fp8_flops});
    }
  for (auto& row : sums_) std::fill(row.begin(), row.end(), Sums{});
  return out;
}

OpScope::OpScope(const Context& ctx, const char* name, OpFamily family, const OpCost& cost)
    : OpScope(ctx, name, family, ctx.stream(), cost) {}

OpScope::OpScope(const Context& ctx, const char* name, OpFamily family, cudaStream_t stream, const OpCost& cost)
    : range_(name), timer_(ctx.timer()), stream_(stream) {
  if (timer_) timer_->begin(family, stream_, cost);
}

OpScope::~OpScope() {
  if (timer_) timer_->end(stream_);
}

}  // namespace pt
