// The four data-parallel gradient strategies and ZeRO-1's two reduce schedules. Each differs
// only in when its collectives start and over which part of the flat gradient buffer; what a
// collective sends (fp32, or a bf16 copy: --grad-comm) is GradCollectives' business alone.
#include "dist/grad_sync.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "core/profiler.h"
#include "dist/comm_trace.h"
#include "dist/communicator.h"
#include "ops/elementwise.h"

namespace pt::dist {

const std::vector<std::string>& grad_sync_names() {
  static const std::vector<std::string> names = {"none", "naive", "flat", "overlap", "bucketed"};
  return names;
}

GradComm grad_comm_from_name(const std::string& name) {
  if (name == "fp32") return GradComm::FP32;
  if (name == "bf16") return GradComm::BF16;
  PT_FAIL("unknown --grad-comm '" + name + "' (expected fp32 or bf16)");
}

const char* grad_comm_name(GradComm c) { return c == GradComm::BF16 ? "bf16" : "fp32"; }

void broadcast_parameters(Context& ctx, ParamStore& store, Communicator& comm) {
  PT_CHECK(store.finalized(), "broadcast_parameters: the ParamStore is not finalized");
  OpScope scope(ctx, "broadcast parameters", OpFamily::Communication);
  Tensor params = store.flat_params();
  comm.broadcast(params, 0);
  store.refresh_lowp(ctx);
}

std::vector<Bucket> plan_buckets(const ParamStore& store, double bucket_mb) {
  PT_CHECK(bucket_mb >= 0, "--bucket-mb must be >= 0 (got " + std::to_string(bucket_mb) + ")");
  const double cap_bytes = bucket_mb * double(1 << 20);
  std::vector<Bucket> buckets;
  double open_bytes = 0;
  for (auto it = store.params().rbegin(); it != store.params().rend(); ++it) {
    const Parameter& p = **it;
    if (!p.trainable) continue;
    const double bytes = double(p.numel) * sizeof(float);
    if (buckets.empty() || (!buckets.back().params.empty() && open_bytes + bytes > cap_bytes)) {
      buckets.push_back({p.grad_offset, p.grad_offset, {}});
      open_bytes = 0;
    }
    Bucket& b = buckets.back();
    // Reverse registration order walks the gradient buffer downwards without gaps.
    PT_CHECK(p.grad_offset + p.numel == b.grad_begin || b.params.empty(),
             "plan_buckets: gradient of '" + p.name + "' is not adjacent to its bucket");
    b.grad_begin = p.grad_offset;
    if (b.params.empty()) b.grad_end = p.grad_offset + p.numel;
    b.params.push_back(p.index);
    open_bytes += bytes;
  }
  return buckets;
}

GradPartition::GradPartition(int64_t numel_, int world_)
    : numel(numel_), block(numel_ / world_), world(world_) {}

// Bucket readiness shared by the bucketed all-reduce and ZeRO-1's bucketed reduce: counts
// ready parameters per bucket and says when a bucket is complete.
class BucketReadiness {
 public:
  BucketReadiness(const ParamStore& store, std::vector<Bucket> buckets)
      : buckets_(std::move(buckets)), bucket_of_(store.size(), -1), ready_(buckets_.size(), 0),
        started_(buckets_.size(), false) {
    for (size_t b = 0; b < buckets_.size(); ++b)
      for (int i : buckets_[b].params) bucket_of_[i] = static_cast<int>(b);
  }
  const Bucket& operator[](int b) const { return buckets_[b]; }
  // The bucket p completes, or -1.
  int on_ready(const Parameter& p) {
    const int b = bucket_of_.at(p.index);
    PT_CHECK(b >= 0, "bucketed sync: '" + p.name + "' is in no bucket");
    if (++ready_[b] < static_cast<int>(buckets_[b].params.size())) return -1;
    started_[b] = true;
    return b;
  }
  // Buckets not started this step (their parameters were not all used), in bucket order;
  // every rank runs the same model, so every rank lists the same ones. Resets for the next step.
  std::vector<int> take_rest() {
    std::vector<int> rest;
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (!started_[b]) rest.push_back(static_cast<int>(b));
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(started_.begin(), started_.end(), false);
    return rest;
  }

