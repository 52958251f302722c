#include "bench/model_bench.h"
#include "core/enum_names.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

#include "bench/inputs.h"
#include "bench/model_bench_tables.h"
#include "bench/roofline.h"
#include "core/accelerator_specs.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/timing.h"
#include "model/transformer.h"
#include "ops/flash_attention.h"
#include "optim/deferred_update.h"
#include "optim/optimizer.h"
#include "parallel/grad_sync.h"
#include "train/train_step.h"

namespace pt::bench {

namespace {
constexpr EnumName<ModelBenchMode> kModes[] = {{ModelBenchMode::Forward, "forward"},
                                               {ModelBenchMode::ForwardBackward, "forward-backward"},
                                               {ModelBenchMode::TrainStep, "train-step"}};
}

ModelBenchMode model_bench_mode_from_name(const std::string& name) { return enum_from_name(kModes, name, "--mode"); }
const char* model_bench_mode_name(ModelBenchMode m) { return enum_name(kModes, m); }

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const char* on_off(bool b) { return b ? "on" : "off"; }

struct Config {
  std::string size;
  int64_t context;
  Precision precision;
  AttentionImpl attention;
  int64_t warmup;
};

std::string config_key(const Config& c) {
  std::ostringstream o;
  o << c.size << "_ctx" << c.context << "_" << precision_name(c.precision) << "_" << attention_impl_name(c.attention)
    << "_w" << c.warmup;
  return o.str();
}

struct Measured {
  std::vector<double> fwd, bwd, opt, step;
  double first_step_ms = kNaN;
  int64_t peak = 0;
  int64_t device_mallocs = 0, cache_flushes = 0;  // during the measured steps (MemoryStats' counters)
};

// The train step's update under the next step's forward where --update-overlap allows it; the
// other modes take no optimizer step. The Rig's optimizer and the record's column both read it.
UpdateOverlap update_overlap_of(const ModelBenchOptions& opt) {
  return opt.mode == ModelBenchMode::TrainStep ? opt.update_overlap : UpdateOverlap::Off;
}

// A model, its optimizer and fixed random inputs for one configuration.
struct Rig {
  Rig(const Config& c, const ModelBenchOptions& opt, Context& ctx) {
    TransformerConfig tc = TransformerConfig::named(c.size);
    tc.vocab_size = opt.vocab_size;
    tc.context_length = c.context;
    tc.attention = c.attention;
    tc.recompute = opt.recompute;
    tc.fused = opt.fused;
    cfg = tc;
    model = std::make_unique<TransformerLM>(tc, ctx);
    model->init_weights(ctx, opt.seed);
    OptimizerConfig oc;
    oc.fused = opt.fused;
    optimizer = make_update_optimizer(oc, ctx, model->store(), update_overlap_of(opt), opt.cuda_graph);
    deferred = dynamic_cast<DeferredUpdateOptimizer*>(optimizer.get());
    // One process: nothing changes a gradient after backward reports it final (TrainStep
    // decides the same for --ddp none), so a training step sums the norm during backward.
    if (opt.mode == ModelBenchMode::TrainStep) optimizer->overlap_norm_with_backward(ctx, model->store());
    // Random tokens: timing does not depend on their values.
    std::mt19937_64 rng(opt.seed);
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(tc.vocab_size - 1));
    Tensor h_ids = Tensor::empty({opt.batch_size, c.context}, DType::I32, Device::cpu(), "bench_ids");
    Tensor h_tg = Tensor::empty({opt.batch_size, c.context}, DType::I32, Device::cpu(), "bench_targets");
    for (int64_t i = 0; i < h_ids.numel(); ++i) {
      h_ids.data_as<int32_t>()[i] = tok(rng);
      h_tg.data_as<int32_t>()[i] = tok(rng);
    }
    ids = h_ids.to(ctx.device(), ctx);
    targets = h_tg.to(ctx.device(), ctx);
    if (opt.cuda_graph) {
      PT_CHECK(opt.mode == ModelBenchMode::TrainStep, "--cuda-graph on times the train step: use --mode train-step");
      PT_CHECK(c.warmup >= 2, "--cuda-graph on needs --warmup 2 or more: uncaptured steps first (GEMM autotuning), "
                              "then the capture, so that the measured steps are replays");
      // TrainStep splits its rows into the --grad-accum micro-batches, as train's steps of batch ×
      // N rows; the uncaptured steps here run each micro-batch on the same rows, so the graph gets
      // those rows N times over: the same work on the same data.
      graph_ids = repeat_rows(h_ids, opt.grad_accum).to(ctx.device(), ctx);
      graph_targets = repeat_rows(h_tg, opt.grad_accum).to(ctx.device(), ctx);
      graph_step = std::make_unique<TrainStep>(*model, *optimizer, no_sync, 1.0f);
      graph_step->enable_cuda_graph(ctx, static_cast<int>(c.warmup) - 1);  // the last warm-up step captures
    }
  }
  TransformerConfig cfg;
  std::unique_ptr<TransformerLM> model;
  std::unique_ptr<Optimizer> optimizer;
  DeferredUpdateOptimizer* deferred = nullptr;  // the optimizer, when its update is deferred
  Tensor ids, targets;
  // --cuda-graph on: the train step as `paratrain train` runs it, captured in the last warm-up
  // step (TrainStep), on graph_ids and graph_targets (ids and targets once a micro-batch); the
  // clock then sees whole steps only.
  Tensor graph_ids, graph_targets;
  parallel::NoSync no_sync;
  std::unique_ptr<TrainStep> graph_step;
};

