// ZeRO-1's bucketed partition and its reduce-scatter gradient step (zero1.h).
#include "parallel/zero1.h"

#include <algorithm>

#include "core/error.h"
#include "core/profiler.h"
#include "parallel/communicator.h"
#include "parallel/grad_collectives.h"
#include "parallel/strategies.h"

namespace pt::parallel {

Zero1Layout::Zero1Layout(const ParamStore& store, int world_, double bucket_mb)
    : Zero1Layout(grad_spans(store), world_, bucket_mb) {}

Zero1Layout::Zero1Layout(const std::vector<GradSpan>& spans, int world_, double bucket_mb) : world(world_) {
  for (const GradSpan& p : spans)
    if (p.trainable) numel += p.numel;
  PT_CHECK(world >= 1, "Zero1Layout: world size must be positive");
  std::vector<int64_t> wanted_ends;  // ascending
  if (bucket_mb == kOneBucket) {
    wanted_ends.push_back(numel);
  } else {
    for (const Bucket& b : plan_buckets(spans, bucket_mb)) wanted_ends.push_back(b.grad_end);
    std::sort(wanted_ends.begin(), wanted_ends.end());
  }
  int64_t begin = 0;
  for (int64_t wanted : wanted_ends) {
    if (wanted <= begin) continue;  // already inside the previous (rounded-up) bucket
    int64_t end = begin + (wanted - begin + world - 1) / world * world;
    if (end > numel) end = begin + (numel - begin) / world * world;
    if (end <= begin) continue;
    buckets.push_back({begin, end, {}});
    begin = end;
  }
  tail_begin = begin;
  for (Bucket& b : buckets)
    for (const GradSpan& p : spans)
      if (p.trainable && p.grad_offset < b.grad_end && p.grad_offset + p.numel > b.grad_begin)
        b.params.push_back(p.index);
}

std::vector<std::pair<int64_t, int64_t>> Zero1Layout::owned(int r) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto add = [&](int64_t lo, int64_t hi) {
    if (lo >= hi) return;
    if (!out.empty() && out.back().second == lo)
      out.back().second = hi;
    else
      out.emplace_back(lo, hi);
  };
  for (size_t b = 0; b < buckets.size(); ++b) add(chunk_begin(b, r), chunk_begin(b, r) + chunk(b));
  if (r == world - 1) add(tail_begin, numel);
  return out;
}

int64_t Zero1Layout::owned_numel(int r) const {
  int64_t n = 0;
  for (const auto& [lo, hi] : owned(r)) n += hi - lo;
  return n;
}

std::shared_ptr<const Zero1Layout> zero1_layout(const StrategySpec& ddp, const ParamStore& store, int world,
                                                double bucket_mb) {
  PT_CHECK(ddp.buckets != BucketPolicy::None, "--shard-optimizer zero1 needs averaged gradients: not --ddp none");
  return std::make_shared<Zero1Layout>(store, world, ddp.zero1_bucket_mb(bucket_mb));
}

Zero1Sync::Zero1Sync(Context& ctx, ParamStore& store, Communicator& comm, std::shared_ptr<const Zero1Layout> layout,
                     bool overlap, GradComm grad_comm)
    : store_(store),
      comm_(comm),
      layout_(std::move(layout)),
      overlap_(overlap),
      ready_(overlap ? std::make_unique<BucketReadiness>(store, layout_->buckets) : nullptr),
      sms_(std::make_unique<SmReservation>(ctx, comm)),
      coll_(std::make_unique<GradCollectives>(ctx, comm, grad_comm)) {
  PT_CHECK(layout_->world == comm.world_size() && layout_->numel == store.grad_numel(),
           "Zero1Sync: the layout was made for another world size or store");
  broadcast_parameters(ctx, store, comm);
  registration_ = register_gradients(comm, store);
  store.add_listener(this);
}

Zero1Sync::~Zero1Sync() { store_.remove_listener(this); }

void Zero1Sync::on_grad_ready(Parameter& p) {
  if (!overlap_) return;
  comm_.poll();
  coll_->reap();
  for (int b : ready_->on_ready(p)) start(b);
}

void Zero1Sync::start(int b) {
  const Bucket& bk = layout_->buckets[b];
  if (overlap_) sms_->collectives_started();
  Tensor grads = store_.flat_grads().narrow(0, bk.grad_begin, bk.grad_end - bk.grad_begin);
  coll_->keep(coll_->reduce_scatter(grads, layout_->chunk(b)));
}

void Zero1Sync::finish(Context& ctx) {
  OpScope scope(ctx, overlap_ ? "grad sync: bucketed reduce-scatter wait" : "grad sync: reduce-scatter",
                OpFamily::Communication);
  if (overlap_) {
    for (int b : ready_->take_rest()) start(b);
  } else {
    for (int b = 0; b < static_cast<int>(layout_->buckets.size()); ++b) start(b);
  }
  const int64_t tail = layout_->numel - layout_->tail_begin;
  if (tail > 0) coll_->keep(coll_->all_reduce(store_.flat_grads().narrow(0, layout_->tail_begin, tail)));
  coll_->wait_all();
  if (overlap_) sms_->collectives_waited();
  bytes_ = coll_->take_bytes();
}

std::unique_ptr<GradSync> make_zero1_sync(const StrategySpec& ddp, Context& ctx, ParamStore& store, Communicator& comm,
                                          std::shared_ptr<const Zero1Layout> layout, GradComm grad_comm) {
  PT_CHECK(store.finalized(), "make_zero1_sync: the ParamStore is not finalized");
  const bool overlap = ddp.overlapped;
  return std::make_unique<Zero1Sync>(ctx, store, comm, std::move(layout), overlap, grad_comm);
}

std::unique_ptr<GradSync> make_zero1_sync(const StrategySpec& ddp, Context& ctx, ParamStore& store, Communicator& comm,
                                          double bucket_mb, GradComm grad_comm) {
  PT_CHECK(store.finalized(), "make_zero1_sync: the ParamStore is not finalized");
  return make_zero1_sync(ddp, ctx, store, comm, zero1_layout(ddp, store, comm.world_size(), bucket_mb), grad_comm);
}

}  // namespace pt::parallel