 private:
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // by Parameter::index; -1 for frozen parameters
  std::vector<int> ready_;      // parameters ready per bucket this step
  std::vector<bool> started_;
};

// Keeps GEMMs off the communicator's reserved SMs (Communicator::reserved_sms) from the first
// collective an overlapped strategy starts during backward until finish() has queued the
// compute stream's wait on them; GEMMs before and after use every SM.
class SmReservation {
 public:
  SmReservation(Context& ctx, const Communicator& comm) : ctx_(ctx), sms_(comm.reserved_sms()) {}
  void collectives_started() { ctx_.reserve_sms(sms_); }
  void collectives_waited() { ctx_.reserve_sms(0); }

 private:
  Context& ctx_;
  int sms_;
};

namespace {

// A collective on a bf16 copy of an fp32 gradient range (--grad-comm bf16). It owns the
// staging buffer; wait() waits for the collective, casts this rank's result back into the fp32
// range and scales it by 1/world (on the compute stream, after the collective), then releases
// the staging buffer. Like any Work, destroyed before wait() it waits.
class CompressedWork : public Work {
 public:
  // result: the part of staging that holds this rank's sum; dst: the fp32 range it goes to
  // (undefined where this rank receives nothing: a reduce's non-root).
  CompressedWork(Context& ctx, Tensor staging, WorkPtr inner, Tensor result, Tensor dst, float scale)
      : ctx_(ctx), staging_(std::move(staging)), result_(std::move(result)), dst_(std::move(dst)),
        scale_(scale), inner_(std::move(inner)) {}
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
    if (dst_.defined()) {
      ops::cast(ctx_, dst_, result_);
      ops::scale_inplace(ctx_, dst_, scale_);
    }
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
  WorkPtr inner_;   // after the buffers: destroyed (so waited for) before they are
  bool finished_ = false;
};

}  // namespace

// The gradient collectives of every strategy: each averages an fp32 range of the gradient
// buffer over the ranks, sending it as it is (fp32) or as a bf16 copy (CompressedWork), and
// counts the bytes sent. It also keeps the collectives an overlapped strategy has in flight.
class GradCollectives {
 public:
  GradCollectives(Context& ctx, Communicator& comm, GradComm wire) : ctx_(ctx), comm_(comm), wire_(wire) {}

  // grads ← their average over ranks.
  WorkPtr all_reduce(Tensor grads) {
    if (wire_ == GradComm::FP32) return sent(grads, comm_.all_reduce_async(grads, ReduceOp::Average));
    Tensor staging = stage(grads);
    WorkPtr w = comm_.all_reduce_async(staging, ReduceOp::Sum);
    return compressed(grads, staging, std::move(w), staging, grads);
  }

  // On root, piece ← its average over ranks; the other ranks' piece is left as it is.
  WorkPtr reduce(Tensor piece, int root) {
    if (wire_ == GradComm::FP32) return sent(piece, comm_.reduce_async(piece, root, ReduceOp::Average));
    Tensor staging = stage(piece);
    WorkPtr w = comm_.reduce_async(staging, root, ReduceOp::Sum);
    return compressed(piece, staging, std::move(w), staging, comm_.rank() == root ? piece : Tensor());
  }

  // all (world · block): block `rank` ← its average over ranks; the other blocks are not used.
  WorkPtr reduce_scatter(Tensor all, int64_t block) {
    const int64_t mine_at = comm_.rank() * block;
    Tensor mine = all.narrow(0, mine_at, block);
    if (wire_ == GradComm::FP32) return sent(all, comm_.reduce_scatter_async(all, mine, ReduceOp::Average));
    Tensor staging = stage(all);
    Tensor result = staging.narrow(0, mine_at, block);  // in place in the staging buffer
    WorkPtr w = comm_.reduce_scatter_async(staging, result, ReduceOp::Sum);
    return compressed(all, staging, std::move(w), result, mine);
  }

