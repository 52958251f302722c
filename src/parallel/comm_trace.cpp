// The collective trace's bookkeeping: entries and a pool of timing events.
#include "parallel/comm_trace.h"

#include "core/error.h"

namespace pt::parallel {

CommTrace::~CommTrace() {
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
  for (cudaEvent_t e : used_) cudaEventDestroy(e);
}

void CommTrace::reserve_events(size_t n) {
  while (free_.size() < n) {
    cudaEvent_t e;
    PT_CUDA_CHECK(cudaEventCreate(&e));  // timing enabled: the point of these events
    free_.push_back(e);
  }
}

cudaEvent_t CommTrace::take_event() {
  if (free_.empty()) reserve_events(1);
  cudaEvent_t e = free_.back();
  free_.pop_back();
  used_.push_back(e);
  return e;
}

size_t CommTrace::add(TracedCollective c) {
  entries_.push_back(std::move(c));
  return entries_.size() - 1;
}

void CommTrace::last_is_copy_of(const void* original, int64_t bytes, const char* dtype) {
  PT_CHECK(!entries_.empty(), "CommTrace::last_is_copy_of: no collective traced yet");
  TracedCollective& c = entries_.back();
  c.copy_of = original;
  c.copy_of_bytes = bytes;
  c.copy_dtype = dtype;
}

void CommTrace::clear() {
  entries_.clear();
  free_.insert(free_.end(), used_.begin(), used_.end());
  used_.clear();
}

}  // namespace pt::parallel