// The clock marks one step takes: the start, forward and backward of each micro-batch, the
// optimizer.
int step_marks(const ModelBenchOptions& opt) { return 2 + 2 * opt.grad_accum; }

// One step in the benchmark's mode, with a clock mark after each phase: forward and backward of
// each of the --grad-accum micro-batches (the same rows each time: only the cost matters), then
// the optimizer. Gradients are final in the last micro-batch.
void run_step(Rig& rig, Context& ctx, ModelBenchMode mode, StreamClock& clock, KernelTimer* timer, int micro_batches) {
  clock.reset();
  clock.mark();
  if (rig.graph_step) {  // one launch once captured: no phases to mark
    rig.graph_step->run(ctx, rig.graph_ids, rig.graph_targets, 1e-4f, micro_batches);
    clock.mark();
    return;
  }
  if (timer) timer->set_phase("forward");
  if (mode == ModelBenchMode::Forward) {
    rig.model->forward(ctx, rig.ids, rig.targets, /*save_for_backward=*/false);
    clock.mark();
    return;
  }
  rig.model->store().zero_grad(ctx, micro_batches);
  for (int i = 0; i < micro_batches; ++i) {
    if (timer) timer->set_phase("forward");
    rig.model->forward(ctx, rig.ids, rig.targets, true, 1.0f / static_cast<float>(micro_batches));
    clock.mark();
    if (timer) timer->set_phase("backward");
    rig.model->backward(ctx);
    clock.mark();
  }
  if (mode == ModelBenchMode::TrainStep) {
    if (timer) timer->set_phase("optimizer");
    NvtxRange r("optimizer step");
    rig.optimizer->clip_grad_norm(ctx, 1.0f);
    rig.optimizer->step(ctx, 1e-4f);
    clock.mark();
  }
}

