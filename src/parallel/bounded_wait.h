#pragma once
// The one host-side wait loop of the communicators: spin on a completion test, bounded by
// comm_timeout_s(), so a lost peer ends the job instead of hanging it.
#include <chrono>
#include <cstdint>
#include <thread>

#include "parallel/communicator.h"

namespace pt::parallel {

// Calls done() until it returns true. After comm_timeout_s() seconds calls
// on_timeout(elapsed_s), which must not return (it aborts the job).
template <class Done, class OnTimeout>
void bounded_wait(Done&& done, OnTimeout&& on_timeout) {
  if (done()) return;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const double limit = comm_timeout_s();
  for (uint64_t i = 1;; ++i) {
    if (done()) return;
    // Yield: ranks may share cores with each other (CPU runs) and with NCCL's proxy thread.
    std::this_thread::yield();
    if ((i & 63) == 0) {
      const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
      if (elapsed > limit) on_timeout(elapsed);
    }
  }
}

}  // namespace pt::parallel