  // In-flight collectives of an overlapped strategy, waited for by wait_all().
  void keep(WorkPtr w) { in_flight_.push_back(std::move(w)); }
  // bf16: completes the kept collectives that have finished, so during backward only those
  // still in flight hold a staging buffer. fp32 holds nothing: its waits all stay in finish().
  void reap() {
    if (wire_ == GradComm::FP32) return;
    for (auto& w : in_flight_)
      if (w && w->test()) {
        w->wait();
        w.reset();
      }
    in_flight_.erase(std::remove(in_flight_.begin(), in_flight_.end(), nullptr), in_flight_.end());
  }
  void wait_all() {
    for (auto& w : in_flight_) w->wait();
    in_flight_.clear();
  }

  // Bytes sent since the last call (the step's), and a fresh count.
  int64_t take_bytes() { return std::exchange(bytes_, 0); }

 private:
  WorkPtr sent(const Tensor& buf, WorkPtr w) {
    bytes_ += static_cast<int64_t>(buf.nbytes());
    return w;
  }
  // A bf16 copy of src (fp32, contiguous) in a buffer of its own.
  Tensor stage(const Tensor& src) {
    Tensor staging =
        Tensor::empty({src.numel()}, DType::BF16, src.device(), "grad_comm_bf16", MemCategory::Workspace);
    ops::cast(ctx_, staging, src);
    return staging;
  }
  // The collective `inner` just started on `staging`, a copy of `src`.
  WorkPtr compressed(const Tensor& src, const Tensor& staging, WorkPtr inner, const Tensor& result,
                     const Tensor& dst) {
    bytes_ += static_cast<int64_t>(staging.nbytes());
    if (CommTrace* trace = comm_.trace())  // the timeline names the gradients, not the copy
      trace->last_is_copy_of(src.data(), static_cast<int64_t>(src.nbytes()), dtype_name(staging.dtype()));
    return std::make_unique<CompressedWork>(ctx_, staging, std::move(inner), result, dst,
                                            1.0f / static_cast<float>(comm_.world_size()));
  }

  Context& ctx_;
  Communicator& comm_;
  GradComm wire_;
  std::vector<WorkPtr> in_flight_;
  int64_t bytes_ = 0;
};


namespace {

// What every averaging strategy shares: the initial broadcast, the listener registration,
// the collectives, and the byte count.
class AveragingSync : public GradSync {
 public:
  AveragingSync(Context& ctx, ParamStore& store, Communicator& comm, GradComm grad_comm)
      : store_(store), comm_(comm), sms_(ctx, comm), coll_(ctx, comm, grad_comm) {
    broadcast_parameters(ctx, store, comm);
    store.set_listener(this);
  }
  ~AveragingSync() override {
    if (store_.listener() == this) store_.set_listener(nullptr);
  }
  int64_t bytes_communicated() const override { return bytes_; }

 protected:
  void end_step() { bytes_ = coll_.take_bytes(); }
  std::vector<Parameter*> trainable_reversed() const {
    std::vector<Parameter*> out;
    for (auto it = store_.params().rbegin(); it != store_.params().rend(); ++it)
      if ((*it)->trainable) out.push_back(it->get());
    return out;
  }

