#pragma once
// CommTrace: attached to a Communicator (set_trace), it records when each collective ran: the
// communication lanes of `bench ddp`'s per-rank timeline. Detached (the default) it costs one
// branch per collective.
//
// NCCL: a timing-event pair recorded on the communication stream just before and just after the
// collective, so [start, end] is its span on that stream (from the moment the compute work it
// depends on and the collectives queued before it are done, waiting for the peers included).
// MPI: the host clock when the request is issued and when a test first sees it complete. Open
// MPI notices completion only inside MPI calls (communicator.h, "MPI progress"), so the end is
// late by up to one poll interval (a gradient's backward, for the overlapped strategies).
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pt::parallel {

struct TracedCollective {
  TracedCollective(std::string op_, const void* buffer_, int64_t bytes_, int root_)
      : op(std::move(op_)), buffer(buffer_), bytes(bytes_), root(root_) {}
  std::string op;                // "all_reduce", "broadcast", "reduce", "reduce_scatter", "all_gather"
  const void* buffer = nullptr;  // its largest buffer: the in-place tensor, reduce-scatter's send,
                                 // all-gather's recv
  int64_t bytes = 0;             // of that buffer
  int root = -1;                 // broadcast and reduce; -1 otherwise
  // A collective on a converted copy of another buffer (--grad-comm bf16's staging buffer):
  // that buffer, its bytes and the copy's element type, so the timeline can name what was
  // sent; `buffer` and `bytes` above stay what went on the wire. Null otherwise.
  const void* copy_of = nullptr;
  int64_t copy_of_bytes = 0;
  const char* copy_dtype = "";
  cudaEvent_t start = nullptr, end = nullptr;                  // NCCL: timing events on the communication stream
  std::chrono::steady_clock::time_point host_start, host_end;  // MPI
  bool host_done = false;                                      // MPI: host_end is set
};

class CommTrace {
 public:
  CommTrace() = default;
  ~CommTrace();
  CommTrace(const CommTrace&) = delete;
  CommTrace& operator=(const CommTrace&) = delete;

  // Creates timing events ahead of use, so a traced step does not pay cudaEventCreate inside.
  void reserve_events(size_t n);
  // A timing event from the pool (created when the pool is empty); owned by the trace.
  cudaEvent_t take_event();
  // Appends a collective; returns its index (stable, unlike references into the vector).
  size_t add(TracedCollective c);
  // Marks the entry added last as a collective on a `dtype` copy of [original, + bytes).
  void last_is_copy_of(const void* original, int64_t bytes, const char* dtype);
  TracedCollective& at(size_t i) { return entries_.at(i); }
  const std::vector<TracedCollective>& entries() const { return entries_; }
  // Forgets the entries and returns their events to the pool. Only when nothing traced is in
  // flight: NCCL events still pending would be re-recorded, MPI work would update a dead entry.
  void clear();

 private:
  std::vector<TracedCollective> entries_;
  std::vector<cudaEvent_t> free_, used_;
};

}  // namespace pt::parallel
