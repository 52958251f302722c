#pragma once
// The squared gradient norm summed while backward runs. When nothing changes a gradient after
// backward reports it final (single-process training, `--ddp none`), each parameter's squares
// are added on a side stream the moment the store reports it, so clipping finds the norm
// ready instead of reading every gradient again after backward
// (docs/reports/2026-11-23_optimizer-hbm-speed_h200.md).
// Parameters reported one after another are usually neighbours in the flat gradient buffer
// (backward finishes them in reverse registration order): they are summed as one range of at
// least kSumBytes, so a small model does not pay four API calls per parameter on the host.
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "model/param_store.h"

namespace pt {

class GradNormOverlap final : public GradReadyListener {
 public:
  // GPU only. Registers itself with `store` and unregisters in the destructor, so it must not
  // outlive the store. `acc`: the accumulator's dtype (fp32 or fp64).
  GradNormOverlap(Context& ctx, ParamStore& store, DType acc);
  ~GradNormOverlap() override;
  GradNormOverlap(const GradNormOverlap&) = delete;
  GradNormOverlap& operator=(const GradNormOverlap&) = delete;

  // Adds the gradient to the pending range, which is summed (the side stream ordered after the
  // compute stream's writes so far) once it holds kSumBytes or the next gradient is not its
  // neighbour. A parameter reported twice means a new backward began without take(): the
  // round restarts.
  void on_grad_ready(Parameter& p) override;

  // When every trainable parameter has reported exactly once since the last take(), the
  // compute stream waits for the side stream, `out` (1 element, the accumulator's dtype, on
  // the device) is overwritten with the sum on the compute stream, and it returns true.
  // Otherwise it returns false and the caller sums the gradients itself. A new round starts
  // either way.
  bool take(Context& ctx, Tensor& out);

 private:
  static constexpr int64_t kSumBytes = int64_t(64) << 20;
  void restart_round();
  void sum_pending();  // enqueue the pending range's sum on the side stream

  Context& ctx_;
  ParamStore& store_;
  Tensor acc_;                  // (1) the running sum, written on the side stream only
  Tensor partials_;             // the sums' block partials, used on the side stream only
  std::vector<char> reported_;  // [param index] reported in this round
  int reported_count_ = 0, trainable_count_ = 0;
  int64_t grad_bytes_ = 4;                   // bytes per gradient element
  int64_t pending_lo_ = 0, pending_hi_ = 0;  // flat-gradient elements reported, not yet summed
  bool zero_pending_ = true;                 // the side stream zeroes acc_ before the round's first sum
  cudaStream_t side_ = nullptr;
  cudaEvent_t grad_written_ = nullptr, sums_done_ = nullptr;
};

}  // namespace pt