Measured measure(Rig& rig, Context& ctx, const Config& c, const ModelBenchOptions& opt) {
  Measured m;
  StreamClock clock(ctx, step_marks(opt));
  auto& alloc = TrackingAllocator::instance();
  MemoryStats at_start;  // the counters when the measured steps begin
  for (int64_t i = 0; i < c.warmup + opt.steps; ++i) {
    const bool measured = i >= c.warmup;
    if (measured && i == c.warmup) {
      alloc.reset_peak(ctx.device().kind);
      at_start = alloc.stats(ctx.device().kind);
      if (opt.profile_steps && ctx.is_cuda()) PT_CUDA_CHECK(cudaProfilerStart());
    }
    {
      NvtxRange r(measured ? "measured step" : "warmup step");
      run_step(rig, ctx, opt.mode, clock, nullptr, opt.grad_accum);
      ctx.synchronize();
    }
    std::vector<double> iv = clock.intervals_ms();
    double total = 0;
    for (double x : iv) total += x;
    if (i == 0) m.first_step_ms = total;
    if (!measured) continue;
    if (rig.graph_step) {  // whole steps only
      m.step.push_back(total);
      continue;
    }
    // Intervals: forward, backward per micro-batch, then the optimizer (train-step).
    double fwd = iv.at(0), bwd = 0;
    const size_t fb = opt.mode == ModelBenchMode::Forward ? 1 : 2 * static_cast<size_t>(opt.grad_accum);
    for (size_t k = 1; k < fb && k < iv.size(); ++k) (k % 2 ? bwd : fwd) += iv[k];
    m.fwd.push_back(fwd);
    if (opt.mode != ModelBenchMode::Forward) m.bwd.push_back(bwd);
    if (iv.size() > fb) m.opt.push_back(iv[fb]);
    m.step.push_back(total);
  }
  if (opt.profile_steps && ctx.is_cuda()) PT_CUDA_CHECK(cudaProfilerStop());
  // A replayed graph allocates nothing: its buffers sit in its private pool, cached, not in use.
  // What the device holds then is the reserved total.
  const MemoryStats st = alloc.stats(ctx.device().kind);
  m.peak = rig.graph_step ? st.reserved : st.peak;
  m.device_mallocs = st.device_mallocs - at_start.device_mallocs;
  m.cache_flushes = st.cache_flushes - at_start.cache_flushes;
  return m;
}

// A new row of /model_breakdown, /model_roofline or /model_memory with the configuration's
// columns set (batch_size: the memory table's).
io::ResultTable::RowBuilder config_row(io::ResultTable& t, const Config& c, const ModelBenchOptions& opt,
                                       bool batch_size) {
  auto row = t.add_row();
  row.set("size", c.size).set("context_length", c.context);
  if (batch_size) row.set("batch_size", opt.batch_size);
  row.set("precision", precision_name(c.precision))
      .set("attention", attention_impl_name(c.attention))
      .set("fused", on_off(opt.fused));
  return row;
}

// While it lives, a deferred update (when there is one) runs in order in its own step.
class DeferredUpdateSerial {
 public:
  explicit DeferredUpdateSerial(DeferredUpdateOptimizer* d) : d_(d) {
    if (d_) d_->set_in_order(true);
  }
  ~DeferredUpdateSerial() {
    if (d_) d_->set_in_order(false);
  }
  DeferredUpdateSerial(const DeferredUpdateSerial&) = delete;
  DeferredUpdateSerial& operator=(const DeferredUpdateSerial&) = delete;

 private:
  DeferredUpdateOptimizer* d_;
};

