// The gradient-sync building blocks: bucket readiness and the gradient collectives, fp32 or
// bf16 on the wire (grad_collectives.h).
#include "parallel/grad_collectives.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "ops/elementwise.h"
#include "parallel/comm_trace.h"

namespace pt::parallel {

BucketReadiness::BucketReadiness(const ParamStore& store, std::vector<Bucket> buckets)
    : buckets_(std::move(buckets)),
      buckets_of_(store.size()),
      ready_(buckets_.size(), 0),
      started_(buckets_.size(), false) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int i : buckets_[b].params) buckets_of_.at(i).push_back(static_cast<int>(b));
}

std::vector<int> BucketReadiness::on_ready(const Parameter& p) {
  const std::vector<int>& mine = buckets_of_.at(p.index);
  PT_CHECK(!mine.empty(), "bucketed sync: '" + p.name + "' is in no bucket");
  std::vector<int> done;
  for (int b : mine)
    if (++ready_[b] == static_cast<int>(buckets_[b].params.size())) {
      started_[b] = true;
      done.push_back(b);
    }
  return done;
}

RegistrationPtr register_gradients(Communicator& comm, const ParamStore& store) {
  return store.grad_numel() > 0 ? comm.register_buffer(store.flat_grads()) : nullptr;
}

std::vector<int> BucketReadiness::take_rest() {
  std::vector<int> rest;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!started_[b]) rest.push_back(static_cast<int>(b));
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(started_.begin(), started_.end(), false);
  return rest;
}

namespace {

// A collective on a bf16 copy of an fp32 gradient range (--grad-comm bf16). It owns the
// staging buffer; wait() waits for the collective, casts this rank's result back into the fp32
// range scaled by 1/world (one pass on the compute stream, after the collective), then releases
// the staging buffer. Like any Work, destroyed before wait() it waits.
class CompressedWork : public Work {
 public:
  // result: the part of staging that holds this rank's sum; dst: the fp32 range it goes to
  // (undefined where this rank receives nothing: a reduce's non-root).
  CompressedWork(Context& ctx, Tensor staging, WorkPtr inner, Tensor result, Tensor dst, float scale)
      : ctx_(ctx),
        staging_(std::move(staging)),
        result_(std::move(result)),
        dst_(std::move(dst)),
        scale_(scale),
        inner_(std::move(inner)) {}
  ~CompressedWork() override {
    if (finished_) return;
    try {
      wait();
    } catch (const std::exception& e) {
      comm_fatal("bf16 gradient collective", std::string("abandoned collective failed: ") + e.what());
    }
  }
  void wait() override {
    if (finished_) return;
    inner_->wait();
    if (dst_.defined()) ops::cast(ctx_, dst_, result_, scale_);  // one pass: bf16 sum → fp32 · 1/world
    // Safe on the GPU: the compute stream now runs after the collective, and the allocator
    // hands the block out again only in compute-stream order.
    result_ = Tensor();
    staging_ = Tensor();
    finished_ = true;
  }
  bool test() override { return inner_->test(); }
  void synchronize() override {
    inner_->synchronize();
    wait();
  }

 private:
  Context& ctx_;
  Tensor staging_;  // (n) bf16: the collective's whole buffer
  Tensor result_;   // view of staging_
  Tensor dst_;      // fp32
  float scale_;
  WorkPtr inner_;  // after the buffers: destroyed (so waited for) before they are
  bool finished_ = false;
};

}  // namespace

WorkPtr GradCollectives::all_reduce(Tensor grads) {
  if (direct(grads)) return sent(grads, comm_.all_reduce_async(grads, ReduceOp::Average));
  Tensor staging = stage(grads);
  WorkPtr w = comm_.all_reduce_async(staging, ReduceOp::Sum);
  return compressed(grads, staging, std::move(w), staging, grads);
}

WorkPtr GradCollectives::reduce(Tensor piece, int root) {
  if (direct(piece)) return sent(piece, comm_.reduce_async(piece, root, ReduceOp::Average));
  Tensor staging = stage(piece);
  WorkPtr w = comm_.reduce_async(staging, root, ReduceOp::Sum);
  return compressed(piece, staging, std::move(w), staging, comm_.rank() == root ? piece : Tensor());
}

WorkPtr GradCollectives::reduce_scatter(Tensor all, int64_t block) {
  const int64_t mine_at = comm_.rank() * block;
  Tensor mine = all.narrow(0, mine_at, block);
  if (direct(all)) return sent(all, comm_.reduce_scatter_async(all, mine, ReduceOp::Average));
  Tensor staging = stage(all);
  Tensor result = staging.narrow(0, mine_at, block);  // in place in the staging buffer
  WorkPtr w = comm_.reduce_scatter_async(staging, result, ReduceOp::Sum);
  return compressed(all, staging, std::move(w), result, mine);
}

void GradCollectives::reap() {
  if (wire_ == GradComm::FP32) return;
  for (auto& w : in_flight_)
    if (w && w->test()) {
      w->wait();
      w.reset();
    }
  in_flight_.erase(std::remove(in_flight_.begin(), in_flight_.end(), nullptr), in_flight_.end());
}

void GradCollectives::wait_all() {
  for (auto& w : in_flight_) w->wait();
  in_flight_.clear();
}

int64_t GradCollectives::take_bytes() { return std::exchange(bytes_, 0); }

WorkPtr GradCollectives::sent(const Tensor& buf, WorkPtr w) {
  bytes_ += static_cast<int64_t>(buf.nbytes());
  return w;
}

// A bf16 copy of src (fp32, contiguous) in a buffer of its own.
Tensor GradCollectives::stage(const Tensor& src) {
  Tensor staging = Tensor::empty({src.numel()}, DType::BF16, src.device(), "grad_comm_bf16", MemCategory::Workspace);
  ops::cast(ctx_, staging, src);
  return staging;
}

// The collective `inner` just started on `staging`, a copy of `src`.
WorkPtr GradCollectives::compressed(const Tensor& src, const Tensor& staging, WorkPtr inner, const Tensor& result,
                                    const Tensor& dst) {
  bytes_ += static_cast<int64_t>(staging.nbytes());
  if (CommTrace* trace = comm_.trace())  // the timeline names the gradients, not the copy
    trace->last_is_copy_of(src.data(), static_cast<int64_t>(src.nbytes()), dtype_name(staging.dtype()));
  return std::make_unique<CompressedWork>(ctx_, staging, std::move(inner), result, dst,
                                          1.0f / static_cast<float>(comm_.world_size()));
}

}  // namespace pt::parallel
