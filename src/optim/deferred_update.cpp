// The update run under the next forward, chunk by chunk on a low-priority side stream
// (deferred_update.h).
#include "optim/deferred_update.h"

#include <algorithm>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/profiler.h"

namespace pt {

namespace {
// A 16th of the parameters, at least 2^20: more chunks were no faster
// (docs/reports/2026-11-25_update-overlap_h100.md), so the fewest host calls that keep the
// forward's first wait short.
int64_t default_chunk(const ParamStore& store) { return std::max<int64_t>(int64_t(1) << 20, store.grad_numel() / 16); }
}  // namespace

DeferredUpdateOptimizer::DeferredUpdateOptimizer(const OptimizerConfig& cfg, Context& ctx, ParamStore& store,
                                                 int64_t min_chunk)
    : Optimizer(cfg, ctx), store_(store) {
  PT_CHECK(store.finalized(), "DeferredUpdateOptimizer: the ParamStore is not finalized");
  PT_CHECK(cfg.fused, "--update-overlap on needs the fused update (--fused on): unfused, the clip and the bf16 "
                      "refresh are passes of their own over the whole buffer");
  PT_CHECK(store.read_listener() == nullptr,
           "--update-overlap on: the parameter store already has a read listener (ZeRO-1's prefetch)");
  // ranges_ stay whole (the norm's passes when it is not summed during backward); the chunks
  // are the wrapped optimizer's ranges.
  ranges_ = contiguous_ranges(trainable_params(store));
  inner_ = make_optimizer(cfg, ctx,
                          chunked_ranges(trainable_params(store), min_chunk > 0 ? min_chunk : default_chunk(store)));
  PT_CHECK(inner_->splits_by_range(), "DeferredUpdateOptimizer: the wrapped optimizer cannot update range by range");
  if (ctx.is_cuda()) {
    // The lowest priority, below the compute stream's: the forward's kernels are scheduled
    // first, the update takes the SMs they leave free.
    PT_CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, ctx.stream_priorities().lowest));
    PT_CUDA_CHECK(cudaEventCreateWithFlags(&grads_final_, cudaEventDisableTiming));
    chunk_done_.assign(chunks(), nullptr);
    for (cudaEvent_t& e : chunk_done_) PT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  store.set_read_listener(this);
}

DeferredUpdateOptimizer::~DeferredUpdateOptimizer() {
  if (store_.read_listener() == this) store_.set_read_listener(nullptr);
  // Destructors must not throw: let launched chunks finish, free what there is. A recorded
  // update that was never launched is dropped (nothing read the parameters after that step).
  if (side_) cudaStreamSynchronize(side_);
  if (sms_before_ >= 0) {  // GEMMs get back the SMs an unfinished forward left to the update
    try {
      ctx_.reserve_sms(sms_before_);
    } catch (...) {
    }
  }
  for (cudaEvent_t e : chunk_done_)
    if (e) cudaEventDestroy(e);
  if (grads_final_) cudaEventDestroy(grads_final_);
  if (side_) cudaStreamDestroy(side_);
}

void DeferredUpdateOptimizer::add_ranges(const std::vector<FlatRange>&) {
  PT_FAIL("--update-overlap on updates the store's trainable parameters, fixed at construction: no parameter "
          "group can be added");
}

void DeferredUpdateOptimizer::step(Context& ctx, float lr) {
  finish();  // chunks of the last update that no forward read (parameters without a use)
  ++steps_;
  pending_ = true;
  pending_lr_ = lr;
  const GradClip clip = folded_clip();
  if (clip.sumsq) clip_in_flight_ = *clip.sumsq;
  hand_folded_clip_to(*inner_);
  // Timed per kernel, or asked to: the update is the optimizer phase's, in order.
  if (in_order()) finish();
}

void DeferredUpdateOptimizer::set_in_order(bool on) {
  if (on) finish();
  in_order_ = on;
}