  ParamStore& store_;
  Communicator& comm_;
  SmReservation sms_;
  GradCollectives coll_;
  int64_t bytes_ = 0;
};

// After backward, one blocking all-reduce per parameter: nothing overlaps, every parameter
// pays a collective's latency.
class NaiveSync : public AveragingSync {
 public:
  using AveragingSync::AveragingSync;
  const char* name() const override { return "naive"; }
  void finish(Context& ctx) override {
    OpScope scope(ctx, "grad sync: naive", OpFamily::Communication);
    for (Parameter* p : trainable_reversed()) coll_.all_reduce(p->grad())->wait();
    end_step();
  }
};

// After backward, one all-reduce over the whole flat gradient buffer (in fp32 without a copy):
// one latency, best bandwidth, nothing overlaps.
class FlatSync : public AveragingSync {
 public:
  using AveragingSync::AveragingSync;
  const char* name() const override { return "flat"; }
  void finish(Context& ctx) override {
    OpScope scope(ctx, "grad sync: flat", OpFamily::Communication);
    if (store_.grad_numel() > 0) coll_.all_reduce(store_.flat_grads())->wait();
    end_step();
  }
};

// One asynchronous all-reduce per parameter the moment its gradient is final: overlaps with
// the rest of backward, but pays one latency per parameter.
class OverlapSync : public AveragingSync {
 public:
  OverlapSync(Context& ctx, ParamStore& store, Communicator& comm, GradComm grad_comm)
      : AveragingSync(ctx, store, comm, grad_comm), started_(store.size(), false) {}
  const char* name() const override { return "overlap"; }

  void on_grad_ready(Parameter& p) override {
    comm_.poll();
    coll_.reap();
    started_.at(p.index) = true;
    sms_.collectives_started();
    coll_.keep(coll_.all_reduce(p.grad()));
  }

  void finish(Context& ctx) override {
    OpScope scope(ctx, "grad sync: overlap wait", OpFamily::Communication);
    // Parameters this forward did not use never became ready; every rank runs the same model,
    // so every rank starts the same ones here, in the same order.
    for (Parameter* p : trainable_reversed())
      if (!started_[p->index]) coll_.keep(coll_.all_reduce(p->grad()));
    coll_.wait_all();
    sms_.collectives_waited();
    std::fill(started_.begin(), started_.end(), false);
    end_step();
  }

 private:
  std::vector<bool> started_;  // by Parameter::index
};

// Buckets of contiguous gradients (plan_buckets); a bucket's all-reduce starts when its last
// parameter is ready: overlap with a latency per bucket instead of per parameter.
class BucketedSync : public AveragingSync {
 public:
  BucketedSync(Context& ctx, ParamStore& store, Communicator& comm, double bucket_mb, GradComm grad_comm)
      : AveragingSync(ctx, store, comm, grad_comm), buckets_(store, plan_buckets(store, bucket_mb)) {}
  const char* name() const override { return "bucketed"; }

  void on_grad_ready(Parameter& p) override {
    comm_.poll();
    coll_.reap();
    const int b = buckets_.on_ready(p);
    if (b >= 0) start(b);
  }

  void finish(Context& ctx) override {
    OpScope scope(ctx, "grad sync: bucketed wait", OpFamily::Communication);
    for (int b : buckets_.take_rest()) start(b);
    coll_.wait_all();
    sms_.collectives_waited();
    end_step();
  }

 private:
  void start(int b) {
    const Bucket& bk = buckets_[b];
    sms_.collectives_started();
    coll_.keep(coll_.all_reduce(store_.flat_grads().narrow(0, bk.grad_begin, bk.grad_end - bk.grad_begin)));
  }

