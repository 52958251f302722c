#include "core/timing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace pt {

Summary summarize(const std::vector<double>& samples) {
  Summary s;
  s.n = static_cast<int64_t>(samples.size());
  if (samples.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.mean = s.sd = s.min = s.max = s.median = nan;
    return s;
  }
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.n);
  double ss = 0;
  for (double x : samples) ss += (x - s.mean) * (x - s.mean);
  s.sd = s.n > 1 ? std::sqrt(ss / static_cast<double>(s.n - 1)) : 0.0;
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = s.n % 2 ? sorted[s.n / 2] : 0.5 * (sorted[s.n / 2 - 1] + sorted[s.n / 2]);
  return s;
}

StreamClock::StreamClock(const Context& ctx, int max_marks) : ctx_(ctx) {
  if (ctx_.is_cuda()) {
    events_.resize(max_marks);
    for (auto& e : events_) PT_CUDA_CHECK(cudaEventCreate(&e));
  } else {
    host_.resize(max_marks);
  }
}

StreamClock::~StreamClock() {
  for (auto& e : events_) cudaEventDestroy(e);
}

void StreamClock::reset() { used_ = 0; }

void StreamClock::mark(cudaStream_t stream) {
  const size_t cap = ctx_.is_cuda() ? events_.size() : host_.size();
  PT_CHECK(static_cast<size_t>(used_) < cap, "StreamClock: more marks than reserved");
  if (ctx_.is_cuda())
    PT_CUDA_CHECK(cudaEventRecord(events_[used_], stream ? stream : ctx_.stream()));
  else
    host_[used_] = std::chrono::steady_clock::now();
  ++used_;
}

double StreamClock::elapsed_ms(int from, int to) {
  PT_CHECK(from >= 0 && to < used_ && from <= to, "StreamClock: mark index out of range");
  if (!ctx_.is_cuda()) return std::chrono::duration<double, std::milli>(host_[to] - host_[from]).count();
  float ms = 0;
  PT_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[from], events_[to]));
  return ms;
}

std::vector<double> StreamClock::intervals_ms() {
  if (used_ == 0) return {};
  if (ctx_.is_cuda()) PT_CUDA_CHECK(cudaEventSynchronize(events_[used_ - 1]));
  std::vector<double> out;
  for (int i = 0; i + 1 < used_; ++i) out.push_back(elapsed_ms(i, i + 1));
  return out;
}

}  // namespace pt
