// The roofline instrument (issue 16): what each op must do (OpCost, counted in its OpScope), the
// kernel timer's sums and floors, the table's rows — and, for a tiny Transformer's whole train
// step on the CPU, every (phase, op family)'s FLOPs and bytes against values written out here
// from the shapes alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <variant>

#include "bench/model_bench.h"
#include "bench/roofline.h"
#include "common/test_util.h"
#include "core/profiler.h"
#include "model/transformer.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "optim/optimizer.h"

namespace pt {
namespace {

// ---- OpCost, RooflineRates, KernelTimer -----------------------------------------------------

TEST(Roofline, OpCostCountsTensorBytesOnceReadOrWrittenAndTwiceUpdated) {
  const Tensor f32 = Tensor::empty({3, 4}, DType::F32, Device::cpu());  // 48 bytes
  const Tensor f64 = Tensor::empty({5}, DType::F64, Device::cpu());     // 40 bytes
  const Tensor ids = Tensor::empty({7}, DType::I32, Device::cpu());     // 28 bytes
  OpCost c;
  c.read(f32).write(f64).update(ids);
  EXPECT_EQ(c.bytes, 48.0 + 40.0 + 2 * 28.0);
  EXPECT_EQ(c.flops, 0.0);
  // A strided view counts the elements it names: a column of the (3, 4) matrix is 3 floats.
  EXPECT_EQ(OpCost().read(f32.narrow(1, 1, 1)).bytes, 12.0);
  OpCost sum{10, 20};
  sum += OpCost{1, 2};
  EXPECT_EQ(sum.flops, 11.0);
  EXPECT_EQ(sum.bytes, 22.0);
}

TEST(Roofline, FloorIsTheSlowerSideAndAZeroRateLeavesItsSideOut) {
  const RooflineRates r{1e12, 1e9};  // 1 TFLOP/s, 1 GB/s
  const OpCost compute{4e9, 1e6};    // 4 ms of FLOPs, 1 ms of bytes
  const OpCost memory{1e9, 3e6};     // 1 ms of FLOPs, 3 ms of bytes
  EXPECT_DOUBLE_EQ(r.floor_ms(compute), 4.0);
  EXPECT_DOUBLE_EQ(r.floor_ms(memory), 3.0);
  EXPECT_TRUE(r.compute_bound(compute));
  EXPECT_FALSE(r.compute_bound(memory));
  const RooflineRates no_peak{0, 1e9};  // the CPU: no dense peak known
  EXPECT_DOUBLE_EQ(no_peak.floor_ms(compute), 1.0);
  EXPECT_FALSE(no_peak.compute_bound(compute));
  EXPECT_DOUBLE_EQ(RooflineRates{}.floor_ms(compute), 0.0);
}

// An FP8 GEMM's FLOPs (OpCost::fp8_flops) are floored at the FP8 peak, the rest at the dense
// one; without an FP8 rate they fall back to the dense peak. The timer and the rows carry them.
TEST(Roofline, Fp8FlopsAreFlooredAtTheFp8Peak) {
  const RooflineRates r{1e12, 1e9, 2e12};  // 1 TFLOP/s bf16, 1 GB/s, 2 TFLOP/s FP8
  OpCost gemm{4e9, 1e6};
  gemm.fp8_flops = 4e9;  // all FP8: 2 ms, not 4
  EXPECT_DOUBLE_EQ(r.floor_ms(gemm), 2.0);
  OpCost mixed{4e9, 1e6};
  mixed.fp8_flops = 2e9;  // 2 ms at bf16 + 1 ms at FP8
  EXPECT_DOUBLE_EQ(r.floor_ms(mixed), 3.0);
  EXPECT_TRUE(r.compute_bound(mixed));
  EXPECT_DOUBLE_EQ((RooflineRates{1e12, 1e9}.floor_ms(gemm)), 4.0);
  Context ctx(Device::cpu());
  KernelTimer timer(ctx, r);
  ctx.set_timer(&timer);
  timer.set_phase("forward");
  { OpScope a(ctx, "matmul_fp8", OpFamily::Matmul, gemm); }
  { OpScope b(ctx, "matmul", OpFamily::Matmul, OpCost{4e9, 1e6}); }
  ctx.set_timer(nullptr);
  const auto rows = bench::roofline_rows(timer.collect(), 1, 10.0);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0].flops, 8e9);
  EXPECT_DOUBLE_EQ(rows[0].fp8_flops, 4e9);
  EXPECT_DOUBLE_EQ(rows[0].floor_ms, 6.0);   // 2 + 4
  EXPECT_DOUBLE_EQ(rows[1].fp8_flops, 4e9);  // the step row
}