  BucketReadiness buckets_;
};

}  // namespace

std::unique_ptr<GradSync> make_grad_sync(const std::string& name, Context& ctx, ParamStore& store,
                                         Communicator* comm, double bucket_mb, GradComm grad_comm) {
  PT_CHECK(store.finalized(), "make_grad_sync: the ParamStore is not finalized");
  if (name == "none") return std::make_unique<NoSync>();
  PT_CHECK(std::find(grad_sync_names().begin(), grad_sync_names().end(), name) != grad_sync_names().end(),
           "unknown --ddp strategy '" + name + "' (expected none, naive, flat, overlap or bucketed)");
  PT_CHECK(comm != nullptr, "--ddp " + name + " needs a communicator");
  if (name == "naive") return std::make_unique<NaiveSync>(ctx, store, *comm, grad_comm);
  if (name == "flat") return std::make_unique<FlatSync>(ctx, store, *comm, grad_comm);
  if (name == "overlap") return std::make_unique<OverlapSync>(ctx, store, *comm, grad_comm);
  return std::make_unique<BucketedSync>(ctx, store, *comm, bucket_mb, grad_comm);
}

ReduceScatterSync::ReduceScatterSync(Context& ctx, ParamStore& store, Communicator& comm, GradComm grad_comm)
    : store_(store),
      comm_(comm),
      partition_(store.grad_numel(), comm.world_size()),
      coll_(std::make_unique<GradCollectives>(ctx, comm, grad_comm)) {
  broadcast_parameters(ctx, store, comm);
  store.set_listener(this);
}

ReduceScatterSync::~ReduceScatterSync() {
  if (store_.listener() == this) store_.set_listener(nullptr);
}

void ReduceScatterSync::finish(Context& ctx) {
  OpScope scope(ctx, "grad sync: reduce-scatter", OpFamily::Communication);
  const GradPartition& part = partition_;
  Tensor grads = store_.flat_grads();
  WorkPtr scatter, tail;
  if (part.block > 0) scatter = coll_->reduce_scatter(grads.narrow(0, 0, part.scattered()), part.block);
  if (part.tail() > 0) tail = coll_->all_reduce(grads.narrow(0, part.scattered(), part.tail()));
  if (scatter) scatter->wait();
  if (tail) tail->wait();
  bytes_ = coll_->take_bytes();
}

BucketedReduceSync::BucketedReduceSync(Context& ctx, ParamStore& store, Communicator& comm, double bucket_mb,
                                       GradComm grad_comm)
    : store_(store),
      comm_(comm),
      partition_(store.grad_numel(), comm.world_size()),
      buckets_(std::make_unique<BucketReadiness>(store, plan_buckets(store, bucket_mb))),
      sms_(std::make_unique<SmReservation>(ctx, comm)),
      coll_(std::make_unique<GradCollectives>(ctx, comm, grad_comm)) {
  broadcast_parameters(ctx, store, comm);
  store.set_listener(this);
}

BucketedReduceSync::~BucketedReduceSync() {
  if (store_.listener() == this) store_.set_listener(nullptr);
}

void BucketedReduceSync::on_grad_ready(Parameter& p) {
  comm_.poll();
  coll_->reap();
  const int b = buckets_->on_ready(p);
  if (b >= 0) start(b);
}

void BucketedReduceSync::start(int b) {
  const Bucket& bk = (*buckets_)[b];
  sms_->collectives_started();
  for (int r = 0; r < partition_.world; ++r) {
    const int64_t lo = std::max(bk.grad_begin, partition_.begin(r));
    const int64_t hi = std::min(bk.grad_end, partition_.end(r));
    if (lo >= hi) continue;
    coll_->keep(coll_->reduce(store_.flat_grads().narrow(0, lo, hi - lo), r));
  }
}

void BucketedReduceSync::finish(Context& ctx) {
  OpScope scope(ctx, "grad sync: bucketed reduce wait", OpFamily::Communication);
  for (int b : buckets_->take_rest()) start(b);
  coll_->wait_all();
  sms_->collectives_waited();
  bytes_ = coll_->take_bytes();
}

std::unique_ptr<GradSync> make_zero1_sync(const std::string& ddp, Context& ctx, ParamStore& store,
                                          Communicator& comm, double bucket_mb, GradComm grad_comm) {
  PT_CHECK(store.finalized(), "make_zero1_sync: the ParamStore is not finalized");
  if (ddp == "naive" || ddp == "flat") return std::make_unique<ReduceScatterSync>(ctx, store, comm, grad_comm);
  if (ddp == "overlap") return std::make_unique<BucketedReduceSync>(ctx, store, comm, 0.0, grad_comm);
  PT_CHECK(ddp == "bucketed", "--shard-optimizer zero1 with --ddp '" + ddp +
                                  "': expected naive, flat (one reduce-scatter), overlap or bucketed");
  return std::make_unique<BucketedReduceSync>(ctx, store, comm, bucket_mb, grad_comm);
}

}  // namespace pt::dist
