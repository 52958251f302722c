// The training step's variants on the CPU: recompute gives the same gradients with less
// activation memory, the unfused step (--fused off) the fused one's results, bench model
// records both, and flash attention covers every named size.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <variant>

#include "bench/model_bench.h"
#include "bench/model_bench_tables.h"
#include "common/test_util.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/profiler.h"
#include "cpu/model_test_util.h"
#include "model/toy_models.h"
#include "model/transformer.h"
#include "optim/optimizer.h"
#include "parallel/grad_sync.h"
#include "train/train_step.h"

namespace pt {
namespace {

using model_test::model_loss;
using model_test::tiny_config;

TEST(TransformerModel, RecomputeGivesTheSameGradientsWithLessActivationMemory) {
  Context ctx(Device::cpu());
  TransformerConfig cfg;
  cfg.vocab_size = 50;
  cfg.context_length = 32;
  cfg.d_model = 32;
  cfg.num_layers = 4;
  cfg.num_heads = 4;
  cfg.d_ff = 96;
  const int64_t B = 2, T = 32;
  const auto ids = test::random_ids(B * T, 50, 31), targets = test::random_ids(B * T, 50, 32);
  auto& alloc = TrackingAllocator::instance();
  auto run = [&](Recompute recompute, int64_t* peak) {
    TransformerConfig c = cfg;
    c.recompute = recompute;
    TransformerLM m(c, ctx);
    m.init_weights(ctx, 5);
    m.store().zero_grad(ctx);
    alloc.reset_peak(DeviceKind::CPU);
    const int64_t before = alloc.stats(DeviceKind::CPU).in_use;
    model_loss(ctx, m, ids, targets, B, T, true);
    m.backward(ctx);
    *peak = alloc.stats(DeviceKind::CPU).peak - before;
    return m.store().flat_grads().to_host_f64(ctx);
  };
  int64_t peak_keep = 0, peak_recompute = 0, peak_swiglu = 0;
  const auto keep = run(Recompute::Off, &peak_keep);
  const auto recomputed = run(Recompute::All, &peak_recompute);
  const auto swiglu_only = run(Recompute::Swiglu, &peak_swiglu);
  EXPECT_EQ(recomputed, keep);
  EXPECT_EQ(swiglu_only, keep);
  // Recomputing the SwiGLU product alone keeps the norm outputs: the peak lies between.
  EXPECT_GT(peak_swiglu, peak_recompute);
  EXPECT_LT(peak_swiglu, peak_keep);
  // The last layer's recomputed SwiGLU product and norms exist while every other layer's
  // activations do: at least (layers − 1) layers' worth of the three tensors is saved.
  const int64_t per_layer = B * T * (2 * cfg.d_model + cfg.d_ff) * int64_t(sizeof(float));
  EXPECT_GE(peak_keep - peak_recompute, (cfg.num_layers - 1) * per_layer - B * T * cfg.d_ff * int64_t(sizeof(float)))
      << "peak with kept activations " << peak_keep << " B, recomputed " << peak_recompute << " B";
}

// --fused off (TransformerConfig::fused, OptimizerConfig::fused) runs the step one kernel per
// primitive: the same loss, gradients and clipped AdamW steps as the fused step, through other
// kernels — counted per phase by the kernel timer, so a switch that did nothing would fail.
TEST(TransformerModel, UnfusedStepGivesTheFusedLossGradientsAndParameters) {
  Context ctx(Device::cpu());
  const TransformerConfig base = tiny_config();
  const int64_t B = 2, T = 6, L = base.num_layers;
  const float max_norm = 0.05f;
  struct Run {
    double loss = 0;
    std::vector<double> grads;                                // first step, before the clip
    std::vector<double> norms;                                // global norm before each step's clip
    double clipped_buffer_norm = 0;                           // norm of the gradient buffer after the first clip
    std::vector<double> params;                               // after the last step
    std::map<std::pair<std::string, OpFamily>, int64_t> ops;  // first step: ops per phase and family
  };
  auto l2_norm = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return std::sqrt(s);
  };
  auto run = [&](bool fused) {
    TransformerConfig c = base;
    c.fused = fused;
    TransformerLM m(c, ctx);
    m.init_weights(ctx, 9);
    OptimizerConfig oc;
    oc.fused = fused;
    auto opt = make_optimizer(oc, ctx, contiguous_ranges(trainable_params(m.store())));
    KernelTimer timer(ctx);
    Run r;
    for (int s = 0; s < 3; ++s) {
      if (s == 0) ctx.set_timer(&timer);
      timer.set_phase("forward");
      m.store().zero_grad(ctx);
      const auto ids = test::random_ids(B * T, 11, 40 + s), targets = test::random_ids(B * T, 11, 50 + s);
      const double loss = model_loss(ctx, m, ids, targets, B, T, true);
      timer.set_phase("backward");
      m.backward(ctx);
      if (s == 0) {
        r.loss = loss;
        r.grads = m.store().flat_grads().to_host_f64(ctx);
      }
      timer.set_phase("optimizer");
      r.norms.push_back(std::sqrt(opt->clip_grad_norm(ctx, max_norm).to_host_f64(ctx)[0]));
      if (s == 0) r.clipped_buffer_norm = l2_norm(m.store().flat_grads().to_host_f64(ctx));
      opt->step(ctx, 1e-3f);
      if (s == 0) {
        ctx.set_timer(nullptr);
        for (const auto& e : timer.collect()) r.ops[{e.phase, e.family}] = e.count;
      }
    }
    r.params = m.store().params_to_host_f64(ctx);
    return r;
  };
  const Run on = run(true), off = run(false);
  for (double n : on.norms) ASSERT_GT(n, max_norm) << "the clip coefficient is below 1 at every step";