// The timer sums each (phase, family)'s costs and floors per op — the floor of a sequence of
// kernels is the sum of theirs, not the max of the summed FLOPs and bytes — and counts a nested
// op's cost only with its outermost scope, like its time.
TEST(Roofline, KernelTimerSumsCostsAndPerOpFloorsOfOutermostScopes) {
  Context ctx(Device::cpu());
  const RooflineRates rates{1e12, 1e9};
  KernelTimer timer(ctx, rates);
  ctx.set_timer(&timer);
  timer.set_phase("forward");
  { OpScope a(ctx, "compute-bound", OpFamily::Matmul, OpCost{4e9, 1e6}); }  // floor 4 ms, compute
  { OpScope b(ctx, "memory-bound", OpFamily::Matmul, OpCost{1e9, 3e6}); }   // floor 3 ms, memory
  {
    OpScope outer(ctx, "outer", OpFamily::Softmax, OpCost{0, 5e6});     // floor 5 ms
    OpScope inner(ctx, "inner", OpFamily::Matmul, OpCost{1e12, 1e12});  // nested: not counted
  }
  timer.set_phase("backward");
  Tensor x = test::make_tensor(ctx, {2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
  Tensor y = test::make_tensor(ctx, {2, 3}, DType::F32, {1, 1, 1, 1, 1, 1});
  ops::add_inplace(ctx, x, y);  // a real op: x updated (2 · 24 bytes), y read (24)
  ctx.set_timer(nullptr);
  std::map<std::pair<std::string, OpFamily>, KernelTimer::Entry> got;
  for (const auto& e : timer.collect()) got.emplace(std::make_pair(e.phase, e.family), e);
  ASSERT_EQ(got.size(), 3u);
  const auto& mm = got.at({"forward", OpFamily::Matmul});
  EXPECT_EQ(mm.count, 2);
  EXPECT_DOUBLE_EQ(mm.flops, 5e9);
  EXPECT_DOUBLE_EQ(mm.bytes, 4e6);
  EXPECT_DOUBLE_EQ(mm.floor_ms, 7.0);  // 4 + 3; the max of the sums would be 5
  EXPECT_DOUBLE_EQ(mm.compute_floor_ms, 4.0);
  const auto& sm = got.at({"forward", OpFamily::Softmax});
  EXPECT_EQ(sm.count, 1);
  EXPECT_DOUBLE_EQ(sm.flops, 0.0);
  EXPECT_DOUBLE_EQ(sm.bytes, 5e6);
  EXPECT_DOUBLE_EQ(sm.floor_ms, 5.0);
  EXPECT_DOUBLE_EQ(sm.compute_floor_ms, 0.0);
  const auto& ew = got.at({"backward", OpFamily::Elementwise});
  EXPECT_DOUBLE_EQ(ew.bytes, 72.0);
  EXPECT_DOUBLE_EQ(ew.floor_ms, 72.0 / 1e9 * 1e3);
  // collect() resets the sums.
  EXPECT_TRUE(timer.collect().empty());
}

TEST(Roofline, MatmulCostFromTheGemmShape) {
  Context ctx(Device::cpu());
  KernelTimer timer(ctx);
  ctx.set_timer(&timer);
  auto cost_of = [&](auto&& f) {
    f();
    auto e = timer.collect();
    EXPECT_EQ(e.size(), 1u);
    return e.empty() ? OpCost{} : OpCost{e[0].flops, e[0].bytes};
  };
  const int64_t m = 5, n = 7, k = 3, batch = 4;
  Tensor a = Tensor::zeros({m, k}, DType::F32, ctx), b = Tensor::zeros({k, n}, DType::F32, ctx);
  Tensor c = Tensor::zeros({m, n}, DType::F32, ctx);
  // C = A B: 2·m·n·k FLOPs; A, B read, C written.
  OpCost g = cost_of([&] { ops::matmul(ctx, c, a, b, false, false); });
  EXPECT_EQ(g.flops, 2.0 * m * n * k);
  EXPECT_EQ(g.bytes, 4.0 * (m * k + k * n + m * n));
  // beta ≠ 0 reads C too.
  g = cost_of([&] { ops::matmul(ctx, c, a, b, false, false, 1.0f, 1.0f); });
  EXPECT_EQ(g.bytes, 4.0 * (m * k + k * n + 2 * m * n));
  // Batched with B broadcast (a 2-D operand): B counts once, A and C per batch entry.
  Tensor a3 = Tensor::zeros({batch, m, k}, DType::F32, ctx), c3 = Tensor::zeros({batch, m, n}, DType::F32, ctx);
  g = cost_of([&] { ops::matmul(ctx, c3, a3, b, false, false); });
  EXPECT_EQ(g.flops, 2.0 * batch * m * n * k);
  EXPECT_EQ(g.bytes, 4.0 * (batch * m * k + k * n + batch * m * n));
  // Transposes change nothing: op(A) is still m × k.
  Tensor at = Tensor::zeros({k, m}, DType::F32, ctx), bt = Tensor::zeros({n, k}, DType::F32, ctx);
  g = cost_of([&] { ops::matmul(ctx, c, at, bt, true, true); });
  EXPECT_EQ(g.flops, 2.0 * m * n * k);
  EXPECT_EQ(g.bytes, 4.0 * (m * k + k * n + m * n));
  ctx.set_timer(nullptr);
}

// ---- the table's rows -----------------------------------------------------------------------

TEST(Roofline, RowsArePerStepWithAStepRowOfSums) {
  std::vector<KernelTimer::Entry> entries;
  KernelTimer::Entry mm{"forward", OpFamily::Matmul, 30.0, 6, 6e12, 3e9, 12.0, 10.0};
  KernelTimer::Entry ln{"backward", OpFamily::Norm, 9.0, 3, 0.0, 6e9, 6.0, 0.0};
  entries.push_back(mm);
  entries.push_back(ln);
  const auto rows = bench::roofline_rows(entries, 3, 25.0);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].phase, "forward");
  EXPECT_EQ(rows[0].family, "matmul");
  EXPECT_DOUBLE_EQ(rows[0].flops, 2e12);
  EXPECT_DOUBLE_EQ(rows[0].bytes, 1e9);
  EXPECT_DOUBLE_EQ(rows[0].achieved_ms, 10.0);
  EXPECT_DOUBLE_EQ(rows[0].floor_ms, 4.0);
  EXPECT_DOUBLE_EQ(rows[0].ratio(), 2.5);
  EXPECT_STREQ(rows[0].bound(), "compute");
  EXPECT_EQ(rows[1].family, "normalization");
  EXPECT_STREQ(rows[1].bound(), "memory");
  EXPECT_DOUBLE_EQ(rows[1].ratio(), 1.5);
  const auto& step = rows[2];
  EXPECT_EQ(step.phase, "step");
  EXPECT_EQ(step.family, "all");
  EXPECT_DOUBLE_EQ(step.flops, 2e12);
  EXPECT_DOUBLE_EQ(step.bytes, 3e9);
  EXPECT_DOUBLE_EQ(step.floor_ms, 6.0);
  EXPECT_DOUBLE_EQ(step.achieved_ms, 25.0);  // the pass's time, not the kernels' sum
  EXPECT_DOUBLE_EQ(step.ratio(), 25.0 / 6.0);
  EXPECT_STREQ(step.bound(), "compute");  // 10/3 ms of compute-bound floor against 8/3 of memory
  // No cost (communication): no floor, no ratio.
  const auto none = bench::roofline_rows({KernelTimer::Entry{"backward", OpFamily::Communication, 1.0, 1}}, 1, 1.0);
  EXPECT_TRUE(std::isnan(none[0].ratio()));
  EXPECT_STREQ(none[0].bound(), "none");
}