void add_breakdown(ModelBenchResults& r, Rig& rig, Context& ctx, const Config& c, const ModelBenchOptions& opt,
                   const MfuPeaks& peaks) {
  const RooflineRates rates = roofline_rates(ctx, peaks.peak.tflops * 1e12, peaks.fp8_tflops * 1e12);
  KernelTimer timer(ctx, rates);
  StreamClock clock(ctx, step_marks(opt));
  struct Pass {
    const char* name;
    ModelBenchMode mode;
  };
  const Pass passes[] = {{"inference", ModelBenchMode::Forward}, {"train-step", ModelBenchMode::TrainStep}};
  // The update in order, in its own phase, in both loops below: the families' kernel times and
  // the pass's whole time then describe the same step (with --update-overlap the measured steps
  // hide the update under the next forward; the /model row shows what that gains).
  const DeferredUpdateSerial serial(rig.deferred);
  for (const Pass& p : passes) {
    const int micro = p.mode == ModelBenchMode::Forward ? 1 : opt.grad_accum;
    ctx.set_timer(&timer);
    for (int s = 0; s < opt.steps; ++s) run_step(rig, ctx, p.mode, clock, &timer, micro);
    ctx.set_timer(nullptr);
    // The pass's whole time on the stream (kernels and the gaps between them), from as many
    // steps again without the timer: its event pairs would stretch the gaps.
    double pass_ms = 0;
    for (int s = 0; s < opt.steps; ++s) {
      run_step(rig, ctx, p.mode, clock, nullptr, micro);
      for (double ms : clock.intervals_ms()) pass_ms += ms;
    }
    std::vector<KernelTimer::Entry> entries = timer.collect();
    double total = 0;
    for (const auto& e : entries) total += e.ms;
    for (const auto& e : entries)
      config_row(r.breakdown, c, opt, false)
          .set("pass", p.name)
          .set("phase", e.phase)
          .set("family", op_family_name(e.family))
          .set("ms_per_step", e.ms / opt.steps)
          .set("ops_per_step", static_cast<double>(e.count) / opt.steps)
          .set("percent_of_pass", total > 0 ? 100.0 * e.ms / total : kNaN);
    for (const RooflineRow& row : roofline_rows(entries, opt.steps, pass_ms / opt.steps))
      config_row(r.roofline, c, opt, false)
          .set("pass", p.name)
          .set("phase", row.phase)
          .set("family", row.family)
          .set("gflop", row.flops / 1e9)
          .set("gflop_fp8", row.fp8_flops / 1e9)
          .set("gbytes", row.bytes / 1e9)
          .set("achieved_ms", row.achieved_ms)
          .set("floor_ms", row.floor_ms)
          .set("ratio", row.ratio())
          .set("bound", row.bound())
          .set("peak_tflops", rates.flops_per_s > 0 ? rates.flops_per_s / 1e12 : kNaN)
          .set("peak_tflops_fp8", rates.fp8_flops_per_s > 0 ? rates.fp8_flops_per_s / 1e12 : kNaN)
          .set("copy_GBps", rates.bytes_per_s / 1e9);
  }
}

void add_memory_profile(ModelBenchResults& r, Rig& rig, Context& ctx, const Config& c, const ModelBenchOptions& opt,
                        io::RunRecord* record) {
  auto& alloc = TrackingAllocator::instance();
  const DeviceKind kind = ctx.device().kind;
  ctx.synchronize();
  alloc.reset_peak(kind);
  rig.model->forward(ctx, rig.ids, rig.targets, false);
  ctx.synchronize();
  const int64_t peak_forward = alloc.stats(kind).peak;

  alloc.reset_peak(kind);
  alloc.clear_timeline();
  alloc.set_timeline_enabled(true);
  rig.model->store().zero_grad(ctx);
  rig.model->forward(ctx, rig.ids, rig.targets, true);
  const int64_t before_backward = alloc.stats(kind).in_use;
  rig.model->backward(ctx);
  rig.optimizer->clip_grad_norm(ctx, 1.0f);
  rig.optimizer->step(ctx, 1e-4f);
  ctx.synchronize();
  alloc.set_timeline_enabled(false);
  const MemoryStats st = alloc.stats(kind);
  const std::string group = "/memory_timeline/" + config_key(c);
  auto cat = [&](MemCategory m) { return st.at_peak_by_category[static_cast<int>(m)]; };
  config_row(r.memory, c, opt, true)
      .set("status", "ok")
      .set("peak_forward_bytes", peak_forward)
      .set("peak_train_step_bytes", st.peak)
      .set("before_backward_bytes", before_backward)
      .set("peak_parameters_bytes", cat(MemCategory::Parameters))
      .set("peak_gradients_bytes", cat(MemCategory::Gradients))
      .set("peak_optimizer_state_bytes", cat(MemCategory::OptimizerState))
      .set("peak_activations_bytes", cat(MemCategory::Activations))
      .set("peak_workspace_bytes", cat(MemCategory::Workspace))
      .set("peak_other_bytes", cat(MemCategory::Other))
      .set("timeline", group);
  if (!record) return;
  std::vector<MemoryEvent> tl = alloc.timeline();
  std::vector<double> t;
  std::vector<int64_t> in_use, delta, category;
  std::vector<std::string> tags;
  for (const auto& e : tl) {
    t.push_back(e.time_s);
    in_use.push_back(e.in_use);
    delta.push_back(e.delta);
    category.push_back(static_cast<int64_t>(e.category));
    tags.push_back(e.tag);
  }
  record->add_dataset(group + "/time_s", t, {}, "seconds since the allocator started");
  record->add_dataset(group + "/bytes_in_use", in_use, {}, "bytes in use after the event");
  record->add_dataset(group + "/delta_bytes", delta, {}, "+size for an allocation, -size for a free");
  record->add_dataset(group + "/category", category, {},
                      "0 parameters, 1 gradients, 2 optimizer_state, 3 activations, 4 workspace, 5 other");
  record->add_strings(group + "/tag", tags, "module scope / buffer name of the allocation");
  alloc.clear_timeline();
}

}  // namespace

