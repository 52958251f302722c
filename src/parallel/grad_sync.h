#pragma once
// Gradient synchronisation strategies for data parallelism (naive, flat, overlap, bucketed;
// ZeRO-1's reduce-scatter is in zero1.h). A strategy listens to the ParamStore's gradient-ready
// events during backward and, by the end of finish(), leaves averaged gradients in the flat buffer.
// Every strategy sends its gradients in fp32 or, with --grad-comm bf16, in bf16 (GradComm).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "model/param_store.h"

namespace pt::parallel {

class Communicator;

// --grad-comm: the element type gradients travel in. Gradients, the optimizer and the master
// weights stay fp32 either way, and parameter broadcasts and all-gathers are never compressed.
//   FP32  each collective averages the fp32 gradient range itself.
//   BF16  (PyTorch DDP's bf16_compress_hook) each collective casts its fp32 range to a bf16
//         staging buffer of its own (round to nearest even), SUMS the bf16 values over the
//         ranks (every partial sum rounded to bf16: NCCL's ncclBfloat16 sum, or the MPI
//         communicator's bf16 sum, which adds in fp32), casts the sum back into the fp32 range
//         and multiplies it by 1/world in fp32. Nothing is divided in bf16. With 2 ranks every
//         element ends as exactly float(bf16(bf16(g0) + bf16(g1))) / 2; with more, the partial
//         sums follow the collective's order. Half the bytes on the wire; each rounding is up to
//         2^-8 relative (8 significant bits).
// A staging buffer lives from its collective's start to its wait (tag "grad_comm_bf16",
// MemCategory::Workspace): no bf16 copy of the gradients persists between steps (flat and the
// reduce-scatter, one collective over the whole buffer, hold one during finish()).
// On the GPU both casts run on the compute stream (the collective is ordered after the first,
// the second after Work::wait()): no host synchronisation. bytes_communicated() counts bf16 bytes.
enum class GradComm { FP32, BF16 };
GradComm grad_comm_from_name(const std::string& name);  // "fp32" | "bf16"; throws on others
const char* grad_comm_name(GradComm c);

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
  // Whether finish() changes gradients after backward reported them final (every strategy
  // with collectives); when not, the optimizer may sum the norm during backward.
  virtual bool changes_gradients() const { return true; }
};

// The no-op strategy of single-process training (and of `--ddp none`, the benchmark floor).
class NoSync : public GradSync {
 public:
  void finish(Context&) override {}
  const char* name() const override { return "none"; }
  bool changes_gradients() const override { return false; }
};

// `--ddp` names: none, naive, flat, overlap, bucketed.
const std::vector<std::string>& grad_sync_names();

// --bucket-mb: a cap in MiB (2^20 bytes) of fp32 gradient per bucket. 0 means one bucket per
// parameter (the collectives of `overlap`); not given (kDefaultBucketMB) means PyTorch DDP's
// default cap of 25 MiB. A parameter larger than the cap gets a bucket of its own.
constexpr double kDefaultBucketMB = 25.0;

// A contiguous range of the flat gradient buffer, so a bucket needs no copy, and the trainable
// parameters with gradient elements in it. plan_buckets takes whole parameters in reverse
// registration order (the order backward finishes them); ZeRO-1's layout cuts buckets at
// element boundaries, so a parameter may lie in several of them.
struct Bucket {
  int64_t grad_begin = 0, grad_end = 0;  // elements of the flat gradient buffer
  std::vector<int> params;               // Parameter::index of its members (plan_buckets: reverse order)
};
std::vector<Bucket> plan_buckets(const ParamStore& store, double bucket_mb);
// A parameter as the bucket planners see it: a ParamStore's, or one computed from shapes alone
// (plan/, which sizes jobs without building the model). Registration order.
struct GradSpan {
  int index = 0;
  int64_t grad_offset = -1, numel = 0;  // grad_offset: -1 when frozen
  bool trainable = true;
};
std::vector<GradSpan> grad_spans(const ParamStore& store);
std::vector<Bucket> plan_buckets(const std::vector<GradSpan>& spans, double bucket_mb);

struct StrategySpec;

// The strategy `spec` (an entry of strategies()) on a finalized store. Every strategy but `none` first makes rank
// 0's parameters (trainable or frozen) everyone's, then registers itself as the store's
// gradient-ready listener; gradients are averaged (sum / world size), frozen parameters
// skipped, a tied parameter synchronised once. bucket_mb is read by `bucketed` only; `none`
// ignores grad_comm.
std::unique_ptr<GradSync> make_grad_sync(const StrategySpec& spec, Context& ctx, ParamStore& store, Communicator* comm,
                                         double bucket_mb = kDefaultBucketMB, GradComm grad_comm = GradComm::FP32);

// Rank 0's parameters to every rank (the whole flat buffer, frozen ones included), and the
// bf16 mirror refreshed.
void broadcast_parameters(Context& ctx, ParamStore& store, Communicator& comm);

}  // namespace pt::parallel