void DeferredUpdateOptimizer::launch() {
  pending_ = false;
  // Where there is no side stream, or a kernel timer is attached, the update runs in order on
  // the compute stream.
  const bool side = side_ && !in_order();
  NvtxRange range(side ? "optimizer update (deferred, side stream)" : "optimizer update (deferred)");
  if (side) {
    PT_CUDA_CHECK(cudaEventRecord(grads_final_, ctx_.stream()));
    PT_CUDA_CHECK(cudaStreamWaitEvent(side_, grads_final_, 0));
  }
  inner_->set_steps_taken(steps_ - 1);
  inner_->begin_update(ctx_, pending_lr_);
  for (size_t i = 0; i < chunks(); ++i) {
    inner_->update_range(ctx_, i, side ? side_ : nullptr);
    if (side) PT_CUDA_CHECK(cudaEventRecord(chunk_done_[i], side_));
  }
  inner_->end_update(ctx_);
  next_ = 0;
  launched_ = side ? chunks() : 0;
  if (side && ctx_.update_sms() > 0) {  // GEMMs leave the update SMs of its own until the forward has waited for it
    sms_before_ = ctx_.reserved_sms();
    ctx_.reserve_sms(std::max(sms_before_, ctx_.update_sms()));
  }
  if (!side) clip_in_flight_ = Tensor();
}

void DeferredUpdateOptimizer::wait_below(int64_t end) {
  const std::vector<FlatRange>& chunk = inner_->ranges();
  for (; next_ < launched_ && chunk[next_].grad_begin < end; ++next_)
    PT_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream(), chunk_done_[next_], 0));
  if (next_ == launched_) {
    // Every chunk is ordered before the compute stream's next work: the norm may be freed (a
    // later allocation reusing it is ordered after the chunks that read it).
    if (sms_before_ >= 0) ctx_.reserve_sms(sms_before_);
    sms_before_ = -1;
    next_ = launched_ = 0;
    clip_in_flight_ = Tensor();
  }
}

void DeferredUpdateOptimizer::before_read(const Parameter& p) {
  if (!p.trainable) return;
  if (pending_) launch();
  wait_below(p.grad_offset + p.numel);
}

void DeferredUpdateOptimizer::finish() {
  if (pending_) launch();
  wait_below(store_.grad_numel());
}

std::vector<std::pair<std::string, Tensor>> DeferredUpdateOptimizer::state() {
  finish();
  return inner_->state();
}

std::vector<Optimizer::StatePiece> DeferredUpdateOptimizer::state_pieces() {
  finish();
  return inner_->state_pieces();
}

int64_t DeferredUpdateOptimizer::state_bytes() const { return inner_->state_bytes(); }

namespace {
constexpr EnumName<UpdateOverlap> kUpdateOverlaps[] = {
    {UpdateOverlap::Auto, "auto"}, {UpdateOverlap::On, "on"}, {UpdateOverlap::Off, "off"}};
}

UpdateOverlap update_overlap_from_name(const std::string& name) {
  return enum_from_name(kUpdateOverlaps, name, "--update-overlap");
}

bool defers_update(UpdateOverlap overlap, bool gpu, bool fused, bool cuda_graph) {
  if (overlap == UpdateOverlap::On) {
    PT_CHECK(gpu, "--update-overlap on needs a GPU (on the CPU the update has no stream to overlap on)");
    PT_CHECK(fused, "--update-overlap on needs --fused on (unfused, the clip and the bf16 refresh are passes of "
                    "their own over the whole buffer)");
    PT_CHECK(!cuda_graph, "--update-overlap on cannot be captured in a CUDA graph (the update of one step runs in "
                          "the next): use --update-overlap off or --cuda-graph off");
    return true;
  }
  return overlap == UpdateOverlap::Auto && gpu && fused && !cuda_graph;
}

std::unique_ptr<Optimizer> make_update_optimizer(const OptimizerConfig& cfg, Context& ctx, ParamStore& store,
                                                 UpdateOverlap overlap, bool cuda_graph) {
  if (defers_update(overlap, ctx.is_cuda(), cfg.fused, cuda_graph))
    return std::make_unique<DeferredUpdateOptimizer>(cfg, ctx, store);
  return make_optimizer(cfg, ctx, contiguous_ranges(trainable_params(store)));
}

}  // namespace pt