TEST(Roofline, CopyRateIsMeasuredOnceAndTheCpuHasNoComputeSide) {
  Context ctx(Device::cpu());
  const double rate = bench::copy_bytes_per_s(ctx);
  EXPECT_GT(rate, 1e8);                           // any machine copies more than 100 MB/s
  EXPECT_EQ(bench::copy_bytes_per_s(ctx), rate);  // remembered, not measured again
  const RooflineRates r = bench::roofline_rates(ctx, std::nan(""));
  EXPECT_EQ(r.flops_per_s, 0.0);
  EXPECT_EQ(r.bytes_per_s, rate);
  EXPECT_EQ(bench::roofline_rates(ctx, 5e12).flops_per_s, 5e12);
}

// ---- a whole train step against hand-computed counts ----------------------------------------

using Key = std::pair<std::string, OpFamily>;
using Costs = std::map<Key, OpCost>;

struct StepShape {
  TransformerConfig cfg;
  int64_t B, T;
};

// Every (phase, family)'s FLOPs and bytes for one step of zero_grad → forward → backward →
// clip_grad_norm → AdamW step in fp32 on the CPU (e = 4 bytes per value, 4 per token id), from
// the shapes: N = B·T tokens, C = d_model, F = d_ff, V = vocab, H heads of D = C/H, L layers,
// P parameters in `ranges` contiguous optimizer ranges. Written from the model's code
// (src/model/transformer.cpp, layers.cpp), not from the ops' cost code.
Costs expected_step(const StepShape& s, int64_t ranges, bool train) {
  const TransformerConfig& c = s.cfg;
  const double B = double(s.B), T = double(s.T), N = B * T, C = double(c.d_model), F = double(c.d_ff),
               V = double(c.vocab_size), H = double(c.num_heads), D = C / H, L = double(c.num_layers),
               P = double(c.num_params()), e = 4, id = 4;
  const bool fused = c.fused, flash = c.attention == AttentionImpl::Flash;
  const bool norms_again = c.recompute == Recompute::All, swiglu_again = c.recompute != Recompute::Off;
  Costs x;
  auto add = [&](const char* phase, OpFamily f, double flops, double bytes) {
    OpCost& o = x[{phase, f}];
    o.flops += flops;
    o.bytes += bytes;
  };
  const double pairs = T * (T + 1) / 2;  // causal (query, key) pairs per sequence and head

  // ---- forward
  // zero_grad (in the forward phase): the embedding's gradient, the only one a use adds into
  add("forward", OpFamily::Elementwise, 0, V * C * e);
  // embedding: ids, the gathered rows, the output
  add("forward", OpFamily::Elementwise, 0, N * id + 2 * N * C * e);
  for (int l = 0; l < c.num_layers; ++l) {
    add("forward", OpFamily::Norm, 0, (2 * N * C + C + N) * e);  // ln1: x, w → y, rstd
    // q, k, v: one (N, 3C) GEMM, or three (N, C) GEMMs each reading the normed input
    add("forward", OpFamily::Matmul, 2 * N * C * 3 * C,
        fused ? (N * C + 3 * C * C + 3 * N * C) * e : 3 * (N * C + C * C + N * C) * e);
    add("forward", OpFamily::Elementwise, 0, 2 * (2 * N * C * e));  // RoPE on q and k, in place
    if (flash) {
      // read q, k, v, write o and the logsumexp (B, H, T) fp32; 4·D FLOPs per causal pair
      add("forward", OpFamily::Attention, 4 * D * pairs * B * H, (4 * N * C) * e + B * H * T * 4);
    } else {
      // per sequence: S = QKᵀ (H, T, T) and O = PV; every pair, masked or not
      add("forward", OpFamily::Matmul, 2 * 2 * B * H * T * T * D,
          B * ((2 * H * T * D + H * T * T) + (H * T * T + 2 * H * T * D)) * e);
      add("forward", OpFamily::Softmax, 0, 2 * B * H * T * T * e);
    }
    // output projection into the residual (beta = 1: the copy of x is read), or to its own
    // output and an add
    add("forward", OpFamily::Matmul, 2 * N * C * C, fused ? (N * C + C * C + 2 * N * C) * e : (2 * N * C + C * C) * e);
    if (!fused) add("forward", OpFamily::Elementwise, 0, 3 * N * C * e);
    add("forward", OpFamily::Norm, 0, (2 * N * C + C + N) * e);  // ln2
    // w1, w3: one batched GEMM reading the normed input once, or two GEMMs
    add("forward", OpFamily::Matmul, 2 * 2 * N * C * F,
        fused ? (N * C + 2 * F * C + 2 * N * F) * e : 2 * (N * C + F * C + N * F) * e);
    add("forward", OpFamily::Elementwise, 0, 3 * N * F * e);  // SwiGLU
    add("forward", OpFamily::Matmul, 2 * N * F * C,
        fused ? (N * F + C * F + 2 * N * C) * e : (N * F + C * F + N * C) * e);
    if (!fused) add("forward", OpFamily::Elementwise, 0, 3 * N * C * e);
  }
  add("forward", OpFamily::Norm, 0, (2 * N * C + C + N) * e);                    // ln_final
  add("forward", OpFamily::Matmul, 2 * N * C * V, (N * C + V * C + N * V) * e);  // lm_head
  // cross-entropy: logits and targets read, the loss written, dlogits over the logits
  add("forward", OpFamily::Loss, 0, N * V * e + N * id + 4 + (train ? N * V * e : 0));
  if (!train) return x;

  // ---- backward
  // A weight gradient is written by its step's first contribution (ParamStore::grad_beta): the
  // dW GEMMs and the norms' dw write it without reading it.
  add("backward", OpFamily::Matmul, 2 * V * C * N, (N * V + N * C + V * C) * e);  // lm_head dW = dyᵀx
  add("backward", OpFamily::Matmul, 2 * N * V * C, (N * V + V * C + N * C) * e);  // dx = dy W
  add("backward", OpFamily::Norm, 0, (3 * N * C + 2 * C + N) * e);                // ln_final: dx and dw written
  for (int l = 0; l < c.num_layers; ++l) {
    add("backward", OpFamily::Matmul, 2 * C * F * N, (N * C + N * F + C * F) * e);  // w2 dW
    add("backward", OpFamily::Matmul, 2 * N * C * F, (N * C + C * F + N * F) * e);  // w2 dx
    // SwiGLU backward: dg, h1, h3 → dh1, dh3, and with recompute g again in the same pass.
    add("backward", OpFamily::Elementwise, 0, (swiglu_again ? 6 : 5) * N * F * e);
    if (norms_again) add("backward", OpFamily::Norm, 0, (2 * N * C + C + N) * e);  // ln2 again
    add("backward", OpFamily::Matmul, 2 * 2 * F * C * N,
        fused ? (2 * N * F + N * C + 2 * F * C) * e : 2 * (N * F + N * C + F * C) * e);  // w1, w3 dW
    add("backward", OpFamily::Matmul, 2 * N * F * C, (N * F + F * C + N * C) * e);       // w1 dx
    add("backward", OpFamily::Matmul, 2 * N * F * C, (N * F + F * C + 2 * N * C) * e);   // w3 dx, beta = 1
    add("backward", OpFamily::Norm, 0, (4 * N * C + 2 * C + N) * e);            // ln2: dx accumulated, dw written
    add("backward", OpFamily::Matmul, 2 * C * C * N, (2 * N * C + C * C) * e);  // output proj dW
    add("backward", OpFamily::Matmul, 2 * N * C * C, (2 * N * C + C * C) * e);  // output proj dx
    if (flash) {
      // read q, k, v, o, dO and the logsumexp, write dq, dk, dv; 10·D FLOPs per causal pair
      add("backward", OpFamily::Attention, 10 * D * pairs * B * H, 8 * N * C * e + B * H * T * 4);
    } else {
      // per sequence dV = PᵀdO, dP = dO Vᵀ, dQ = dS K, dK = dSᵀQ; softmax backward dP, P → dS
      add("backward", OpFamily::Matmul, 4 * 2 * B * H * T * T * D, 4 * B * (H * T * T + 2 * H * T * D) * e);
      add("backward", OpFamily::Softmax, 0, 3 * B * H * T * T * e);
    }
    add("backward", OpFamily::Elementwise, 0, 2 * (2 * N * C * e));                // inverse RoPE on dq, dk
    if (norms_again) add("backward", OpFamily::Norm, 0, (2 * N * C + C + N) * e);  // ln1 again
    if (fused) {
      add("backward", OpFamily::Matmul, 2 * 3 * C * C * N, (3 * N * C + N * C + 3 * C * C) * e);  // qkv dW
      add("backward", OpFamily::Matmul, 2 * N * 3 * C * C, (3 * N * C + 3 * C * C + N * C) * e);  // qkv dx
    } else {
      add("backward", OpFamily::Matmul, 3 * 2 * C * C * N, 3 * (2 * N * C + C * C) * e);  // three dW
      // three dx GEMMs summed: the first writes, the next two accumulate (beta = 1)
      add("backward", OpFamily::Matmul, 3 * 2 * N * C * C, (2 * N * C + C * C) * e + 2 * (3 * N * C + C * C) * e);
    }
    add("backward", OpFamily::Norm, 0, (4 * N * C + 2 * C + N) * e);  // ln1
  }
  // embedding: dout and the ids read, one row of dweight updated per token (at most V rows)
  add("backward", OpFamily::Elementwise, 0, N * C * e + N * id + 2 * std::min(N, V) * C * e);

  // ---- optimizer: Σg² into a 1-element sum per range; unfused, clip_by_norm rewrites the
  // gradients; AdamW reads g (and the sum, for the folded clip or the guard) and updates p, m, v.
  const double R = double(ranges);
  add("optimizer", OpFamily::Optimizer, 0, P * e + R * 2 * 4);
  if (!fused) add("optimizer", OpFamily::Optimizer, 0, 2 * P * e + R * 4);
  add("optimizer", OpFamily::Optimizer, 0, 7 * P * e + R * 4);
  return x;
}