  EXPECT_NEAR(off.loss, on.loss, 1e-6 * on.loss);
  EXPECT_LE(test::rel_error(off.grads, on.grads), 1e-5);
  PT_EXPECT_ALLCLOSE(off.grads, on.grads, 1e-5, 1e-6);
  for (size_t i = 0; i < on.norms.size(); ++i)
    EXPECT_NEAR(off.norms[i], on.norms[i], 1e-5 * on.norms[i]) << "step " << i;
  PT_EXPECT_ALLCLOSE(off.params, on.params, 1e-5, 1e-6);

  // Fused, the clip is folded into AdamW and the buffer keeps the unclipped gradients; unfused,
  // clip_by_norm rewrites the buffer to norm max_norm (as torch.nn.utils.clip_grad_norm_).
  EXPECT_NEAR(on.clipped_buffer_norm, on.norms[0], 1e-6 * on.norms[0]);
  EXPECT_NEAR(off.clipped_buffer_norm, max_norm, 1e-5 * max_norm);
  // Per layer: forward q, k, v as three GEMMs (+2), w1 and w3 as two instead of one batched (+1),
  // and two residual adds; backward three dW and three dx GEMMs instead of one each (+4) and w1's
  // and w3's dW apart (+1); the optimizer's clip as a pass of its own (+1; the
  // mirror's cast pass exists only in bf16 on the GPU, where the GPU test covers it).
  auto count = [](const Run& r, const char* phase, OpFamily f) {
    auto it = r.ops.find({phase, f});
    return it == r.ops.end() ? int64_t{0} : it->second;
  };
  EXPECT_EQ(count(off, "forward", OpFamily::Matmul), count(on, "forward", OpFamily::Matmul) + 3 * L);
  EXPECT_EQ(count(off, "forward", OpFamily::Elementwise), count(on, "forward", OpFamily::Elementwise) + 2 * L);
  EXPECT_EQ(count(off, "backward", OpFamily::Matmul), count(on, "backward", OpFamily::Matmul) + 5 * L);
  EXPECT_EQ(count(off, "optimizer", OpFamily::Optimizer), count(on, "optimizer", OpFamily::Optimizer) + 1);
  for (const char* phase : {"forward", "backward"})
    for (OpFamily f : {OpFamily::Attention, OpFamily::Softmax, OpFamily::Norm, OpFamily::Loss})
      EXPECT_EQ(count(off, phase, f), count(on, phase, f)) << phase << " " << op_family_name(f) << ": not split";
}

// bench model's options for the tiny model (context 8, fp32, naive attention, no warm-up), with
// the kernel-time breakdown unless told otherwise.
bench::ModelBenchOptions tiny_bench(int steps, int64_t batch_size, bool breakdown = true) {
  bench::ModelBenchOptions opt;
  opt.sizes = {"tiny"};
  opt.contexts = {8};
  opt.precisions = {Precision::FP32};
  opt.attention = {"naive"};
  opt.warmups = {0};
  opt.steps = steps;
  opt.batch_size = batch_size;
  opt.vocab_size = 64;
  opt.breakdown = breakdown;
  return opt;
}

// bench model --fused off: the tables say so in their `fused` column, and the kernel-time
// breakdown shows the split GEMMs.
TEST(TransformerModel, BenchModelRecordsFusedAndItsBreakdownShowsTheSplitGemms) {
  bench::ModelBenchOptions opt = tiny_bench(1, 1);
  auto forward_gemms = [](const bench::ModelBenchResults& r, const std::string& fused) {
    const io::ResultTable& t = r.breakdown;
    const int fu = t.column_index("fused"), pass = t.column_index("pass"), phase = t.column_index("phase"),
              family = t.column_index("family"), ops = t.column_index("ops_per_step");
    double n = -1;
    for (size_t i = 0; i < t.rows(); ++i) {
      EXPECT_EQ(std::get<std::string>(t.at(i, fu)), fused);
      auto text = [&](int col) { return std::get<std::string>(t.at(i, col)); };
      if (text(pass) == "train-step" && text(phase) == "forward" && text(family) == "matmul")
        n = std::get<double>(t.at(i, ops));
    }
    return n;
  };
  const auto on = bench::run_model_bench(opt, Device::cpu(), nullptr);
  opt.fused = false;
  const auto off = bench::run_model_bench(opt, Device::cpu(), nullptr);
  ASSERT_EQ(off.timings.rows(), 1u);
  EXPECT_EQ(std::get<std::string>(off.timings.at(0, off.timings.column_index("fused"))), "off");
  EXPECT_EQ(std::get<std::string>(on.timings.at(0, on.timings.column_index("fused"))), "on");
  const int64_t layers = TransformerConfig::named("tiny").num_layers;
  EXPECT_EQ(forward_gemms(off, "off"), forward_gemms(on, "on") + 3 * layers);  // q, k, v apart; w1, w3 apart
  EXPECT_GT(forward_gemms(on, "on"), 0);
}

// bench model --grad-accum M: each step runs M micro-batches (the breakdown counts M times the
// forward and backward GEMMs, one optimizer step), and tokens per second count all of them.
TEST(TransformerModel, BenchModelWithGradientAccumulationRunsEveryMicroBatch) {
  bench::ModelBenchOptions opt = tiny_bench(2, 2);
  auto gemms = [](const bench::ModelBenchResults& r, const std::string& phase) {
    const io::ResultTable& t = r.breakdown;
    for (size_t i = 0; i < t.rows(); ++i) {
      auto text = [&](const char* col) { return std::get<std::string>(t.at(i, t.column_index(col))); };
      if (text("pass") == "train-step" && text("phase") == phase && text("family") == "matmul")
        return std::get<double>(t.at(i, t.column_index("ops_per_step")));
    }
    return -1.0;
  };
  const auto one = bench::run_model_bench(opt, Device::cpu(), nullptr);
  opt.grad_accum = 9;  // more clock marks than a step without accumulation reserves
  const auto nine = bench::run_model_bench(opt, Device::cpu(), nullptr);
  EXPECT_EQ(gemms(nine, "forward"), 9 * gemms(one, "forward"));
  EXPECT_EQ(gemms(nine, "backward"), 9 * gemms(one, "backward"));
  const io::ResultTable& t = nine.timings;
  EXPECT_EQ(std::get<int64_t>(t.at(0, t.column_index("grad_accum"))), 9);
  const double tokens = std::get<double>(t.at(0, t.column_index("tokens_per_s"))) *
                        std::get<double>(t.at(0, t.column_index("step_ms_mean"))) * 1e-3;
  EXPECT_NEAR(tokens, 9.0 * 2 * 8, 1e-6);
}

// A step faster than the dense peak cannot be: bench model's summary says the measurement (or the
// peak) is wrong. A CPU run with a dense peak of 10^-9 TFLOP/s is such a step; with a plausible
// peak the summary does not say it.
TEST(TransformerModel, BenchModelSaysAnMfuAboveOneIsWrong) {
  bench::ModelBenchOptions opt = tiny_bench(1, 1, /*breakdown=*/false);
  auto summary_with_peak = [&](double tflops) {
    opt.peak_tflops = tflops;
    std::string summary;
    bench::run_model_bench(
        opt, Device::cpu(), nullptr,
        [&](const bench::ModelBenchResults&, const std::string&, const std::string& s) { summary = s; });
    return summary;
  };
  EXPECT_NE(summary_with_peak(1e-9).find("MFU above 1 is impossible"), std::string::npos);
  EXPECT_EQ(summary_with_peak(1e6).find("MFU above 1"), std::string::npos);
}

// An fp8 run's /model row: peak_tflops and mfu on the bf16 scale, peak_tflops_fp8 and mfu_fp8
// against the FP8 peak, each labelled in the summary; other runs leave the FP8 columns NaN. Only
// a step above the FP8 peak is impossible for fp8.
TEST(TransformerModel, BenchModelReportsFp8RunsAgainstBothPeaks) {
  bench::ModelBenchResults r;
  bench::define_model_bench_tables(r);
  for (const char* col : {"peak_tflops", "mfu", "peak_tflops_fp8", "mfu_fp8"})
    EXPECT_GE(r.timings.column_index(col), 0) << col;
  for (const char* col : {"gflop_fp8", "peak_tflops_fp8"}) EXPECT_GE(r.roofline.column_index(col), 0) << col;
  const MfuPeaks h100{DevicePeak{"NVIDIA H100 80GB HBM3", 989.4, 3350, "table:h100-sxm"}, 1978.9};
  const bench::MfuReport f = bench::mfu_report(Precision::FP8, h100, 500);
  EXPECT_DOUBLE_EQ(f.peak_tflops, 989.4);
  EXPECT_DOUBLE_EQ(f.mfu, 500 / 989.4);
  EXPECT_DOUBLE_EQ(f.peak_tflops_fp8, 1978.9);
  EXPECT_DOUBLE_EQ(f.mfu_fp8, 500 / 1978.9);
  EXPECT_EQ(f.text(), "MFU 0.505 of the bf16 peak, 0.253 of the FP8 peak");
  EXPECT_FALSE(bench::mfu_report(Precision::FP8, h100, 1500).impossible());
  EXPECT_TRUE(bench::mfu_report(Precision::FP8, h100, 2000).impossible());
  const bench::MfuReport b = bench::mfu_report(Precision::BF16, MfuPeaks{h100.peak, 0}, 500);
  EXPECT_DOUBLE_EQ(b.mfu, 500 / 989.4);
  EXPECT_TRUE(std::isnan(b.peak_tflops_fp8) && std::isnan(b.mfu_fp8));
  EXPECT_EQ(b.text(), "MFU 0.505 of the bf16 peak");
  EXPECT_TRUE(bench::mfu_report(Precision::BF16, MfuPeaks{h100.peak, 0}, 1000).impossible());
  const bench::MfuReport unmeasured = bench::mfu_report(Precision::FP8, h100, std::nan(""));
  EXPECT_TRUE(std::isnan(unmeasured.mfu) && std::isnan(unmeasured.mfu_fp8));
  EXPECT_EQ(unmeasured.text(), "");
}

// Flash attention covers head dimensions 16/32/64/80/128, so every named size (2.7b: 2560/32 =
// 80) runs with it; a model asking for it with another head dimension fails at configuration
// time with a pointer to naive attention. (The model benchmark keeps a guard that records such
// a configuration as unsupported, for sizes added later.)
TEST(TransformerConfig, FlashCoversEveryNamedSizeAndRejectsOtherHeadDimensions) {
  for (const std::string& size : TransformerConfig::size_names()) {
    TransformerConfig c = TransformerConfig::named(size);
    c.attention = AttentionImpl::Flash;
    EXPECT_NO_THROW(c.validate()) << size;
  }
  TransformerConfig c = TransformerConfig::named("tiny");
  c.d_model = 96;
  c.num_heads = 2;  // d_head 48
  c.validate();     // naive attention: fine
  c.attention = AttentionImpl::Flash;
  const std::string err = test::error_of([&] { c.validate(); });
  for (const char* part : {"head dimensions 16, 32, 64, 80 and 128", "48", "--attention naive"})
    EXPECT_NE(err.find(part), std::string::npos) << "'" << part << "' not in: " << err;
}

}  // namespace
}  // namespace pt

