// The four data-parallel gradient strategies. Each differs only in when its collectives start
// and over which part of the flat gradient buffer; what a collective sends (fp32, or a bf16 copy:
// --grad-comm) is GradCollectives' business alone (grad_collectives.h).
#include "parallel/grad_sync.h"
#include "core/enum_names.h"

#include <algorithm>

#include "core/error.h"
#include "core/profiler.h"
#include "parallel/communicator.h"
#include "parallel/grad_collectives.h"
#include "parallel/strategies.h"
#include "parallel/zero1.h"

namespace pt::parallel {

const std::vector<std::string>& grad_sync_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const StrategySpec& s : strategies()) v.push_back(s.name);
    return v;
  }();
  return names;
}

namespace {
constexpr EnumName<GradComm> kGradComms[] = {{GradComm::FP32, "fp32"}, {GradComm::BF16, "bf16"}};
}

GradComm grad_comm_from_name(const std::string& name) { return enum_from_name(kGradComms, name, "--grad-comm"); }
const char* grad_comm_name(GradComm c) { return enum_name(kGradComms, c); }

void broadcast_parameters(Context& ctx, ParamStore& store, Communicator& comm) {
  PT_CHECK(store.finalized(), "broadcast_parameters: the ParamStore is not finalized");
  OpScope scope(ctx, "broadcast parameters", OpFamily::Communication);
  Tensor params = store.flat_params();
  comm.broadcast(params, 0);
  store.refresh_lowp(ctx);
}

std::vector<GradSpan> grad_spans(const ParamStore& store) {
  std::vector<GradSpan> out;
  for (const auto& p : store.params()) out.push_back({p->index, p->grad_offset, p->numel, p->trainable});
  return out;
}

std::vector<Bucket> plan_buckets(const ParamStore& store, double bucket_mb) {
  return plan_buckets(grad_spans(store), bucket_mb);
}

std::vector<Bucket> plan_buckets(const std::vector<GradSpan>& spans, double bucket_mb) {
  PT_CHECK(bucket_mb >= 0, "--bucket-mb must be >= 0 (got " + std::to_string(bucket_mb) + ")");
  const double cap_bytes = bucket_mb * double(1 << 20);
  std::vector<Bucket> buckets;
  double open_bytes = 0;
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    const GradSpan& p = *it;
    if (!p.trainable) continue;
    const double bytes = double(p.numel) * sizeof(float);
    if (buckets.empty() || (!buckets.back().params.empty() && open_bytes + bytes > cap_bytes)) {
      buckets.push_back({p.grad_offset, p.grad_offset, {}});
      open_bytes = 0;
    }
    Bucket& b = buckets.back();
    // Reverse registration order walks the gradient buffer downwards without gaps.
    PT_CHECK(p.grad_offset + p.numel == b.grad_begin || b.params.empty(),
             "plan_buckets: the gradient of parameter " + std::to_string(p.index) + " is not adjacent to its bucket");
    b.grad_begin = p.grad_offset;
    if (b.params.empty()) b.grad_end = p.grad_offset + p.numel;
    b.params.push_back(p.index);
    open_bytes += bytes;
  }
  return buckets;
}