Costs measured_step(const StepShape& s, bool train, int64_t* ranges) {
  Context ctx(Device::cpu());
  TransformerLM m(s.cfg, ctx);
  m.init_weights(ctx, 3);
  OptimizerConfig oc;
  oc.fused = s.cfg.fused;
  const auto r = contiguous_ranges(trainable_params(m.store()));
  *ranges = static_cast<int64_t>(r.size());
  auto opt = make_optimizer(oc, ctx, r);
  const auto ids = test::random_ids(s.B * s.T, static_cast<int32_t>(s.cfg.vocab_size), 7);
  const auto tgt = test::random_ids(s.B * s.T, static_cast<int32_t>(s.cfg.vocab_size), 8);
  Tensor tid = test::make_ids(ctx, {s.B, s.T}, ids), ttg = test::make_ids(ctx, {s.B, s.T}, tgt);
  KernelTimer timer(ctx, RooflineRates{1e12, 1e10});
  ctx.set_timer(&timer);
  timer.set_phase("forward");
  m.store().zero_grad(ctx);
  m.forward(ctx, tid, ttg, train);
  if (train) {
    timer.set_phase("backward");
    m.backward(ctx);
    timer.set_phase("optimizer");
    opt->clip_grad_norm(ctx, 1.0f);
    opt->step(ctx, 1e-3f);
  }
  ctx.set_timer(nullptr);
  Costs out;
  for (const auto& e : timer.collect()) {
    out[{e.phase, e.family}] = OpCost{e.flops, e.bytes};
    // The floor is the per-op sum; with no op both compute- and memory-free it is positive.
    EXPECT_GT(e.floor_ms, 0.0) << e.phase << " " << op_family_name(e.family);
    EXPECT_GE(e.floor_ms, std::max(e.flops / 1e12, e.bytes / 1e10) * 1e3 * (1 - 1e-12));
  }
  return out;
}

