#pragma once
// Timing helpers: summary statistics and a device-event stopwatch that works on both backends
// (the benchmarks and the GEMM autotuner time with it).
#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/context.h"

namespace pt {

struct Summary {
  double mean = 0, sd = 0, min = 0, max = 0, median = 0;
  int64_t n = 0;
};
// Sample standard deviation (n − 1); NaN fields for an empty sample.
Summary summarize(const std::vector<double>& samples);

// Marks points on the compute stream (CUDA events) or the host clock (CPU) and returns the
// milliseconds between consecutive marks after sync(). Reusable across steps.
class StreamClock {
 public:
  explicit StreamClock(const Context& ctx, int max_marks = 16);
  ~StreamClock();
  StreamClock(const StreamClock&) = delete;
  StreamClock& operator=(const StreamClock&) = delete;
  void reset();
  void mark(cudaStream_t stream = nullptr);  // default: the context's compute stream
  // Waits for the last mark; elapsed ms from mark i to mark i+1, for every i.
  std::vector<double> intervals_ms();
  double elapsed_ms(int from, int to);  // after intervals_ms() or sync
  // Milliseconds f() takes on the stream (waits for it): the whole clock for one interval.
  template <class F>
  double time_ms(F&& f) {
    reset();
    mark();
    f();
    mark();
    return intervals_ms().front();
  }

 private:
  const Context& ctx_;
  std::vector<cudaEvent_t> events_;
  std::vector<std::chrono::steady_clock::time_point> host_;
  int used_ = 0;
};

// Milliseconds per run of run() on ctx's stream: `warmup` untimed runs, then `iters` timed
// together (one pair of marks, so launch gaps count as the stream sees them).
template <class Run>
double per_run_ms(const Context& ctx, int iters, Run&& run, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) run();
  StreamClock clock(ctx, 2);
  return clock.time_ms([&] {
    for (int i = 0; i < iters; ++i) run();
  }) / iters;
}

}  // namespace pt