namespace {

// What every averaging strategy shares: the initial broadcast, the listener registration,
// the collectives, and the byte count.
class AveragingSync : public GradSync {
 public:
  AveragingSync(Context& ctx, ParamStore& store, Communicator& comm, GradComm grad_comm)
      : store_(store), comm_(comm), sms_(ctx, comm), coll_(ctx, comm, grad_comm) {
    broadcast_parameters(ctx, store, comm);
    registration_ = register_gradients(comm, store);
    store.add_listener(this);
  }
  ~AveragingSync() override { store_.remove_listener(this); }
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
  RegistrationPtr registration_;  // before coll_: released after its collectives are waited for
  GradCollectives coll_;
  int64_t bytes_ = 0;
};

// After backward, blocking all-reduces: nothing overlaps. Naive: one per parameter, each paying
// a collective's latency. Flat: one over the whole flat gradient buffer (in fp32 without a
// copy), one latency at the best bandwidth.
template <bool kFlat>
class BlockingSync : public AveragingSync {
 public:
  using AveragingSync::AveragingSync;
  const char* name() const override { return kFlat ? "flat" : "naive"; }
  void finish(Context& ctx) override {
    OpScope scope(ctx, kFlat ? "grad sync: flat" : "grad sync: naive", OpFamily::Communication);
    if (kFlat) {
      if (store_.grad_numel() > 0) coll_.all_reduce(store_.flat_grads())->wait();
    } else {
      for (Parameter* p : trainable_reversed()) coll_.all_reduce(p->grad())->wait();
    }
    end_step();
  }
};
using NaiveSync = BlockingSync<false>;
using FlatSync = BlockingSync<true>;

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
    for (int b : buckets_.on_ready(p)) start(b);
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

std::unique_ptr<GradSync> make_grad_sync(const StrategySpec& spec, Context& ctx, ParamStore& store, Communicator* comm,
                                         double bucket_mb, GradComm grad_comm) {
  PT_CHECK(store.finalized(), "make_grad_sync: the ParamStore is not finalized");
  if (!spec.make) return std::make_unique<NoSync>();
  PT_CHECK(comm != nullptr, std::string("--ddp ") + spec.name + " needs a communicator");
  return spec.make(ctx, store, *comm, bucket_mb, grad_comm);
}

// ---- the table ---------------------------------------------------------------------------

namespace {
template <class Sync>
std::unique_ptr<GradSync> make_unbucketed(Context& ctx, ParamStore& store, Communicator& comm, double, GradComm gc) {
  return std::make_unique<Sync>(ctx, store, comm, gc);
}
std::unique_ptr<GradSync> make_bucketed(Context& ctx, ParamStore& store, Communicator& comm, double bucket_mb,
                                        GradComm gc) {
  return std::make_unique<BucketedSync>(ctx, store, comm, bucket_mb, gc);
}
}  // namespace

double StrategySpec::zero1_bucket_mb(double bucket_mb) const {
  switch (buckets) {
    case BucketPolicy::PerParameter: return overlapped ? 0.0 : Zero1Layout::kOneBucket;
    case BucketPolicy::Capped: return bucket_mb;
    default: return Zero1Layout::kOneBucket;
  }
}

const std::vector<StrategySpec>& strategies() {
  static const std::vector<StrategySpec> table = {
      {"none", "no gradient communication (the floor)", false, BucketPolicy::None, nullptr},
      {"naive", "one all-reduce per parameter after backward", false, BucketPolicy::PerParameter,
       make_unbucketed<NaiveSync>},
      {"flat", "one all-reduce of the whole gradient buffer after backward", false, BucketPolicy::One,
       make_unbucketed<FlatSync>},
      {"overlap", "one async all-reduce per parameter as soon as backward finishes it", true,
       BucketPolicy::PerParameter, make_unbucketed<OverlapSync>},
      {"bucketed", "async all-reduce of each --bucket-mb bucket once backward finishes it", true, BucketPolicy::Capped,
       make_bucketed},
  };
  return table;
}

const StrategySpec& strategy(const std::string& name) {
  for (const StrategySpec& s : strategies())
    if (name == s.name) return s;
  PT_FAIL("unknown --ddp strategy '" + name + "' (expected " + strategy_names_text() + ")");
}

std::string strategy_names_text() {
  std::string text;
  const auto& t = strategies();
  for (size_t i = 0; i < t.size(); ++i)
    text += (i == 0 ? "" : i + 1 == t.size() ? " or " : ", ") + std::string(t[i].name);
  return text;
}

std::vector<std::string> strategy_report_order() {
  std::vector<std::string> out;
  auto add = [&](const std::string& n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  for (const StrategySpec& s : strategies()) add(s.name);
  for (const StrategySpec& s : strategies())
    if (s.buckets != BucketPolicy::None) add(zero1_sync_name(s.overlapped));
  return out;
}

}  // namespace pt::parallel