struct StepCase {
  const char* name;
  AttentionImpl attention;
  int64_t d_model, B;
  bool fused;
  Recompute recompute;
};

void PrintTo(const StepCase& c, std::ostream* os) { *os << c.name; }

class RooflineStep : public ::testing::TestWithParam<StepCase> {};

TEST_P(RooflineStep, EveryPhaseAndFamilyMatchesTheHandCount) {
  const StepCase& p = GetParam();
  // vocab 11, context 4, d_model 8 (naive; flash needs a head dimension of 16: d_model 32),
  // 1 layer, 2 heads, d_ff 16; T 4.
  StepShape s{test::test_transformer(11, 4, p.d_model, 1, 2, 16, p.attention), p.B, 4};
  s.cfg.fused = p.fused;
  s.cfg.recompute = p.recompute;
  for (bool train : {true, false}) {
    int64_t ranges = 0;
    const Costs got = measured_step(s, train, &ranges);
    const Costs want = expected_step(s, ranges, train);
    for (const auto& [key, cost] : want) {
      SCOPED_TRACE(std::string(train ? "train step, " : "inference, ") + key.first + " " + op_family_name(key.second));
      auto it = got.find(key);
      ASSERT_NE(it, got.end()) << "no op of this phase and family ran";
      EXPECT_EQ(it->second.flops, cost.flops);
      EXPECT_EQ(it->second.bytes, cost.bytes);
    }
    for (const auto& [key, cost] : got)
      EXPECT_TRUE(want.count(key)) << "unexpected ops: " << key.first << " " << op_family_name(key.second);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, RooflineStep,
    ::testing::Values(StepCase{"naive_fused", AttentionImpl::Naive, 8, 2, true, Recompute::All},
                      StepCase{"naive_unfused", AttentionImpl::Naive, 8, 2, false, Recompute::All},
                      // 16 tokens over 11 ids: the embedding gradient's rows are capped at V
                      StepCase{"naive_keep_activations_b4", AttentionImpl::Naive, 8, 4, true, Recompute::Off},
                      StepCase{"flash_fused", AttentionImpl::Flash, 32, 2, true, Recompute::All},
                      StepCase{"flash_unfused", AttentionImpl::Flash, 32, 2, false, Recompute::All},
                      StepCase{"flash_recompute_swiglu", AttentionImpl::Flash, 32, 2, true, Recompute::Swiglu}),
    [](const ::testing::TestParamInfo<StepCase>& i) { return std::string(i.param.name); });

// ---- bench model's table ---------------------------------------------------------------------

TEST(Roofline, BenchModelWritesTheTableBesideTheBreakdown) {
  bench::ModelBenchOptions opt;
  opt.sizes = {"tiny"};
  opt.contexts = {8};
  opt.precisions = {Precision::FP32};
  opt.attention = {"naive", "flash"};
  opt.warmups = {0};
  opt.steps = 2;
  opt.batch_size = 1;
  opt.vocab_size = 64;
  opt.breakdown = true;
  const auto r = bench::run_model_bench(opt, Device::cpu(), nullptr);
  const io::ResultTable& t = r.roofline;
  const io::ResultTable& bd = r.breakdown;
  t.validate();
  auto col = [&](const io::ResultTable& tab, size_t row, const char* name) {
    return tab.at(row, tab.column_index(name));
  };
  auto str = [&](const io::ResultTable& tab, size_t row, const char* name) {
    return std::get<std::string>(col(tab, row, name));
  };
  auto num = [&](size_t row, const char* name) { return std::get<double>(col(t, row, name)); };
  // One row per breakdown row plus a step row per pass and configuration (2 attention × 2 passes).
  ASSERT_EQ(t.rows(), bd.rows() + 4);
  size_t b = 0;
  double flops = 0, bytes = 0, floor = 0;
  for (size_t i = 0; i < t.rows(); ++i) {
    EXPECT_TRUE(std::isnan(num(i, "peak_tflops")));  // the CPU: memory-only floors
    EXPECT_GT(num(i, "copy_GBps"), 0.1);
    EXPECT_EQ(str(t, i, "bound"), "memory");
    EXPECT_GT(num(i, "floor_ms"), 0.0);
    EXPECT_DOUBLE_EQ(num(i, "ratio"), num(i, "achieved_ms") / num(i, "floor_ms"));
    const double memory_ms = num(i, "gbytes") / num(i, "copy_GBps") * 1e3;  // sums of per-op floors
    EXPECT_NEAR(num(i, "floor_ms"), memory_ms, 1e-12 * memory_ms);
    if (str(t, i, "phase") == "step") {
      EXPECT_EQ(str(t, i, "family"), "all");
      EXPECT_NEAR(num(i, "gflop"), flops, 1e-12 * flops);
      EXPECT_NEAR(num(i, "gbytes"), bytes, 1e-12 * bytes);
      EXPECT_NEAR(num(i, "floor_ms"), floor, 1e-12 * floor);
      flops = bytes = floor = 0;
      continue;
    }
    // The same (pass, phase, family) as the breakdown, in its order, with its time.
    ASSERT_LT(b, bd.rows());
    for (const char* c : {"attention", "pass", "phase", "family"}) EXPECT_EQ(str(t, i, c), str(bd, b, c));
    EXPECT_DOUBLE_EQ(num(i, "achieved_ms"), std::get<double>(col(bd, b, "ms_per_step")));
    ++b;
    flops += num(i, "gflop");
    bytes += num(i, "gbytes");
    floor += num(i, "floor_ms");
  }
  EXPECT_EQ(b, bd.rows());
}

}  // namespace
}  // namespace pt
