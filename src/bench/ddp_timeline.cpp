// StepTimeline: marks and collective traces of one step turned into named intervals.
#include "bench/ddp_timeline.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/error.h"
#include "parallel/communicator.h"

namespace pt::bench {

namespace {

// "layers.3.attn.q_proj.weight" → "layers.3"; "lm_head.weight" → "lm_head".
std::string module_of(const std::string& name) {
  size_t cut = name.find('.');
  if (name.compare(0, 7, "layers.") == 0) cut = name.find('.', 7);
  return name.substr(0, cut);
}

// The communicator's op name as prose: "all_reduce" → "all-reduce".
std::string verb(std::string op) {
  std::replace(op.begin(), op.end(), '_', '-');
  return op;
}

// [lo, hi) minus the union of `holes`, as the pieces left.
std::vector<std::pair<double, double>> subtract(double lo, double hi, std::vector<std::pair<double, double>> holes) {
  std::sort(holes.begin(), holes.end());
  std::vector<std::pair<double, double>> out;
  double at = lo;
  for (const auto& [s, e] : holes) {
    if (e <= at || s >= hi) continue;
    if (s > at) out.push_back({at, s});
    at = std::max(at, e);
  }
  if (at < hi) out.push_back({at, hi});
  return out;
}

}  // namespace

StepTimeline::StepTimeline(Context& ctx, ParamStore& store, parallel::Communicator& comm,
                           std::vector<parallel::Bucket> buckets)
    : ctx_(ctx), store_(store), comm_(comm), buckets_(std::move(buckets)) {
  ready_.reserve(store.size());
  if (ctx.is_cuda()) {
    // Every event this step needs, made now: cudaEventCreate stays out of the traced step.
    // Collectives: at most two reduces per parameter (zero1's bucket pieces), plus the
    // parameter exchange; two events each.
    trace_.reserve_events(2 * (2 * store.size() + static_cast<size_t>(comm.world_size()) + 4));
    events_.resize(store.size() + PhaseCount + 1);
    for (auto& e : events_) PT_CUDA_CHECK(cudaEventCreate(&e));
  }
}

StepTimeline::~StepTimeline() {
  detach();
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

StepTimeline::Mark StepTimeline::stamp() {
  Mark m;
  if (ctx_.is_cuda()) {
    if (events_used_ == events_.size()) {  // more marks than planned (a model with tied weights?)
      events_.emplace_back();
      PT_CUDA_CHECK(cudaEventCreate(&events_.back()));
    }
    m.event = events_[events_used_++];
    PT_CUDA_CHECK(cudaEventRecord(m.event, ctx_.stream()));
  } else {
    m.host = std::chrono::steady_clock::now();
  }
  return m;
}

void StepTimeline::begin() {
  PT_CHECK(!attached_ && events_used_ == 0, "StepTimeline::begin: one step per timeline");
  store_.add_listener(this);  // added last: told first, before the sync starts a collective
  comm_.set_trace(&trace_);
  attached_ = true;
  start_ = stamp();
}

void StepTimeline::mark(Phase p) { phase_[p] = stamp(); }

void StepTimeline::on_grad_ready(Parameter& p) { ready_.push_back({&p, stamp()}); }

void StepTimeline::detach() {
  if (!attached_) return;
  store_.remove_listener(this);
  comm_.set_trace(nullptr);
  attached_ = false;
}

double StepTimeline::ms(cudaEvent_t e, std::chrono::steady_clock::time_point host) const {
  if (!ctx_.is_cuda()) return std::chrono::duration<double, std::milli>(host - start_.host).count();
  float v = 0;
  PT_CUDA_CHECK(cudaEventElapsedTime(&v, start_.event, e));
  return v;
}

double StepTimeline::ms(const Mark& m) const { return ms(m.event, m.host); }

std::vector<TimelineEvent> StepTimeline::finish() {
  detach();
  std::vector<TimelineEvent> out;
  auto add = [&](const char* stream, std::string name, double a, double b) {
    out.push_back({stream, std::move(name), a, std::max(a, b)});
  };

  // Compute: forward; backward cut where each module's last gradient became final.
  const double forward_end = ms(phase_[ForwardEnd]);
  add("compute", "forward", 0.0, forward_end);
  double at = forward_end;
  for (size_t i = 0; i < ready_.size(); ++i) {
    const std::string module = module_of(ready_[i].first->name);
    if (i + 1 < ready_.size() && module_of(ready_[i + 1].first->name) == module) continue;
    const double t = ms(ready_[i].second);
    add("compute", "backward " + module, at, t);
    at = t;
  }
  // What follows the last gradient (nothing much for the Transformer: the embedding's is last)
  // joins the last segment unless it is long enough to see.
  const double backward_end = ms(phase_[BackwardEnd]);
  if (ready_.empty())
    add("compute", "backward", at, backward_end);
  else if (backward_end - at > 0.05)
    add("compute", "backward (rest)", at, backward_end);
  else
    out.back().end_ms = std::max(out.back().end_ms, backward_end);

  // Communication, and the optimizer: its span less the collectives inside it (the sharded
  // optimizers' parameter exchange, during which the compute stream waits).
  const double sync_end = ms(phase_[SyncEnd]), end = ms(phase_[End]);
  std::vector<TimelineEvent> comm;
  std::vector<std::pair<double, double>> spans;
  for (const auto& c : trace_.entries()) {
    double s, e;
    if (ctx_.is_cuda()) {
      s = ms(c.start, {});
      e = ms(c.end, {});
    } else {
      s = ms(nullptr, c.host_start);
      e = c.host_done ? ms(nullptr, c.host_end) : end;  // waited for by the step's end
    }
    spans.push_back({s, e});
    comm.push_back({"comm", describe(c), s, std::max(s, e)});
  }
  for (const auto& [a, b] : subtract(sync_end, end, spans)) add("compute", "optimizer", a, b);
  out.insert(out.end(), comm.begin(), comm.end());
  trace_.clear();
  return out;
}

std::string StepTimeline::describe(const parallel::TracedCollective& c) const {
  // A collective on a bf16 copy (--grad-comm bf16) is named after the gradients it carries.
  const bool copy = c.copy_of != nullptr;
  const void* buffer = copy ? c.copy_of : c.buffer;
  const int64_t bytes = copy ? c.copy_of_bytes : c.bytes;
  // Elements in the flat buffer's own type: bf16 gradients (--grad-dtype bf16) are 2 bytes.
  auto range_in = [&](const Tensor& flat, int64_t& lo, int64_t& hi) {
    if (!flat.defined() || flat.numel() == 0) return false;
    const auto esize = static_cast<int64_t>(dtype_size(flat.dtype()));
    const char* base = static_cast<const char*>(flat.data());
    const char* p = static_cast<const char*>(buffer);
    if (p < base || p >= base + flat.nbytes()) return false;
    lo = (p - base) / esize;
    hi = lo + bytes / esize;
    return true;
  };
  int64_t lo = 0, hi = 0;
  std::string what = "a staging buffer";
  if (range_in(store_.flat_grads(), lo, hi))
    what = describe_grads(lo, hi);
  else if (range_in(store_.flat_params(), lo, hi))
    what = describe_params(lo, hi);
  std::string s = verb(c.op) + " " + what;
  if (c.root >= 0) s += (c.op == "broadcast" ? " from rank " : " to rank ") + std::to_string(c.root);
  char size[48];
  std::snprintf(size, sizeof size, " (%s%s%.2f MB)", copy ? c.copy_dtype : "", copy ? ", " : "",
                static_cast<double>(c.bytes) / 1e6);
  return s + size;
}

std::string StepTimeline::describe_grads(int64_t lo, int64_t hi) const {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const parallel::Bucket& bk = buckets_[b];
    if (lo < bk.grad_begin || lo >= bk.grad_end) continue;
    const bool whole = lo == bk.grad_begin && hi == bk.grad_end;
    return "bucket " + std::to_string(b) + (whole ? "" : " (part)");
  }
  if (lo == 0 && hi == store_.grad_numel()) return "all gradients";
  for (const auto& p : store_.params())
    if (p->trainable && p->grad_offset == lo && p->numel == hi - lo) return p->name;
  return "gradients [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

std::string StepTimeline::describe_params(int64_t lo, int64_t hi) const {
  if (lo == 0 && hi == store_.numel()) return "all parameters";
  const Parameter *first = nullptr, *last = nullptr;
  for (const auto& p : store_.params()) {
    if (p->offset == lo) first = p.get();
    if (p->offset + p->numel == hi) last = p.get();
  }
  if (first != nullptr && first == last) return first->name;
  if (first != nullptr && last != nullptr) return "parameters " + first->name + " to " + last->name;
  return "parameters [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

}  // namespace pt::bench
