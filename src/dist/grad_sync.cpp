// The four data-parallel gradient strategies and ZeRO-1's two reduce schedules. Each differs
// only in when its collectives start and over which part of the flat gradient buffer.
#include "dist/grad_sync.h"

#include <algorithm>

#include "core/error.h"
#include "core/profiler.h"
#include "dist/communicator.h"

namespace pt::dist {

const std::vector<std::string>& grad_sync_names() {
  static const std::vector<std::string> names = {"none", "naive", "flat", "overlap", "bucketed"};
  return names;
}

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

// What every averaging strategy shares: the initial broadcast, the listener registration,
// and the byte count.
class AveragingSync : public GradSync {
 public:
  AveragingSync(Context& ctx, ParamStore& store, Communicator& comm)
      : store_(store), comm_(comm), sms_(ctx, comm) {
    broadcast_parameters(ctx, store, comm);
    store.set_listener(this);
  }
  ~AveragingSync() override {
    if (store_.listener() == this) store_.set_listener(nullptr);
  }
  int64_t bytes_communicated() const override { return bytes_; }

 protected:
  WorkPtr start_average(Tensor grads) {
    step_bytes_ += static_cast<int64_t>(grads.nbytes());
    return comm_.all_reduce_async(grads, ReduceOp::Average);
  }
  void end_step() {
    bytes_ = step_bytes_;
    step_bytes_ = 0;
  }
  std::vector<Parameter*> trainable_reversed() const {
    std::vector<Parameter*> out;
    for (auto it = store_.params().rbegin(); it != store_.params().rend(); ++it)
      if ((*it)->trainable) out.push_back(it->get());
    return out;
  }

  ParamStore& store_;
  Communicator& comm_;
  SmReservation sms_;
  int64_t bytes_ = 0, step_bytes_ = 0;
};

// After backward, one blocking all-reduce per parameter: nothing overlaps, every parameter
// pays a collective's latency.
class NaiveSync : public AveragingSync {
 public:
  using AveragingSync::AveragingSync;
  const char* name() const override { return "naive"; }
  void finish(Context& ctx) override {
    OpScope scope(ctx, "grad sync: naive", OpFamily::Communication);
    for (Parameter* p : trainable_reversed()) start_average(p->grad())->wait();
    end_step();
  }
};

// After backward, one all-reduce over the whole flat gradient buffer (no copy): one latency,
// best bandwidth, nothing overlaps.
class FlatSync : public AveragingSync {
 public:
  using AveragingSync::AveragingSync;
  const char* name() const override { return "flat"; }
  void finish(Context& ctx) override {
    OpScope scope(ctx, "grad sync: flat", OpFamily::Communication);
    if (store_.grad_numel() > 0) start_average(store_.flat_grads())->wait();
    end_step();
  }
};

// One asynchronous all-reduce per parameter the moment its gradient is final: overlaps with
// the rest of backward, but pays one latency per parameter.
class OverlapSync : public AveragingSync {
 public:
  OverlapSync(Context& ctx, ParamStore& store, Communicator& comm)
      : AveragingSync(ctx, store, comm), started_(store.size(), false) {}
  const char* name() const override { return "overlap"; }

  void on_grad_ready(Parameter& p) override {
    comm_.poll();
    started_.at(p.index) = true;
    sms_.collectives_started();
    pending_.push_back(start_average(p.grad()));
  }

  void finish(Context& ctx) override {
    OpScope scope(ctx, "grad sync: overlap wait", OpFamily::Communication);
    // Parameters this forward did not use never became ready; every rank runs the same model,
    // so every rank starts the same ones here, in the same order.
    for (Parameter* p : trainable_reversed())
      if (!started_[p->index]) pending_.push_back(start_average(p->grad()));
    for (auto& w : pending_) w->wait();
    sms_.collectives_waited();
    pending_.clear();
    std::fill(started_.begin(), started_.end(), false);
    end_step();
  }

 private:
  std::vector<bool> started_;  // by Parameter::index
  std::vector<WorkPtr> pending_;
};

// Buckets of contiguous gradients (plan_buckets); a bucket's all-reduce starts when its last
// parameter is ready: overlap with a latency per bucket instead of per parameter.
class BucketedSync : public AveragingSync {
 public:
  BucketedSync(Context& ctx, ParamStore& store, Communicator& comm, double bucket_mb)
      : AveragingSync(ctx, store, comm), buckets_(store, plan_buckets(store, bucket_mb)) {}
  const char* name() const override { return "bucketed"; }

  void on_grad_ready(Parameter& p) override {
    comm_.poll();
    const int b = buckets_.on_ready(p);
    if (b >= 0) start(b);
  }