namespace pt {
namespace {

// Counts each parameter's "gradient final" announcements.
struct ReadyCounter : GradReadyListener {
  std::map<std::string, int> count;
  void on_grad_ready(Parameter& p) override { ++count[p.name]; }
};

// Gradient accumulation: M micro-batches of B rows give the update of one batch of M·B rows
// (fp32, to rounding), the loss is the mean over all rows, and every parameter is announced
// final once per step, in the last micro-batch's backward — so a data-parallel sync runs once.
TEST(TransformerModel, AccumulatedMicroBatchesEqualOneBatchAndAnnounceGradientsOnce) {
  Context ctx(Device::cpu());
  TransformerConfig cfg = tiny_config();
  const int64_t M = 4, B = 2, T = 6;
  // SGD: the update is linear in the gradient, so rounding differences stay rounding-sized (AdamW
  // divides tiny gradients by their own size and would magnify them).
  OptimizerConfig oc;
  oc.kind = OptimizerKind::SGD;
  struct Run {
    std::vector<double> params, first_grads, start;
    std::vector<double> losses;
  };
  auto train = [&](int micro_batches, ReadyCounter* counter) {
    TransformerLM m(cfg, ctx);
    m.init_weights(ctx, 21);
    Run r;
    r.start = m.store().params_to_host_f64(ctx);
    auto opt = make_optimizer(oc, ctx, contiguous_ranges(trainable_params(m.store())));
    parallel::NoSync sync;
    TrainStep step(m, *opt, sync, 1.0f);
    if (counter) m.store().add_listener(counter);
    for (int s = 0; s < 3; ++s) {
      const auto ids = test::random_ids(M * B * T, static_cast<int32_t>(cfg.vocab_size), 100 + s);
      const auto tgt = test::random_ids(M * B * T, static_cast<int32_t>(cfg.vocab_size), 200 + s);
      StepOutputs out = step.run(ctx, test::make_ids(ctx, {M * B, T}, ids), test::make_ids(ctx, {M * B, T}, tgt), 0.5f,
                                 micro_batches);
      r.losses.push_back(out.loss.to_host_f64(ctx)[0]);
      if (s == 0) r.first_grads = m.store().flat_grads().to_host_f64(ctx);
    }
    if (counter) m.store().remove_listener(counter);
    r.params = m.store().params_to_host_f64(ctx);
    return r;
  };
  const Run whole = train(1, nullptr);
  ReadyCounter counter;
  const Run accumulated = train(static_cast<int>(M), &counter);
  PT_EXPECT_ALLCLOSE(accumulated.losses, whole.losses, 1e-6, 0);
  // Gradients and the updates of three steps, relative to their size (the weights themselves
  // would make any tolerance easy).
  EXPECT_LE(test::rel_error(accumulated.first_grads, whole.first_grads), 1e-6);
  std::vector<double> du(whole.params.size()), dw(whole.params.size());
  for (size_t i = 0; i < du.size(); ++i) {
    du[i] = accumulated.params[i] - accumulated.start[i];
    dw[i] = whole.params[i] - whole.start[i];
  }
  EXPECT_LE(test::rel_error(du, dw), 1e-6);
  // Each trainable parameter once per step.
  TransformerLM probe(cfg, ctx);
  int trainable = 0;
  for (const auto& p : probe.store().params()) trainable += p->trainable;
  EXPECT_EQ(static_cast<int>(counter.count.size()), trainable);
  for (const auto& [name, n] : counter.count) EXPECT_EQ(n, 3) << name;
}

// zero_grad zeroes a gradient only when some use adds into it (or none reads the parameter); a
// gradient all of whose uses overwrite gets beta 0 for the step's first contribution, then 1.
TEST(ParamStore, ZeroGradLeavesOverwrittenGradientsToTheirFirstContribution) {
  Context ctx(Device::cpu());
  ParamStore store;
  Parameter& written = store.add("written", {3});
  Parameter& added = store.add("added", {2});
  Parameter& mixed = store.add("mixed", {2});  // tied: one use overwrites, one adds
  Parameter& unused = store.add("unused", {2});
  store.add_use(written, GradWrite::Overwrite);
  store.add_use(added);
  store.add_use(mixed, GradWrite::Overwrite);
  store.add_use(mixed, GradWrite::Add);
  store.finalize(ctx, false);
  Tensor g = store.flat_grads();
  test::poison(ctx, g);
  store.zero_grad(ctx, 2);
  const auto v = g.to_host_f64(ctx);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(v[i])) << "written: left to its first contribution";
  for (int i = 3; i < 9; ++i) EXPECT_EQ(v[i], 0.0) << "added, mixed and unused are zeroed";
  EXPECT_EQ(store.grad_beta(written), 0.0f);
  EXPECT_EQ(store.grad_beta(added), 1.0f);
  EXPECT_EQ(store.grad_beta(mixed), 1.0f);
  EXPECT_EQ(store.grad_beta(unused), 1.0f);
  EXPECT_NE(test::error_of([&] {
              store.grad_beta({&written, &added});
            }).find("different gradient contributions"),
            std::string::npos);
  store.grad_contributed(written);  // the first micro-batch's; the second adds
  EXPECT_EQ(store.grad_beta(written), 1.0f);
  store.zero_grad(ctx);
  EXPECT_EQ(store.grad_beta(written), 0.0f) << "a new step";
}

// BatchedLinear runs weights of one shape as one batched GEMM, so they must be equally spaced in
// the flat buffers and alike; anything else is refused at construction with the weights' names.
TEST(BatchedLinear, RefusesWeightsItCannotBatch) {
  ParamStore store;
  Parameter& a = store.add("a", {4, 3});
  store.add("gap", {2});
  Parameter& b = store.add("b", {4, 3});
  Parameter& c = store.add("c", {4, 3});
  Parameter& d = store.add("d", {5, 3});
  Parameter& frozen = store.add("frozen", {4, 3}, /*trainable=*/false);
  EXPECT_NO_THROW(BatchedLinear(store, {&b, &c}));
  EXPECT_NO_THROW(BatchedLinear(store, {&a, &b}));  // spaced by 14, one gap
  EXPECT_NE(test::error_of([&] { BatchedLinear(store, {&a, &b, &c}); }).find("not equally spaced"), std::string::npos);
  EXPECT_NE(test::error_of([&] { BatchedLinear(store, {&c, &d}); }).find("differs from 'c'"), std::string::npos);
  EXPECT_NE(test::error_of([&] { BatchedLinear(store, {&d, &frozen}); }).find("'frozen' differs"), std::string::npos);
}

// zero_grad zeroes only the gradients some use adds into (the embedding's scatter-add); the
// others are written by their step's first contribution, a GEMM or a norm's dw with beta 0
// (ParamStore::grad_beta). Whatever the buffer held before the step — NaN here — a step's
// gradients are those of a zeroed buffer, bit for bit: fused or not, over one micro-batch or
// two, and for a weight two Linears share (the toy model's tied weight: its second contribution
// adds). zero_grad really leaves the written ones as they were.
TEST(TransformerModel, GradientsDoNotDependOnWhatTheBufferHeldBeforeTheStep) {
  Context ctx(Device::cpu());
  const int64_t B = 2, T = 6;
  for (bool fused : {true, false})
    for (int micro : {1, 2}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "unfused") + ", micro-batches " + std::to_string(micro));
      TransformerConfig cfg = tiny_config();
      cfg.fused = fused;
      auto grads = [&](bool poisoned) {
        TransformerLM m(cfg, ctx);
        m.init_weights(ctx, 9);
        Tensor g = m.store().flat_grads();
        for (int step = 0; step < 2; ++step) {  // the second step starts from the first's gradients
          if (poisoned) test::poison(ctx, g);
          m.store().zero_grad(ctx, micro);
          if (poisoned) {
            for (double v : m.store().find("token_embeddings.weight")->grad().to_host_f64(ctx)) EXPECT_EQ(v, 0.0);
            for (double v : m.store().find("lm_head.weight")->grad().to_host_f64(ctx)) EXPECT_TRUE(std::isnan(v));
          }
          for (int i = 0; i < micro; ++i) {
            const auto ids = test::random_ids(B * T, 11, 60 + i + 10 * step), tgt = test::random_ids(B * T, 11, 70 + i);
            m.forward(ctx, test::make_ids(ctx, {B, T}, ids), test::make_ids(ctx, {B, T}, tgt), true,
                      1.0f / float(micro));
            m.backward(ctx);
          }
        }
        return g.to_host_f64(ctx);
      };
      const auto clean = grads(false), poisoned = grads(true);
      EXPECT_EQ(poisoned, clean);
    }
  for (int micro : {1, 2}) {
    auto grads = [&](bool poisoned) {
      auto m = make_toy_model("toy_tied", ctx);
      m->init_weights(ctx, 3);
      Tensor g = m->store().flat_grads();
      if (poisoned) test::poison(ctx, g);
      m->store().zero_grad(ctx, micro);
      for (int i = 0; i < micro; ++i) {
        m->forward(ctx, test::make_tensor(ctx, {4, ToyNet::kIn}, DType::F32, test::randn(4 * ToyNet::kIn, 5 + i)));
        m->backward(ctx, test::make_tensor(ctx, {4, ToyNet::kOut}, DType::F32, test::randn(4 * ToyNet::kOut, 7 + i)));
      }
      return g.to_host_f64(ctx);
    };
    EXPECT_EQ(grads(true), grads(false)) << "toy_tied, micro-batches " << micro;
  }
}

}  // namespace
}  // namespace pt
