#pragma once
// The building blocks the gradient-sync strategies (grad_sync.cpp) and ZeRO-1 (zero1.cpp) share:
// which buckets a ready parameter completes, the SMs GEMMs leave to overlapped collectives, and
// the gradient collectives themselves (fp32, or a bf16 copy on the wire: --grad-comm).
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "model/param_store.h"
#include "parallel/communicator.h"
#include "parallel/grad_sync.h"

namespace pt::parallel {

// Counts ready parameters per bucket and says which buckets a ready parameter completes. A
// bucket lists every trainable parameter with gradient elements in it; a parameter may lie in
// several buckets (ZeRO-1 cuts buckets at element boundaries).
class BucketReadiness {
 public:
  BucketReadiness(const ParamStore& store, std::vector<Bucket> buckets);
  const Bucket& operator[](int b) const { return buckets_[b]; }
  int size() const { return static_cast<int>(buckets_.size()); }
  // The buckets p completes (usually none or one), in bucket order.
  std::vector<int> on_ready(const Parameter& p);
  // Buckets not started this step (their parameters were not all used), in bucket order;
  // every rank runs the same model, so every rank lists the same ones. Resets for the next step.
  std::vector<int> take_rest();

 private:
  std::vector<Bucket> buckets_;
  std::vector<std::vector<int>> buckets_of_;  // by Parameter::index; empty for frozen parameters
  std::vector<int> ready_;                    // parameters ready per bucket this step
  std::vector<bool> started_;
};

// The flat gradient buffer registered with the communicator (Communicator::register_buffer), so
// collectives on its ranges may run on the copy engines; nullptr when there is none to register.
RegistrationPtr register_gradients(Communicator& comm, const ParamStore& store);

// Keeps GEMMs off the communicator's reserved SMs (Communicator::reserved_sms) from the first
// collective an overlapped strategy starts until the compute stream's wait on the last is
// queued; GEMMs before and after use every SM.
class SmReservation {
 public:
  SmReservation(Context& ctx, const Communicator& comm) : ctx_(ctx), sms_(comm.reserved_sms()) {}
  void collectives_started() { ctx_.reserve_sms(sms_); }
  void collectives_waited() { ctx_.reserve_sms(0); }

 private:
  Context& ctx_;
  int sms_;
};

// The gradient collectives of every strategy: each averages a range of the gradient buffer over
// the ranks, sending it as it is (fp32, or bf16 gradients: --grad-dtype bf16) or, for fp32
// gradients with --grad-comm bf16, as a bf16 copy (a staging buffer of its own, cast back and
// scaled by 1/world when waited: see GradComm), and counts the bytes sent. It also keeps the
// collectives an overlapped strategy has in flight.
class GradCollectives {
 public:
  GradCollectives(Context& ctx, Communicator& comm, GradComm wire) : ctx_(ctx), comm_(comm), wire_(wire) {}

  // grads ← their average over ranks.
  WorkPtr all_reduce(Tensor grads);
  // On root, piece ← its average over ranks; the other ranks' piece is left as it is.
  WorkPtr reduce(Tensor piece, int root);
  // all (world · block): block `rank` ← its average over ranks; the other blocks are not used.
  WorkPtr reduce_scatter(Tensor all, int64_t block);

  // In-flight collectives of an overlapped strategy, waited for by wait_all().
  void keep(WorkPtr w) { in_flight_.push_back(std::move(w)); }
  // bf16: completes the kept collectives that have finished, so during backward only those
  // still in flight hold a staging buffer. fp32 holds nothing: its waits all stay in finish().
  void reap();
  void wait_all();

  // Bytes sent since the last call (the step's), and a fresh count.
  int64_t take_bytes();

 private:
  // Sent as it is: fp32 on an fp32 wire, and bf16 gradients whatever the wire (already bf16).
  bool direct(const Tensor& grads) const { return wire_ == GradComm::FP32 || grads.dtype() == DType::BF16; }
  WorkPtr sent(const Tensor& buf, WorkPtr w);
  Tensor stage(const Tensor& src);
  WorkPtr compressed(const Tensor& src, const Tensor& staging, WorkPtr inner, const Tensor& result, const Tensor& dst);

  Context& ctx_;
  Communicator& comm_;
  GradComm wire_;
  std::vector<WorkPtr> in_flight_;
  int64_t bytes_ = 0;
};

}  // namespace pt::parallel
