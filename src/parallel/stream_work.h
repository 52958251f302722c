#pragma once
// What the device communicators (NCCL, copy engines) share: reusable CUDA events, and the Work of
// a collective that ends at an event recorded on a device stream.
#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "parallel/communicator.h"

namespace pt::parallel {

// Events without timing, reused: a collective takes one and its Work gives it back.
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool();
  cudaEvent_t take();
  void recycle(cudaEvent_t e) { free_.push_back(e); }

 private:
  std::vector<cudaEvent_t> free_;
};

// The communicator side of a StreamWork.
class StreamWorkOwner {
 public:
  virtual ~StreamWorkOwner() = default;
  // The compute stream waits for e (no host block).
  virtual void make_compute_wait(cudaEvent_t e) = 0;
  // True once e has completed; fails the job on the communicator's asynchronous errors.
  virtual bool event_done(cudaEvent_t e, const std::string& op) = 0;
  // Host-side wait for e, bounded by comm_timeout_s().
  virtual void wait_event_host(cudaEvent_t e, const std::string& op) = 0;
  virtual EventPool& events() = 0;
  // Host-side bounded wait for everything queued on s so far.
  void wait_stream_host(cudaStream_t s, const std::string& op);
};

class StreamWork : public Work {
 public:
  StreamWork(StreamWorkOwner& owner, cudaEvent_t done, std::string op)
      : owner_(owner), done_(done), op_(std::move(op)) {}
  // A handle dropped without wait() still orders the compute stream after the collective.
  ~StreamWork() override;
  void wait() override;
  bool test() override { return owner_.event_done(done_, op_); }
  void synchronize() override;

 private:
  StreamWorkOwner& owner_;
  cudaEvent_t done_;  // recorded after the collective
  std::string op_;
  bool waited_ = false;
};

}  // namespace pt::parallel
