// ZeRO-1's optimizer: the update of this rank's chunks and the parameter all-gathers, waited for
// at the end of the step or prefetched for the next forward (zero1_optimizer.h).
#include "optim/zero1_optimizer.h"

#include <algorithm>

#include "core/error.h"
#include "core/profiler.h"
#include "ops/elementwise.h"

namespace pt {

Zero1Optimizer::Zero1Optimizer(const OptimizerConfig& cfg, Context& ctx, parallel::Communicator& comm,
                               ParamStore& store, std::shared_ptr<const parallel::Zero1Layout> layout, bool prefetch)
    : RankShardedOptimizer(cfg, ctx, comm), store_(store), layout_(std::move(layout)) {
  PT_CHECK(store.finalized(), "Zero1Optimizer: the ParamStore is not finalized");
  PT_CHECK(layout_->world == comm.world_size() && layout_->numel == store.grad_numel(),
           "Zero1Optimizer: the layout was made for another world size or store");
  for (const auto& [lo, hi] : layout_->owned(comm.rank()))
    for (auto& r : ranges_of_grad_slice(store, lo, hi)) ranges_.push_back(r);
  if (!ranges_.empty()) inner_ = make_optimizer(cfg, ctx, ranges_);
  for (const auto& p : store.params()) {
    if (!p->trainable) continue;
    const int64_t shift = p->offset - p->grad_offset;
    if (param_shift_ == -1 && p->grad_offset == 0) param_shift_ = shift;
    if (shift != param_shift_) {
      param_shift_ = -1;
      break;
    }
  }
  prefetch_ = prefetch && param_shift_ >= 0;
  if (prefetch_) store.set_read_listener(this);
  // In-place gathers into the parameter buffer may then run on the copy engines.
  if (param_shift_ >= 0 && store.numel() > 0) registration_ = comm.register_buffer(store.flat_params());
  gather_mirror_ = param_shift_ >= 0 && store.has_lowp() && layout_->world > 1;
  if (gather_mirror_) {
    lowp_registration_ = comm.register_buffer(store.flat_lowp());
    int64_t packed = 0;
    for (const auto& p : store.params()) {
      if (!p->trainable || !p->reads_master) continue;
      master_read_.push_back({p->grad_offset, p->grad_offset + p->numel});
      packed += p->numel;
    }
    if (packed > 0)
      master_packed_ = Tensor::empty({packed}, DType::F32, store.device(), "zero1_master_read", MemCategory::Other);
  }
}

Zero1Optimizer::~Zero1Optimizer() {
  try {
    wait_gathers_below(layout_->numel);
    comm_.synchronize();  // every gather done before the registration goes
  } catch (const std::exception& e) {
    parallel::comm_fatal("zero1 parameter all-gather", std::string("abandoned gather failed: ") + e.what());
  }
  if (store_.read_listener() == this) store_.set_read_listener(nullptr);
}

void Zero1Optimizer::add_ranges(const std::vector<FlatRange>&) {
  PT_FAIL("zero1 shards the whole gradient buffer: every trainable parameter is included at "
          "construction, no parameter group can be added");
}

void Zero1Optimizer::step(Context& ctx, float lr) {
  // The last step's gathers read this rank's chunks, which the update is about to rewrite.
  wait_gathers_below(layout_->numel);
  step_wrapped(inner_.get(), ctx, lr);
  OpScope scope(ctx, "zero1: all-gather parameters", OpFamily::Communication);
  if (param_shift_ < 0) {
    gather_packed(ctx);
    return;
  }
  if (gather_mirror_) {             // the update wrote this rank's chunks of the mirror (Optimizer::cast_mirrors)
    share_master_read_params(ctx);  // first: the gathers would queue it behind them
    master_stale_ = true;
  }
  start_gathers_in_place();
  if (prefetch_) {
    ctx.reserve_sms(comm_.reserved_sms());  // the gathers run beside the next forward's GEMMs
  } else {
    wait_gathers_below(layout_->numel);
  }
}

std::vector<Zero1Optimizer::Gather> Zero1Optimizer::all_gather_chunks(Tensor& buf) {
  const parallel::Zero1Layout& L = *layout_;
  const int r = comm_.rank();
  std::vector<Gather> out;
  for (size_t b = 0; b < L.buckets.size(); ++b) {
    const int64_t lo = L.buckets[b].grad_begin, hi = L.buckets[b].grad_end;
    Tensor all = buf.narrow(0, lo, hi - lo);
    Tensor mine = buf.narrow(0, L.chunk_begin(b, r), L.chunk(b));
    out.push_back({comm_.all_gather_async(mine, all), lo, hi});
  }
  if (L.tail_begin < L.numel) {
    Tensor tail = buf.narrow(0, L.tail_begin, L.numel - L.tail_begin);
    out.push_back({comm_.broadcast_async(tail, L.world - 1), L.tail_begin, L.numel});
  }
  return out;
}

// Trainable parameters are [shift, shift + numel) of the parameter buffer, in gradient order:
// gather straight into it.
void Zero1Optimizer::start_gathers_in_place() {
  Tensor flat = gather_mirror_ ? store_.flat_lowp() : store_.flat_params();
  Tensor params = flat.narrow(0, param_shift_, layout_->numel);
  gathers_ = all_gather_chunks(params);
  next_ = 0;
}

// Each element has one owner: the others contribute zeros, so the sum is the owner's value exactly.
void Zero1Optimizer::share_master_read_params(Context& ctx) {
  if (!master_packed_.defined()) return;
  fill_zero(ctx, master_packed_.data(), master_packed_.device().kind, master_packed_.nbytes());
  const auto owned = layout_->owned(comm_.rank());
  Tensor params = store_.flat_params().narrow(0, param_shift_, layout_->numel);
  int64_t at = 0;  // where each range starts in the packed buffer
  for (const auto& [plo, phi] : master_read_) {
    for (const auto& [olo, ohi] : owned) {
      const int64_t lo = std::max(plo, olo), hi = std::min(phi, ohi);
      if (lo < hi) master_packed_.narrow(0, at + lo - plo, hi - lo).copy_from(params.narrow(0, lo, hi - lo), ctx);
    }
    at += phi - plo;
  }
  comm_.all_reduce(master_packed_, parallel::ReduceOp::Sum);
  at = 0;
  for (const auto& [plo, phi] : master_read_) {
    params.narrow(0, plo, phi - plo).copy_from(master_packed_.narrow(0, at, phi - plo), ctx);
    at += phi - plo;
  }
}

void Zero1Optimizer::gather_master(Context& ctx) {
  Tensor params = store_.flat_params().narrow(0, param_shift_, layout_->numel);
  for (Gather& g : all_gather_chunks(params)) g.work->wait();
  master_stale_ = false;
}

void Zero1Optimizer::wait_gathers_below(int64_t end) {
  if (next_ >= gathers_.size()) return;
  comm_.poll();  // MPI advances outstanding gathers only inside MPI calls
  const bool mirror = store_.has_lowp();
  for (; next_ < gathers_.size() && gathers_[next_].lo < end; ++next_) {
    Gather& g = gathers_[next_];
    g.work->wait();
    g.work.reset();
    if (mirror && !gather_mirror_) {  // one cast over the whole range: this rank's chunk gets the values it has
      Tensor lowp = store_.flat_lowp().narrow(0, param_shift_ + g.lo, g.hi - g.lo);
      ops::cast(ctx_, lowp, store_.flat_params().narrow(0, param_shift_ + g.lo, g.hi - g.lo));
    }
  }
  if (next_ >= gathers_.size()) {
    gathers_.clear();
    next_ = 0;
    if (prefetch_) ctx_.reserve_sms(0);
  }
}

void Zero1Optimizer::before_read(const Parameter& p) {
  if (p.trainable) wait_gathers_below(p.grad_offset + p.numel);
}

void Zero1Optimizer::before_read_all() {
  wait_gathers_below(layout_->numel);
  if (master_stale_) gather_master(ctx_);
}

// Frozen parameters sit between trainable ones: pack this rank's chunks in gradient order,
// gather the packed buffer, unpack every part and refresh the bf16 copies of other ranks' chunks.
void Zero1Optimizer::gather_packed(Context& ctx) {
  const int64_t n = layout_->numel;
  if (!packed_.defined()) packed_ = Tensor::empty({n}, DType::F32, store_.device(), "zero1_packed", MemCategory::Other);
  for (const auto& r : ranges_) packed_.narrow(0, r.grad_begin, r.param.numel()).copy_from(r.param, ctx);
  for (Gather& g : all_gather_chunks(packed_)) g.work->wait();
  for (auto& r : ranges_of_grad_slice(store_, 0, n))
    r.param.copy_from(packed_.narrow(0, r.grad_begin, r.param.numel()), ctx);
  int64_t at = 0;
  auto refresh = [&](int64_t lo, int64_t hi) {
    for (auto& r : ranges_of_grad_slice(store_, lo, hi))
      if (r.param_lowp.defined()) ops::cast(ctx, r.param_lowp, r.param);
  };
  for (const auto& [lo, hi] : layout_->owned(comm_.rank())) {
    refresh(at, lo);
    at = hi;
  }
  refresh(at, n);
}

int64_t Zero1Optimizer::parameter_bytes_communicated() const {
  return layout_->numel * static_cast<int64_t>(gather_mirror_ ? 2 : sizeof(float));
}

}  // namespace pt
