// EventPool and StreamWork (stream_work.h).
#include "parallel/stream_work.h"

#include "core/error.h"

namespace pt::parallel {

EventPool::~EventPool() {
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t EventPool::take() {
  if (free_.empty()) {
    cudaEvent_t e;
    PT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  cudaEvent_t e = free_.back();
  free_.pop_back();
  return e;
}

void StreamWorkOwner::wait_stream_host(cudaStream_t s, const std::string& op) {
  cudaEvent_t e = events().take();
  PT_CUDA_CHECK(cudaEventRecord(e, s));
  wait_event_host(e, op);
  events().recycle(e);
}

StreamWork::~StreamWork() {
  if (!waited_) {
    try {
      wait();
    } catch (const std::exception& e) {
      comm_fatal(op_, std::string("could not order the compute stream after it: ") + e.what());
    }
  }
  owner_.events().recycle(done_);
}

void StreamWork::wait() {
  if (waited_) return;
  owner_.make_compute_wait(done_);
  waited_ = true;
}

void StreamWork::synchronize() {
  owner_.wait_event_host(done_, op_);
  wait();
}

}  // namespace pt::parallel
