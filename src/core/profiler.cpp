#include "core/profiler.h"

#include <nvtx3/nvToolsExt.h>

#include "core/context.h"
#include "core/error.h"

namespace pt {

const char* op_family_name(OpFamily f) {
  static const char* names[] = {"matmul", "attention", "softmax", "normalization", "elementwise",
                                "loss", "optimizer", "communication", "other"};
  return names[static_cast<int>(f)];
}

NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }

KernelTimer::KernelTimer(const Context& ctx) : cuda_(ctx.is_cuda()) {
  ms_.assign(1, std::vector<double>(kOpFamilies, 0.0));
  counts_.assign(1, std::vector<int64_t>(kOpFamilies, 0));
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
  ms_.emplace_back(kOpFamilies, 0.0);
  counts_.emplace_back(kOpFamilies, 0);
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

void KernelTimer::begin(OpFamily family, cudaStream_t stream) {
  if (depth_++ > 0) return;
  open_family_ = family;
  if (cuda_) {
    open_start_ = next_event();
    PT_CUDA_CHECK(cudaEventRecord(events_[open_start_], stream));
  } else {
    open_t0_ = std::chrono::steady_clock::now();
  }
}

void KernelTimer::end(cudaStream_t stream) {
  if (--depth_ > 0) return;
  const int f = static_cast<int>(open_family_);
  if (cuda_) {
    int e = next_event();
    PT_CUDA_CHECK(cudaEventRecord(events_[e], stream));
    pending_.push_back({open_start_, e, phase_, open_family_});
  } else {
    ms_[phase_][f] +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - open_t0_).count();
    counts_[phase_][f] += 1;
  }
}

std::vector<KernelTimer::Entry> KernelTimer::collect() {
  for (const Pending& p : pending_) {
    PT_CUDA_CHECK(cudaEventSynchronize(events_[p.end_event]));
    float ms = 0;
    PT_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[p.start_event], events_[p.end_event]));
    ms_[p.phase][static_cast<int>(p.family)] += ms;
    counts_[p.phase][static_cast<int>(p.family)] += 1;
  }
  pending_.clear();
  events_used_ = 0;
  std::vector<Entry> out;
  for (size_t ph = 0; ph < phases_.size(); ++ph)
    for (int f = 0; f < kOpFamilies; ++f)
      if (counts_[ph][f] > 0) out.push_back({phases_[ph], static_cast<OpFamily>(f), ms_[ph][f], counts_[ph][f]});
  for (auto& row : ms_) std::fill(row.begin(), row.end(), 0.0);
  for (auto& row : counts_) std::fill(row.begin(), row.end(), 0);
  return out;
}

OpScope::OpScope(const Context& ctx, const char* name, OpFamily family)
    : OpScope(ctx, name, family, ctx.stream()) {}

OpScope::OpScope(const Context& ctx, const char* name, OpFamily family, cudaStream_t stream)
    : range_(name), timer_(ctx.timer()), stream_(stream) {
  if (timer_) timer_->begin(family, stream_);
}

OpScope::~OpScope() {
  if (timer_) timer_->end(stream_);
}

}  // namespace pt
