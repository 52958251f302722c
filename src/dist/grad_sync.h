#pragma once
// Gradient synchronisation strategies for data parallelism (naive, flat, overlap, bucketed,
// and ZeRO-1's reduce-scatter). A strategy listens to the ParamStore's gradient-ready events
// during backward and, by the end of finish(), leaves averaged gradients in the flat buffer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "model/param_store.h"

namespace pt::dist {

class Communicator;
class Work;
class BucketReadiness;  // grad_sync.cpp
class SmReservation;    // grad_sync.cpp

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

// `--ddp` names: none, naive, flat, overlap, bucketed.
const std::vector<std::string>& grad_sync_names();

// --bucket-mb: a cap in MiB (2^20 bytes) of fp32 gradient per bucket. 0 means one bucket per
// parameter (the collectives of `overlap`); not given (kDefaultBucketMB) means PyTorch DDP's
// default cap of 25 MiB. A parameter larger than the cap gets a bucket of its own.
constexpr double kDefaultBucketMB = 25.0;

// A contiguous range of the flat gradient buffer: parameters taken in reverse registration
// order (the order backward finishes them), so a bucket needs no copy.
struct Bucket {
  int64_t grad_begin = 0, grad_end = 0;  // elements of the flat gradient buffer
  std::vector<int> params;                // Parameter::index of its members, reverse order
};
std::vector<Bucket> plan_buckets(const ParamStore& store, double bucket_mb);

// The strategy named `name` on a finalized store. Every strategy but `none` first makes rank
// 0's parameters (trainable or frozen) everyone's, then registers itself as the store's
// gradient-ready listener; gradients are averaged (sum / world size), frozen parameters
// skipped, a tied parameter synchronised once. bucket_mb is read by `bucketed` only.
std::unique_ptr<GradSync> make_grad_sync(const std::string& name, Context& ctx, ParamStore& store,
                                         Communicator* comm, double bucket_mb = kDefaultBucketMB);

// Rank 0's parameters to every rank (the whole flat buffer, frozen ones included), and the
// bf16 mirror refreshed.
void broadcast_parameters(Context& ctx, ParamStore& store, Communicator& comm);

// ZeRO-1's contiguous partition of the flat gradient buffer: rank r owns [begin(r), end(r)).
// Blocks are equal (numel / world, rounded down) so one reduce-scatter covers
// [0, scattered()); the short tail [scattered(), numel) (fewer than world elements) belongs to
// the last rank.
struct GradPartition {
  GradPartition(int64_t numel, int world);
  int64_t numel, block;
  int world;
  int64_t begin(int r) const { return r * block; }
  int64_t end(int r) const { return r == world - 1 ? numel : (r + 1) * block; }
  int64_t scattered() const { return block * world; }
  int64_t tail() const { return numel - scattered(); }
};

// ZeRO-1's gradient step (it replaces the all-reduce): every rank ends with the average of its
// own part [begin(rank), end(rank)) of the gradients; the rest of its buffer holds partial sums
// and is not used (the optimizer steps only its part). Two schedules:

// After backward, one reduce-scatter over [0, scattered()) (and an all-reduce of the tail).
class ReduceScatterSync : public GradSync {
 public:
  ReduceScatterSync(Context& ctx, ParamStore& store, Communicator& comm);
  ~ReduceScatterSync() override;
  void finish(Context& ctx) override;
  const char* name() const override { return "reduce_scatter"; }
  int64_t bytes_communicated() const override { return bytes_; }
  const GradPartition& partition() const { return partition_; }

 private:
  ParamStore& store_;
  Communicator& comm_;
  GradPartition partition_;
  int64_t bytes_ = 0;
};

// Overlapped with backward: buckets as for `bucketed`; once a bucket is ready, each piece of it
// that falls in rank r's part is reduced (averaged) onto rank r — usually one reduce per
// bucket, two where a bucket straddles a boundary. Each rank sends (world−1)/world of the
// buffer, as with the reduce-scatter.
class BucketedReduceSync : public GradSync {
 public:
  BucketedReduceSync(Context& ctx, ParamStore& store, Communicator& comm, double bucket_mb);
  ~BucketedReduceSync() override;
  void on_grad_ready(Parameter& p) override;
  void finish(Context& ctx) override;
  const char* name() const override { return "bucketed_reduce"; }
  int64_t bytes_communicated() const override { return bytes_; }
  const GradPartition& partition() const { return partition_; }

 private:
  void start(int bucket);
  ParamStore& store_;
  Communicator& comm_;
  GradPartition partition_;
  std::unique_ptr<BucketReadiness> buckets_;
  std::unique_ptr<SmReservation> sms_;
  std::vector<std::unique_ptr<Work>> pending_;
  int64_t bytes_ = 0, step_bytes_ = 0;
};

// ZeRO-1's schedule for a --ddp name: naive or flat → ReduceScatterSync; overlap (one bucket
// per parameter) or bucketed (bucket_mb) → BucketedReduceSync.
std::unique_ptr<GradSync> make_zero1_sync(const std::string& ddp, Context& ctx, ParamStore& store,
                                          Communicator& comm, double bucket_mb);

}  // namespace pt::dist
