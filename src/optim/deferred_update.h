#pragma once
// The update of step k run under step k+1's forward (`--update-overlap`). The optimizer phase
// is memory-bound (28 bytes a parameter) and the forward is mostly GEMMs; on a side stream below
// the compute stream's priority, the update's blocks fill what the forward's kernels leave free
// (wave tails, small kernels, launch gaps). Measured: docs/reports/2026-11-25_update-overlap_h100.md.
//
// step() only records the update (its learning rate, step count and folded clip). The first
// read of a parameter afterwards — zero_grad, the next forward, a host copy — launches it: the
// side stream waits for the compute stream's work so far (the gradients and their norm are
// final), then updates the trainable parameters chunk by chunk in gradient-buffer order, which
// is the order the forward reads them, recording an event after each. As the store's
// ParamReadListener it makes the compute stream wait (stream-ordered, no host block) for the
// chunks up to each parameter a module is about to read, and for every chunk when the whole
// buffer is read (checkpoints, loads, host copies). The arithmetic is the wrapped AdamW's or
// SGD's, range by range: the parameters are bit for bit those of the plain update.
//
// With ctx.update_sms() > 0 (`--update-sms N`) the GEMMs issued from the launch until the
// forward has waited for the last chunk target N SMs fewer (Context::reserve_sms), so the
// update streams on SMs of its own beside them rather than only in their gaps (large models gain,
// small ones lose: docs/reports/2026-11-26_update-sms_h200.md). Those GEMMs may then take other cuBLAS
// algorithms: the run is reproducible, but no longer bit for bit the plain update's.
//
// Where it runs on the compute stream instead, in order (same results, no overlap): the CPU,
// while a kernel timer is attached, and under set_in_order (bench model --breakdown times the
// update as the optimizer phase). It cannot be captured in a CUDA graph (a graph replays whole steps; the
// update would cross two), nor wrap the sharded optimizers (they exchange parameters after the
// update): make_update_optimizer refuses both.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace pt {

class DeferredUpdateOptimizer final : public Optimizer, public ParamReadListener {
 public:
  // An AdamW or SGD (cfg; fused) over `store`'s trainable parameters cut into chunks of at
  // least min_chunk elements (0: a 16th of them, at least 2^20). Becomes the store's read
  // listener; refuses a store that already has one.
  DeferredUpdateOptimizer(const OptimizerConfig& cfg, Context& ctx, ParamStore& store, int64_t min_chunk = 0);
  ~DeferredUpdateOptimizer() override;
  DeferredUpdateOptimizer(const DeferredUpdateOptimizer&) = delete;
  DeferredUpdateOptimizer& operator=(const DeferredUpdateOptimizer&) = delete;

  // Records the update (run at once, on the compute stream, under a kernel timer). An update
  // still in flight from the step before is waited for first.
  void step(Context& ctx, float lr) override;
  void add_ranges(const std::vector<FlatRange>& ranges) override;  // an error: the store's chunks are fixed
  // The state reads and checkpoints see the updated moments: both finish the update first.
  std::vector<std::pair<std::string, Tensor>> state() override;
  std::vector<StatePiece> state_pieces() override;
  int64_t state_bytes() const override;
  // A recorded update not yet launched, or chunks the compute stream has not waited for.
  bool parameters_in_flight() const override { return pending_ || next_ < launched_; }
  bool update_pending() const { return pending_; }
  size_t chunks() const { return inner_->ranges().size(); }
  // The stream the update runs on (null on the CPU): tests delay it to show that every read waits.
  cudaStream_t side_stream() const { return side_; }

  // Launches a recorded update and makes the compute stream wait for all of it.
  void finish();
  // In order: step() runs the update at once on the compute stream, as the plain optimizer does
  // (bench model --breakdown, so that its phases and families hold the same kernels). Turning it
  // on finishes a recorded update first.
  void set_in_order(bool on);

  void before_read(const Parameter& p) override;
  void before_read_all() override { finish(); }
  void before_grad_write(const Parameter& p) override { before_read(p); }

 private:
  // Whether the update runs in order on the compute stream: asked to, or timed per kernel.
  bool in_order() const { return in_order_ || ctx_.timer() != nullptr; }
  void launch();
  // The compute stream waits for every launched chunk that starts below gradient element `end`.
  void wait_below(int64_t end);

  ParamStore& store_;
  std::unique_ptr<Optimizer> inner_;  // AdamW or SGD over the chunks (its ranges)
  bool pending_ = false;              // step() recorded an update launch() has not run
  bool in_order_ = false;             // set_in_order
  float pending_lr_ = 0;
  Tensor clip_in_flight_;           // the folded clip's norm, kept until every chunk reading it is waited for
  size_t next_ = 0, launched_ = 0;  // chunks [next_, launched_) run on side_, not yet waited for
  // The context's reserved SMs before launch() kept ctx.update_sms() from GEMMs; -1: none kept.
  int sms_before_ = -1;
  cudaStream_t side_ = nullptr;
  cudaEvent_t grads_final_ = nullptr;
  std::vector<cudaEvent_t> chunk_done_;  // [chunk]
};

// `--update-overlap`: auto | on | off.
enum class UpdateOverlap { Auto, On, Off };
UpdateOverlap update_overlap_from_name(const std::string& name);

// Whether --update-overlap defers the update: on (refused, naming the flag, where it cannot run:
// the CPU, --fused off, a CUDA graph), auto (on the GPU, fused, without a CUDA graph), off.
bool defers_update(UpdateOverlap overlap, bool gpu, bool fused, bool cuda_graph);
// The unsharded optimizer over every trainable parameter of `store`: a DeferredUpdateOptimizer
// where defers_update says so, else make_optimizer's over one range.
std::unique_ptr<Optimizer> make_update_optimizer(const OptimizerConfig& cfg, Context& ctx, ParamStore& store,
                                                 UpdateOverlap overlap, bool cuda_graph);

}  // namespace pt
