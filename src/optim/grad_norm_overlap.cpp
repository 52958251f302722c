#include "optim/grad_norm_overlap.h"

#include <algorithm>

#include "core/error.h"
#include "ops/optim_kernels.h"

namespace pt {

GradNormOverlap::GradNormOverlap(Context& ctx, ParamStore& store, DType acc) : ctx_(ctx), store_(store) {
  PT_CHECK(ctx.is_cuda(), "GradNormOverlap runs on the GPU only");
  acc_ = Tensor::zeros({1}, acc, ctx, "grad_sumsq_overlap");
  partials_ = ops::squared_norm_scratch(ctx);
  reported_.assign(store.params().size(), 0);
  for (const auto& p : store.params()) trainable_count_ += p->trainable ? 1 : 0;
  grad_bytes_ = int64_t(dtype_size(store.flat_grads().dtype()));
  // The compute stream's priority: the sums interleave with backward's kernels, so the norm
  // is ready when backward ends (docs/reports/2026-11-25_rmsnorm-one-pass-block-order_h200.md).
  PT_CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, ctx.stream_priorities().compute));
  PT_CUDA_CHECK(cudaEventCreateWithFlags(&grad_written_, cudaEventDisableTiming));
  PT_CUDA_CHECK(cudaEventCreateWithFlags(&sums_done_, cudaEventDisableTiming));
  ctx.synchronize();  // acc_'s zeros are in place before the side stream adds to them
  store_.add_listener(this);
}

GradNormOverlap::~GradNormOverlap() {
  store_.remove_listener(this);
  // Destructors must not throw (as Context's): free what we can, report nothing.
  if (side_) cudaStreamSynchronize(side_);
  if (grad_written_) cudaEventDestroy(grad_written_);
  if (sums_done_) cudaEventDestroy(sums_done_);
  if (side_) cudaStreamDestroy(side_);
}

void GradNormOverlap::restart_round() {
  std::fill(reported_.begin(), reported_.end(), 0);
  reported_count_ = 0;
  pending_lo_ = pending_hi_ = 0;
  zero_pending_ = true;
}

void GradNormOverlap::sum_pending() {
  if (pending_hi_ == pending_lo_) return;
  PT_CUDA_CHECK(cudaEventRecord(grad_written_, ctx_.stream()));
  PT_CUDA_CHECK(cudaStreamWaitEvent(side_, grad_written_, 0));
  if (zero_pending_) {
    // After the wait: the compute stream has finished reading acc_ in the last take().
    PT_CUDA_CHECK(cudaMemsetAsync(acc_.data(), 0, acc_.nbytes(), side_));
    zero_pending_ = false;
  }
  ops::squared_norm_accumulate(ctx_, acc_, store_.flat_grads().narrow(0, pending_lo_, pending_hi_ - pending_lo_), side_,
                               partials_);
  pending_lo_ = pending_hi_ = 0;
}

void GradNormOverlap::on_grad_ready(Parameter& p) {
  if (reported_.at(p.index)) restart_round();
  reported_[p.index] = 1;
  ++reported_count_;
  const int64_t lo = p.grad_offset, hi = p.grad_offset + p.numel;
  if (pending_hi_ == pending_lo_) {
    pending_lo_ = lo;
    pending_hi_ = hi;
  } else if (hi == pending_lo_) {
    pending_lo_ = lo;
  } else if (lo == pending_hi_) {
    pending_hi_ = hi;
  } else {
    sum_pending();
    pending_lo_ = lo;
    pending_hi_ = hi;
  }
  if ((pending_hi_ - pending_lo_) * grad_bytes_ >= kSumBytes) sum_pending();
}

bool GradNormOverlap::take(Context& ctx, Tensor& out) {
  const bool complete = trainable_count_ > 0 && reported_count_ == trainable_count_;
  if (complete) {
    sum_pending();
    PT_CUDA_CHECK(cudaEventRecord(sums_done_, side_));
    PT_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), sums_done_, 0));
    out.copy_from(acc_, ctx);
  }
  restart_round();
  return complete;
}

}  // namespace pt