int64_t model_bench_configurations(const ModelBenchOptions& opt) {
  return static_cast<int64_t>(opt.sizes.size() * opt.contexts.size() * opt.precisions.size() * opt.attention.size() *
                              opt.warmups.size());
}

ModelBenchResults run_model_bench(const ModelBenchOptions& opt, Device device, io::RunRecord* record,
                                  const ModelBenchProgress& after_each) {
  PT_CHECK(opt.steps >= 1, "--steps must be at least 1");
  PT_CHECK(opt.batch_size >= 1, "--batch-size must be at least 1");
  ModelBenchResults r;
  define_model_bench_tables(r);
  PT_CHECK(!opt.warmups.empty(), "--warmup needs at least one count");
  for (const std::string& size : opt.sizes) TransformerConfig::named(size);  // fail fast on a typo
  for (Precision prec : opt.precisions)                                      // before any configuration runs
    PT_CHECK(!(is_bf16_mixed(prec) && device.is_cpu()),
             std::string(precision_name(prec)) + " needs a GPU: use --precision fp32 with --device cpu");
  // The breakdown and the memory profile do not depend on the warm-up count: each configuration
  // gets them once, at the largest count (the steady state), not once per count.
  const size_t profiled_warmup =
      static_cast<size_t>(std::max_element(opt.warmups.begin(), opt.warmups.end()) - opt.warmups.begin());
  for (const std::string& size : opt.sizes)
    for (int64_t context : opt.contexts)
      for (Precision prec : opt.precisions)
        for (const std::string& attn_name : opt.attention)
          for (size_t wi = 0; wi < opt.warmups.size(); ++wi) {
            const int64_t warmup = opt.warmups[wi];
            const bool profile = wi == profiled_warmup;
            Config c{size, context, prec, attention_impl_from_name(attn_name), warmup};
            PT_CHECK(warmup >= 0, "--warmup must be non-negative");
            Context ctx(device, prec);
            if (is_bf16_mixed(prec)) {
              ctx.set_grad_dtype(opt.grad_dtype);
              ctx.set_residual_dtype(opt.residual_dtype);
            }
            ctx.set_gemm_select(opt.gemm);
            ctx.set_flash(opt.flash);
            const MfuPeaks peaks = mfu_peaks(ctx.device(), prec, opt.peak_tflops);
            const MfuReport unmeasured = mfu_report(prec, peaks, kNaN);
            const bool rig_defers = defers_update(update_overlap_of(opt), ctx.is_cuda(), opt.fused, opt.cuda_graph);
            if (rig_defers) ctx.set_update_sms(opt.update_sms);
            auto row = [&](const char* status, int64_t oom_bytes) {
              const TransformerConfig tc = TransformerConfig::named(size);
              return std::move(
                  r.timings.add_row()
                      .set("size", size)
                      .set("d_model", tc.d_model)
                      .set("num_layers", tc.num_layers)
                      .set("context_length", context)
                      .set("batch_size", opt.batch_size)
                      .set("grad_accum", static_cast<int64_t>(opt.mode == ModelBenchMode::Forward ? 1 : opt.grad_accum))
                      .set("precision", precision_name(prec))
                      .set("grad_dtype", dtype_name(ctx.grad_dtype()))
                      .set("residual_dtype", dtype_name(ctx.residual_dtype()))
                      .set("attention", attn_name)
                      .set("fused", on_off(opt.fused))
                      .set("cuda_graph", on_off(opt.cuda_graph))
                      .set("update_overlap", on_off(rig_defers))
                      .set("update_sms", static_cast<int64_t>(rig_defers ? opt.update_sms : 0))
                      .set("mode", model_bench_mode_name(opt.mode))
                      .set("warmup_steps", warmup)
                      .set("measured_steps", static_cast<int64_t>(opt.steps))
                      .set("status", status)
                      .set("oom_requested_bytes", oom_bytes)
                      .set("peak_tflops", unmeasured.peak_tflops)
                      .set("peak_source", peaks.peak.source)
                      .set("peak_tflops_fp8", unmeasured.peak_tflops_fp8));
            };
            // A configuration the sweep records without measurements and goes past.
            auto not_measured = [&](const char* status, int64_t oom_bytes) {
              row(status, oom_bytes).fill_unset();
              if (opt.memory_profile && profile) config_row(r.memory, c, opt, true).set("status", status).fill_unset();
            };
            const int64_t d_head = TransformerConfig::named(size).d_head();
            if (c.attention == AttentionImpl::Flash && !ops::flash_attention_supports_head_dim(d_head)) {
              not_measured("unsupported", 0);
              if (after_each)
                after_each(r, config_key(c),
                           "skipped: flash attention does not cover head dimension " + std::to_string(d_head));
              continue;
            }
            std::string summary;
            try {
              Rig rig(c, opt, ctx);
              Measured m = measure(rig, ctx, c, opt);
              const Summary f = summarize(m.fwd), b = summarize(m.bwd), o = summarize(m.opt), s = summarize(m.step);
              const double tokens = static_cast<double>(opt.batch_size * opt.grad_accum * context);
              double flops = rig.cfg.train_flops_per_token(context) * tokens;
              if (opt.mode == ModelBenchMode::Forward) flops /= 3.0;
              const double tflops = flops / (s.mean * 1e-3) / 1e12;
              const MfuReport mfu = mfu_report(prec, peaks, tflops);
              auto measured = row("ok", 0);
              const Summary phases[] = {f, b, o, s};  // kTimedPhases' order
              for (size_t i = 0; i < std::size(kTimedPhases); ++i)
                measured.set(std::string(kTimedPhases[i].name) + "_ms_mean", phases[i].mean)
                    .set(std::string(kTimedPhases[i].name) + "_ms_sd", phases[i].sd);
              measured.set("first_step_ms", m.first_step_ms)
                  .set("tokens_per_s", tokens / (s.mean * 1e-3))
                  .set("tflops", tflops)
                  .set("mfu", mfu.mfu)
                  .set("mfu_fp8", mfu.mfu_fp8)
                  .set("peak_memory_bytes", m.peak)
                  .set("device_mallocs", m.device_mallocs)
                  .set("cache_flushes", m.cache_flushes);
              std::ostringstream line;
              line << "step " << s.mean << " ms (sd " << s.sd << "), " << tflops << " TFLOP/s"
                   << (mfu.text().empty() ? "" : ", " + mfu.text());
              // The steps timed allocations, not only the model: say which kind.
              if (m.cache_flushes > 0)
                line << "; " << m.cache_flushes << " cache flushes and " << m.device_mallocs
                     << " device allocations during the measured steps: memory near the device's capacity";
              else if (m.device_mallocs > 0)
                line << "; " << m.device_mallocs
                     << " device allocations during the measured steps (sizes the warm-up did not ask for)";
              // No step beats the dense peak: above it, the tokens credited did not all run (session
              // 28's captured step with --grad-accum ran 1/16 of them) or the peak is wrong.
              if (mfu.impossible())
                line << "; MFU above 1 is impossible: this measurement or the dense peak (--peak-tflops) is wrong";
              summary = line.str();
              if (opt.breakdown && profile) add_breakdown(r, rig, ctx, c, opt, peaks);
              if (opt.memory_profile && profile) add_memory_profile(r, rig, ctx, c, opt, record);
            } catch (const OutOfMemory& e) {
              ctx.synchronize();
              TrackingAllocator::instance().set_timeline_enabled(false);
              not_measured("oom", static_cast<int64_t>(e.requested_bytes));
              summary = "out of memory (" + std::to_string(e.requested_bytes) + " bytes requested)";
            }
            TrackingAllocator::instance().empty_cache();
            if (after_each) after_each(r, config_key(c), summary);
          }
  return r;
}

}  // namespace pt::bench
