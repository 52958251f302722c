#pragma once
// The per-rank timeline of one data-parallel training step, for `bench ddp`'s /ddp_events
// table and the report's overlap plot: compute phases (forward, backward per layer, optimizer)
// from marks on the compute stream, and one interval per collective from the communicator's
// CommTrace. Marks are CUDA events on the GPU and the host clock on the CPU (where ops are
// synchronous); all times are ms since the step's start mark.
#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/context.h"
#include "model/param_store.h"
#include "parallel/comm_trace.h"
#include "parallel/grad_sync.h"

namespace pt::parallel {
class Communicator;
}

namespace pt::bench {

struct TimelineEvent {
  std::string stream;  // "compute" or "comm"
  std::string name;    // "forward", "backward layers.3", "all-reduce bucket 2 (4.2 MB)",
                       // "all-reduce bucket 2 (bf16, 2.1 MB)" (--grad-comm bf16), ...
  double start_ms = 0, end_ms = 0;
};

// Use: construct (outside the step), begin() right after the barrier that starts the step,
// mark() at the phase boundaries, finish() once the step has been waited for. In between it is
// the store's gradient-ready listener (stamping each gradient, then passing it on to the
// gradient sync) and the communicator's trace. Destruction detaches both if finish() did not.
class StepTimeline : public GradReadyListener {
 public:
  enum Phase { ForwardEnd, BackwardEnd, SyncEnd, End, PhaseCount };

  // buckets: the gradient sync's bucket plan (empty unless bucketed), to name its collectives.
  StepTimeline(Context& ctx, ParamStore& store, parallel::Communicator& comm, std::vector<parallel::Bucket> buckets);
  ~StepTimeline() override;
  StepTimeline(const StepTimeline&) = delete;
  StepTimeline& operator=(const StepTimeline&) = delete;

  void begin();  // attaches, then marks the step's start
  void mark(Phase p);
  void on_grad_ready(Parameter& p) override;
  // Detaches and returns the events, compute ones first. Call after ctx and comm synchronize.
  std::vector<TimelineEvent> finish();

 private:
  struct Mark {
    cudaEvent_t event = nullptr;
    std::chrono::steady_clock::time_point host;
  };
  Mark stamp();
  double ms(const Mark& m) const;
  double ms(cudaEvent_t e, std::chrono::steady_clock::time_point host) const;
  void detach();
  std::string describe(const parallel::TracedCollective& c) const;
  std::string describe_grads(int64_t lo, int64_t hi) const;
  std::string describe_params(int64_t lo, int64_t hi) const;

  Context& ctx_;
  ParamStore& store_;
  parallel::Communicator& comm_;
  std::vector<parallel::Bucket> buckets_;
  parallel::CommTrace trace_;
  bool attached_ = false;
  std::vector<cudaEvent_t> events_;  // pool (GPU), reused by every mark
  size_t events_used_ = 0;
  Mark start_;
  Mark phase_[PhaseCount];
  std::vector<std::pair<const Parameter*, Mark>> ready_;  // in the order backward finished them
};

}  // namespace pt::bench
