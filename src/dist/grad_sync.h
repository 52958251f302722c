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

// ZeRO-1's gradient step (it replaces the all-reduce): after backward one reduce-scatter
// averages block r of the gradients into rank r (the tail by an all-reduce). Only this rank's
// part [begin(rank), end(rank)) is meaningful afterwards; the optimizer steps just that part.
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

}  // namespace pt::dist
