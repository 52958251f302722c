#pragma once
// ZeRO stage 1's partition of the flat gradient (and trainable-parameter) buffer, and its
// gradient step: a reduce-scatter per bucket instead of the all-reduce. The optimizer side
// (update the own chunks, all-gather the parameters) is optim/zero1_optimizer.h's Zero1Optimizer.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/grad_sync.h"

namespace pt::parallel {

class BucketReadiness;  // grad_collectives.h
class SmReservation;
class GradCollectives;

// The trainable elements in gradient-buffer order, cut into buckets whose sizes are multiples of
// the world size, each bucket into world equal chunks: rank r owns chunk r of every bucket. One
// reduce-scatter per bucket then leaves each rank the average of its chunks, and one all-gather
// per bucket returns the updated parameters, both in place with contiguous buffers (what NCCL's
// collectives take). The few elements past the last bucket (fewer than world) are the tail, the
// last rank's, reduced by an all-reduce and returned by a broadcast of their own.
// Bucket boundaries are plan_buckets(store, bucket_mb)'s — whole parameters up to the cap —
// each moved up to the next multiple of world from the previous boundary, so a bucket also
// holds the first few elements of the parameter above it, whose gradient backward finishes
// earlier: a bucket is complete when its own parameters are. kOneBucket: one bucket of every
// element, the contiguous partition (rank r owns [r·⌊n/world⌋, (r+1)·⌊n/world⌋)).
struct Zero1Layout {
  static constexpr double kOneBucket = -1.0;
  Zero1Layout(const ParamStore& store, int world, double bucket_mb);
  Zero1Layout(const std::vector<GradSpan>& spans, int world, double bucket_mb);  // from shapes alone

  int world = 1;
  int64_t numel = 0;            // trainable elements (the gradient buffer)
  std::vector<Bucket> buckets;  // ascending, tiling [0, tail_begin); params: those with elements in it
  int64_t tail_begin = 0;       // [tail_begin, numel): the last rank's

  int64_t chunk(size_t b) const { return (buckets[b].grad_end - buckets[b].grad_begin) / world; }
  int64_t chunk_begin(size_t b, int r) const { return buckets[b].grad_begin + r * chunk(b); }
  // The element ranges rank r owns, ascending, adjacent ones merged.
  std::vector<std::pair<int64_t, int64_t>> owned(int r) const;
  int64_t owned_numel(int r) const;
};

struct StrategySpec;

// The layout a --ddp strategy (an entry of strategies()) implies under zero1: naive and flat, one bucket (one
// reduce-scatter after backward); overlap, one parameter per bucket (bucket_mb 0); bucketed, bucket_mb.
std::shared_ptr<const Zero1Layout> zero1_layout(const StrategySpec& ddp, const ParamStore& store, int world,
                                                double bucket_mb);

// What a ZeRO-1 sync is called in records: one reduce-scatter after backward, or one per
// bucket overlapped with it.
inline const char* zero1_sync_name(bool overlapped) {
  return overlapped ? "bucketed_reduce_scatter" : "reduce_scatter";
}

// ZeRO-1's gradient step (it replaces the all-reduce): one reduce-scatter per bucket and an
// all-reduce of the tail leave every rank the average of its own chunks; the rest of its buffer
// is not used (the optimizer steps only its chunks). overlap: a bucket's reduce-scatter starts
// during backward once every parameter in it is ready; otherwise all of them start in finish().
// Gradients go in fp32 or bf16 (GradComm; bf16 casts back only this rank's chunks).
class Zero1Sync : public GradSync {
 public:
  Zero1Sync(Context& ctx, ParamStore& store, Communicator& comm, std::shared_ptr<const Zero1Layout> layout,
            bool overlap, GradComm grad_comm = GradComm::FP32);
  ~Zero1Sync() override;
  void on_grad_ready(Parameter& p) override;
  void finish(Context& ctx) override;
  const char* name() const override { return zero1_sync_name(overlap_); }
  int64_t bytes_communicated() const override { return bytes_; }
  const Zero1Layout& layout() const { return *layout_; }

 private:
  void start(int bucket);
  ParamStore& store_;
  Communicator& comm_;
  std::shared_ptr<const Zero1Layout> layout_;
  bool overlap_;
  std::unique_ptr<BucketReadiness> ready_;
  std::unique_ptr<SmReservation> sms_;
  RegistrationPtr registration_;  // before coll_: released after its collectives are waited for
  std::unique_ptr<GradCollectives> coll_;
  int64_t bytes_ = 0;
};

// The ZeRO-1 schedule of a --ddp strategy (naive and flat: no overlap) on its layout.
std::unique_ptr<GradSync> make_zero1_sync(const StrategySpec& ddp, Context& ctx, ParamStore& store, Communicator& comm,
                                          std::shared_ptr<const Zero1Layout> layout,
                                          GradComm grad_comm = GradComm::FP32);
// The same on zero1_layout(ddp, store, world, bucket_mb).
std::unique_ptr<GradSync> make_zero1_sync(const StrategySpec& ddp, Context& ctx, ParamStore& store, Communicator& comm,
                                          double bucket_mb, GradComm grad_comm = GradComm::FP32);

}  // namespace pt::parallel
