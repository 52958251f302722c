#pragma once
// Gradient synchronisation strategies for data parallelism (naive, flat, overlap, bucketed,
// and ZeRO-1's reduce-scatter). A strategy listens to the ParamStore's gradient-ready events
// during backward and, by the end of finish(), leaves averaged gradients in the flat buffer.
#include <memory>
#include <string>

#include "core/context.h"
#include "model/param_store.h"

namespace pt::dist {

class GradSync : public GradReadyListener {
 public:
  ~GradSync() override = default;
  // Start of a step, after ParamStore::zero_grad (resets per-step bookkeeping).
  virtual void begin_step(Context& ctx) {}
  void on_grad_ready(Parameter& p) override {}
  // End of backward: returns when every gradient is averaged over ranks (stream-ordered on
  // the GPU: later work on the compute stream sees the result; no host synchronisation).
  virtual void finish(Context& ctx) = 0;
  virtual const char* name() const = 0;
  // Bytes this rank sent into collectives during the last step (for the benchmark table).
  virtual int64_t bytes_communicated() const { return 0; }
};

// The no-op strategy of single-process training (and of `--ddp none`, the benchmark floor).
class NoSync : public GradSync {
 public:
  void finish(Context&) override {}
  const char* name() const override { return "none"; }
};

}  // namespace pt::dist