  void finish(Context& ctx) override {
    OpScope scope(ctx, "grad sync: bucketed wait", OpFamily::Communication);
    for (int b : buckets_.take_rest()) start(b);
    for (auto& w : pending_) w->wait();
    sms_.collectives_waited();
    pending_.clear();
    end_step();
  }

 private:
  void start(int b) {
    const Bucket& bk = buckets_[b];
    sms_.collectives_started();
    pending_.push_back(start_average(store_.flat_grads().narrow(0, bk.grad_begin, bk.grad_end - bk.grad_begin)));
  }

  BucketReadiness buckets_;
  std::vector<WorkPtr> pending_;
};

}  // namespace

std::unique_ptr<GradSync> make_grad_sync(const std::string& name, Context& ctx, ParamStore& store,
                                         Communicator* comm, double bucket_mb) {
  PT_CHECK(store.finalized(), "make_grad_sync: the ParamStore is not finalized");
  if (name == "none") return std::make_unique<NoSync>();
  PT_CHECK(std::find(grad_sync_names().begin(), grad_sync_names().end(), name) != grad_sync_names().end(),
           "unknown --ddp strategy '" + name + "' (expected none, naive, flat, overlap or bucketed)");
  PT_CHECK(comm != nullptr, "--ddp " + name + " needs a communicator");
  if (name == "naive") return std::make_unique<NaiveSync>(ctx, store, *comm);
  if (name == "flat") return std::make_unique<FlatSync>(ctx, store, *comm);
  if (name == "overlap") return std::make_unique<OverlapSync>(ctx, store, *comm);
  return std::make_unique<BucketedSync>(ctx, store, *comm, bucket_mb);
}

ReduceScatterSync::ReduceScatterSync(Context& ctx, ParamStore& store, Communicator& comm)
    : store_(store), comm_(comm), partition_(store.grad_numel(), comm.world_size()) {
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
  int64_t bytes = 0;
  WorkPtr scatter, tail;
  if (part.block > 0) {
    Tensor all = grads.narrow(0, 0, part.scattered());
    Tensor mine = grads.narrow(0, part.begin(comm_.rank()), part.block);
    scatter = comm_.reduce_scatter_async(all, mine, ReduceOp::Average);
    bytes += static_cast<int64_t>(all.nbytes());
  }
  if (part.tail() > 0) {
    Tensor t = grads.narrow(0, part.scattered(), part.tail());
    tail = comm_.all_reduce_async(t, ReduceOp::Average);
    bytes += static_cast<int64_t>(t.nbytes());
  }
  if (scatter) scatter->wait();
  if (tail) tail->wait();
  bytes_ = bytes;
}

BucketedReduceSync::BucketedReduceSync(Context& ctx, ParamStore& store, Communicator& comm, double bucket_mb)
    : store_(store),
      comm_(comm),
      partition_(store.grad_numel(), comm.world_size()),
      buckets_(std::make_unique<BucketReadiness>(store, plan_buckets(store, bucket_mb))),
      sms_(std::make_unique<SmReservation>(ctx, comm)) {
  broadcast_parameters(ctx, store, comm);
  store.set_listener(this);
}

BucketedReduceSync::~BucketedReduceSync() {
  if (store_.listener() == this) store_.set_listener(nullptr);
}

void BucketedReduceSync::on_grad_ready(Parameter& p) {
  comm_.poll();
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
    Tensor piece = store_.flat_grads().narrow(0, lo, hi - lo);
    pending_.push_back(comm_.reduce_async(piece, r, ReduceOp::Average));
    step_bytes_ += static_cast<int64_t>(piece.nbytes());
  }
}

void BucketedReduceSync::finish(Context& ctx) {
  OpScope scope(ctx, "grad sync: bucketed reduce wait", OpFamily::Communication);
  for (int b : buckets_->take_rest()) start(b);
  for (auto& w : pending_) w->wait();
  sms_->collectives_waited();
  pending_.clear();
  bytes_ = step_bytes_;
  step_bytes_ = 0;
}

std::unique_ptr<GradSync> make_zero1_sync(const std::string& ddp, Context& ctx, ParamStore& store,
                                          Communicator& comm, double bucket_mb) {
  PT_CHECK(store.finalized(), "make_zero1_sync: the ParamStore is not finalized");
  if (ddp == "naive" || ddp == "flat") return std::make_unique<ReduceScatterSync>(ctx, store, comm);
  if (ddp == "overlap") return std::make_unique<BucketedReduceSync>(ctx, store, comm, 0.0);
  PT_CHECK(ddp == "bucketed", "--shard-optimizer zero1 with --ddp '" + ddp +
                                  "': expected naive, flat (one reduce-scatter), overlap or bucketed");
  return std::make_unique<BucketedReduceSync>(ctx, store, comm, bucket_mb);
}

}  // namespace pt::dist
