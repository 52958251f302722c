// The Transformer on the GPU against the CPU reference: forward, gradients and ten training
// steps from identical weights; bf16 mixed precision within its documented tolerance; flash
// attention against naive attention inside the model; the unfused step against the fused one;
// the gradient norm summed during backward against the sum of the gradients' squares; FP8 Linear
// GEMMs against the CPU's emulation of them.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "common/test_util.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/fp8.h"
#include "model/transformer.h"
#include "optim/deferred_update.h"
#include "parallel/grad_sync.h"
#include "train/train_step.h"

namespace pt {
namespace {

TransformerConfig gpu_test_config(AttentionImpl attn = AttentionImpl::Naive) {
  return test::test_transformer(97, 32, 64, 2, 4, 172, attn);
}

struct TrainRun {
  std::vector<double> losses;
  std::vector<double> grad_norms;  // global norm before each step's clip
  std::vector<double> grads;       // after the first backward
  std::vector<double> params;      // after the last step
  bool fp8_weights_kept = false;   // ParamStore::keeps_fp8_weights
};

// `steps` AdamW steps (clip at max_norm) on fixed random batches, from weights `w0`; the
// optimizer fused as the model (one switch, as the CLI's --fused).
TrainRun train(Context& ctx, const TransformerConfig& cfg, const std::vector<double>& w0, int steps,
               float max_norm = 1.0f, int micro_batches = 1, UpdateOverlap overlap = UpdateOverlap::Off) {
  TransformerLM m(cfg, ctx);
  m.store().params_from_host_f64(ctx, w0);
  OptimizerConfig oc;
  oc.adamw.lr = 1e-3f;
  oc.fused = cfg.fused;
  std::unique_ptr<Optimizer> opt;
  cudaStream_t side = nullptr;
  if (overlap == UpdateOverlap::On) {  // small chunks: an FP8 weight run spans two or three
    auto d = std::make_unique<DeferredUpdateOptimizer>(oc, ctx, m.store(), 4096);
    side = d->side_stream();
    opt = std::move(d);
  } else {
    opt = make_optimizer(oc, ctx, contiguous_ranges(trainable_params(m.store())));
  }
  parallel::NoSync sync;
  TrainStep step(m, *opt, sync, max_norm);
  TrainRun r;
  const int64_t B = 2, T = 32;
  for (int s = 0; s < steps; ++s) {
    const int64_t rows = B * micro_batches;
    Tensor ids = test::make_ids(ctx, {rows, T}, test::random_ids(rows * T, 97, 100 + s));
    Tensor tg = test::make_ids(ctx, {rows, T}, test::random_ids(rows * T, 97, 200 + s));
    if (s == 0 && micro_batches == 1) {  // gradients of the first step, before clipping and the update
      m.store().zero_grad(ctx);
      m.forward(ctx, ids, tg, true);
      m.backward(ctx);
      r.grads = m.store().flat_grads().to_host_f64(ctx);
    }
    if (side)  // the recorded update starts 2 ms late: a read that did not wait finds the old values
      PT_CUDA_CHECK(cudaLaunchHostFunc(
          side, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }, nullptr));
    StepOutputs o = step.run(ctx, ids, tg, 1e-3f, micro_batches);
    r.losses.push_back(o.loss.to_host_f64(ctx)[0]);
    r.grad_norms.push_back(std::sqrt(o.grad_sumsq.to_host_f64(ctx)[0]));
  }
  r.params = m.store().params_to_host_f64(ctx);
  r.fp8_weights_kept = m.store().keeps_fp8_weights();
  return r;
}

std::vector<double> initial_weights(const TransformerConfig& cfg) {
  Context cpu(Device::cpu());
  TransformerLM m(cfg, cpu);
  m.init_weights(cpu, 42);
  return m.store().params_to_host_f64(cpu);
}

// `steps` from the same weights on the CPU (fp32: the reference) and on the GPU in `precision`.
std::pair<TrainRun, TrainRun> cpu_and_gpu(Precision precision, int steps) {
  const TransformerConfig cfg = gpu_test_config();
  const auto w0 = initial_weights(cfg);
  Context cpu(Device::cpu()), gpu(Device::cuda(0), precision);
  return {train(cpu, cfg, w0, steps), train(gpu, cfg, w0, steps)};
}

TEST(TransformerGpu, Fp32MatchesTheCpuOverTenTrainingSteps) {
  PT_REQUIRE_GPU();
  const auto [a, b] = cpu_and_gpu(Precision::FP32, 10);
  // fp32 on both sides: only summation order differs. Gradients agree to ~1e-5 relative;
  // ten Adam steps amplify differences a little (Adam normalises tiny gradients).
  EXPECT_LE(test::rel_error(b.grads, a.grads), 1e-4);
  for (int s = 0; s < 10; ++s) EXPECT_NEAR(b.losses[s], a.losses[s], 1e-4 * a.losses[s]) << "step " << s;
  EXPECT_LE(test::rel_error(b.params, a.params), 1e-4);
  EXPECT_LT(a.losses.back(), a.losses.front()) << "the loss falls";
}

TEST(TransformerGpu, Bf16MixedPrecisionStaysCloseToFp32) {
  PT_REQUIRE_GPU();
  const auto [a, b] = cpu_and_gpu(Precision::BF16, 3);
  // bf16 GEMM operands (8-bit mantissa): the loss agrees to ~1e-2 relative and the
  // gradient direction to a few per cent (documented tolerance for mixed precision).
  EXPECT_NEAR(b.losses[0], a.losses[0], 1e-2 * a.losses[0]);
  EXPECT_LE(test::rel_error(b.grads, a.grads), 5e-2);
}

TEST(TransformerGpu, Tf32StaysCloseToFp32) {
  PT_REQUIRE_GPU();
  const auto [a, b] = cpu_and_gpu(Precision::TF32, 1);
  EXPECT_NEAR(b.losses[0], a.losses[0], 2e-3 * a.losses[0]);
  EXPECT_LE(test::rel_error(b.grads, a.grads), 1e-2);
}

TEST(TransformerGpu, FlashAttentionModelMatchesNaive) {
  PT_REQUIRE_GPU();
  for (Precision prec : {Precision::FP32, Precision::BF16}) {
    const auto w0 = initial_weights(gpu_test_config());
    Context gpu(Device::cuda(0), prec);
    TrainRun naive = train(gpu, gpu_test_config(AttentionImpl::Naive), w0, 2);
    TrainRun flash = train(gpu, gpu_test_config(AttentionImpl::Flash), w0, 2);
    const double tol = prec == Precision::FP32 ? 1e-4 : 2e-2;
    EXPECT_NEAR(flash.losses[0], naive.losses[0], tol * naive.losses[0]) << precision_name(prec);
    EXPECT_LE(test::rel_error(flash.grads, naive.grads), prec == Precision::FP32 ? 1e-4 : 5e-2) << precision_name(prec);
  }
}

// --fused off (three q/k/v GEMMs, GEMM then add per residual, clip and bf16 mirror as passes of
// their own) against the fused step, with a clip that acts, over three steps.
TEST(TransformerGpu, UnfusedStepMatchesTheFusedOne) {
  PT_REQUIRE_GPU();
  for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash})
    for (Precision prec : {Precision::FP32, Precision::BF16}) {
      TransformerConfig fused = gpu_test_config(attn), unfused = fused;
      unfused.fused = false;
      const auto w0 = initial_weights(fused);
      const float max_norm = 0.05f;
      Context gpu(Device::cuda(0), prec);
      TrainRun a = train(gpu, fused, w0, 3, max_norm), b = train(gpu, unfused, w0, 3, max_norm);
      const std::string what = std::string(precision_name(prec)) + " " + attention_impl_name(attn);
      for (double n : a.grad_norms) ASSERT_GT(n, max_norm) << what << ": the clip coefficient is below 1";
      // fp32: the split GEMMs sum in another order (other cuBLAS kernels), nothing else differs.
      // bf16: the unfused residual branch is rounded to bf16 before the add (autocast's linear
      // output) where the fused GEMM adds its fp32 accumulator into the residual: ~2^-9 relative
      // per branch, which the next layers and the loss carry, so 1e-2 is the bound.
      const double tol = prec == Precision::FP32 ? 1e-5 : 1e-2;
      for (int s = 0; s < 3; ++s) {
        EXPECT_NEAR(b.losses[s], a.losses[s], tol * a.losses[s]) << what << " step " << s;
        EXPECT_NEAR(b.grad_norms[s], a.grad_norms[s], tol * a.grad_norms[s]) << what << " step " << s;
      }
      EXPECT_LE(test::rel_error(b.grads, a.grads), tol) << what;
      EXPECT_LE(test::rel_error(b.params, a.params), tol) << what;
    }
}

// --grad-dtype bf16 against fp32 gradients in the same bf16 mode, from the same weights: the
// store holds bf16 gradients (half the bytes); each is the fp32 one rounded once (every weight
// gradient has one contribution a micro-batch: its GEMM's, or the embedding's and RMSNorm's
// fp32 sums), so the whole gradient differs by at most 2^-8 relative, and by two roundings with
// two micro-batches added into it; five AdamW steps (clipped, fused) stay as close as bf16 mixed
// precision stays to fp32.
TEST(TransformerGpu, Bf16GradientsAreTheFp32OnesRoundedOnce) {
  PT_REQUIRE_GPU();
  const TransformerConfig cfg = gpu_test_config(AttentionImpl::Flash);
  const auto w0 = initial_weights(cfg);
  Context g32(Device::cuda(0), Precision::BF16), g16(Device::cuda(0), Precision::BF16);
  g16.set_grad_dtype(DType::BF16);
  {
    TransformerLM a(cfg, g32), b(cfg, g16);
    ASSERT_EQ(b.store().flat_grads().dtype(), DType::BF16);
    EXPECT_EQ(2 * b.store().flat_grads().nbytes(), a.store().flat_grads().nbytes());
    a.store().params_from_host_f64(g32, w0);
    b.store().params_from_host_f64(g16, w0);
    const int64_t B = 2, T = 32;
    for (int micro : {1, 2}) {
      std::vector<double> grads[2];
      int k = 0;
      for (auto [m, ctx] : {std::pair{&a, &g32}, std::pair{&b, &g16}}) {
        m->store().zero_grad(*ctx, micro);
        for (int i = 0; i < micro; ++i) {
          m->forward(*ctx, test::make_ids(*ctx, {B, T}, test::random_ids(B * T, 97, 300 + i)),
                     test::make_ids(*ctx, {B, T}, test::random_ids(B * T, 97, 400 + i)), true, 1.0f / float(micro));
          m->backward(*ctx);
        }
        grads[k++] = m->store().flat_grads().to_host_f64(*ctx);
      }
      EXPECT_LE(test::rel_error(grads[1], grads[0]), micro / 256.0) << micro << " micro-batches";
      EXPECT_GT(test::rel_error(grads[1], grads[0]), 0.0) << "the gradients are rounded to bf16";
    }
  }
  const TrainRun a = train(g32, cfg, w0, 5), b = train(g16, cfg, w0, 5);
  for (int s = 0; s < 5; ++s) EXPECT_NEAR(b.losses[s], a.losses[s], 1e-2 * a.losses[s]) << "step " << s;
  EXPECT_LE(test::rel_error(b.params, a.params), 1e-3);
}

// --residual-dtype bf16 (as llm.c): the embedding output and every block's h and output are stored
// in bf16, the out-projection and w2 GEMMs add into them in their epilogue, RMSNorm reads them;
// the residual gradient stays fp32. What forward keeps for backward is 2·layers + 1 stream tensors
// of B·T·d_model values at half the bytes, exactly. Against the fp32 CPU reference it stays inside
// bf16 mixed precision's documented tolerance (Bf16MixedPrecisionStaysCloseToFp32), fused and
// unfused, naive and flash attention, and it is not the fp32 stream's result (the rounding happens).
TEST(TransformerGpu, Bf16ResidualStreamStaysCloseToFp32) {
  PT_REQUIRE_GPU();
  const int64_t B = 2, T = 32;
  for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash}) {
    const TransformerConfig cfg = gpu_test_config(attn);
    const auto w0 = initial_weights(cfg);
    Context cpu(Device::cpu()), g32(Device::cuda(0), Precision::BF16), g16(Device::cuda(0), Precision::BF16);
    g16.set_residual_dtype(DType::BF16);
    const std::string what = attention_impl_name(attn);
    {
      // Activation bytes forward keeps, each stream dtype: the difference is the stream's half.
      int64_t kept[2];
      int k = 0;
      for (Context* ctx : {&g32, &g16}) {
        TransformerLM m(cfg, *ctx);
        m.store().params_from_host_f64(*ctx, w0);
        auto& alloc = TrackingAllocator::instance();
        const int64_t before = alloc.stats(DeviceKind::CUDA).in_use_by_category[int(MemCategory::Activations)];
        m.forward(*ctx, test::make_ids(*ctx, {B, T}, test::random_ids(B * T, 97, 1)),
                  test::make_ids(*ctx, {B, T}, test::random_ids(B * T, 97, 2)), true);
        kept[k++] = alloc.stats(DeviceKind::CUDA).in_use_by_category[int(MemCategory::Activations)] - before;
        m.release_activations();
      }
      EXPECT_EQ(kept[0] - kept[1], (2 * cfg.num_layers + 1) * B * T * cfg.d_model * 2) << what;
    }
    const TrainRun ref = train(cpu, cfg, w0, 3), a = train(g32, cfg, w0, 3), b = train(g16, cfg, w0, 3);
    TransformerConfig unfused_cfg = cfg;
    unfused_cfg.fused = false;
    const TrainRun c = train(g16, unfused_cfg, w0, 3);
    for (const TrainRun* r : {&b, &c}) {
      const std::string which = what + (r == &b ? " fused" : " unfused");
      for (int s = 0; s < 3; ++s)
        EXPECT_NEAR(r->losses[s], ref.losses[s], 1e-2 * ref.losses[s]) << which << " step " << s;
      EXPECT_LE(test::rel_error(r->grads, ref.grads), 5e-2) << which;
      EXPECT_LE(test::rel_error(r->params, ref.params), 1e-2) << which;
    }
    EXPECT_GT(test::rel_error(b.grads, a.grads), 0.0) << what << ": the stream is rounded to bf16";
    EXPECT_LT(b.losses.back(), b.losses.front()) << what << ": the loss falls";
  }
}

// zero_grad zeroes only the embedding's gradient; the GEMMs and RMSNorm's dw write the others
// on their step's first contribution (ParamStore::grad_beta). A gradient buffer full of NaN
// before the step gives the gradients of a zeroed one (to the embedding's atomics' order), in
// fp32 and bf16 gradients, over one micro-batch and two.
TEST(TransformerGpu, GradientsDoNotDependOnWhatTheBufferHeldBeforeTheStep) {
  PT_REQUIRE_GPU();
  const TransformerConfig cfg = gpu_test_config(AttentionImpl::Flash);
  const auto w0 = initial_weights(cfg);
  for (DType grad_dtype : {DType::F32, DType::BF16})
    for (int micro : {1, 2}) {
      SCOPED_TRACE(std::string(dtype_name(grad_dtype)) + " gradients, micro-batches " + std::to_string(micro));
      Context gpu(Device::cuda(0), Precision::BF16);
      gpu.set_grad_dtype(grad_dtype);
      auto grads = [&](bool poisoned) {
        TransformerLM m(cfg, gpu);
        m.store().params_from_host_f64(gpu, w0);
        Tensor g = m.store().flat_grads();
        if (poisoned) test::poison(gpu, g);
        m.store().zero_grad(gpu, micro);
        const int64_t B = 2, T = 32;
        for (int i = 0; i < micro; ++i) {
          m.forward(gpu, test::make_ids(gpu, {B, T}, test::random_ids(B * T, 97, 500 + i)),
                    test::make_ids(gpu, {B, T}, test::random_ids(B * T, 97, 600 + i)), true, 1.0f / float(micro));
          m.backward(gpu);
        }
        return g.to_host_f64(gpu);
      };
      const auto clean = grads(false), poisoned = grads(true);
      for (double v : poisoned) ASSERT_TRUE(std::isfinite(v));
      EXPECT_LE(test::rel_error(poisoned, clean), 1e-6);
    }
}

// Backward with recompute (the SwiGLU product remade in the pass that computes dh1 and dh3, after
// dg) against backward from kept activations, in both precisions: the same arithmetic, so the
// gradients agree to the atomics' summation order (the embedding's and RMSNorm's), 1e-6.
TEST(TransformerGpu, RecomputedBackwardEqualsTheKeptOne) {
  PT_REQUIRE_GPU();
  for (Precision prec : {Precision::FP32, Precision::BF16}) {
    TransformerConfig keep = gpu_test_config(AttentionImpl::Flash), again = keep, swiglu = keep;
    keep.recompute = Recompute::Off;
    swiglu.recompute = Recompute::Swiglu;
    const auto w0 = initial_weights(keep);
    Context gpu(Device::cuda(0), prec);
    const TrainRun a = train(gpu, keep, w0, 1), b = train(gpu, again, w0, 1), c = train(gpu, swiglu, w0, 1);
    EXPECT_LE(test::rel_error(b.grads, a.grads), 1e-6) << precision_name(prec);
    EXPECT_EQ(b.losses, a.losses) << precision_name(prec);
    EXPECT_LE(test::rel_error(c.grads, a.grads), 1e-6) << precision_name(prec) << ": --recompute swiglu";
    EXPECT_EQ(c.losses, a.losses) << precision_name(prec) << ": --recompute swiglu";
  }
}

// The squared norm summed on a side stream while backward runs equals Σ g² of the final
// gradients; a round that is incomplete (no backward since the last clip) or restarted (two
// backwards without a clip between them) is summed afresh, never taken stale.
TEST(TransformerGpu, NormSummedDuringBackwardEqualsTheSumOfSquares) {
  PT_REQUIRE_GPU();
  for (Precision prec : {Precision::FP32, Precision::BF16}) {
    const TransformerConfig cfg = gpu_test_config(AttentionImpl::Flash);
    Context gpu(Device::cuda(0), prec);
    TransformerLM m(cfg, gpu);
    m.store().params_from_host_f64(gpu, initial_weights(cfg));
    OptimizerConfig oc;
    auto opt = make_optimizer(oc, gpu, contiguous_ranges(trainable_params(m.store())));
    ASSERT_TRUE(opt->overlap_norm_with_backward(gpu, m.store()));
    const int64_t B = 2, T = 32;
    auto backward = [&](uint64_t seed) {
      m.store().zero_grad(gpu);
      m.forward(gpu, test::make_ids(gpu, {B, T}, test::random_ids(B * T, 97, seed)),
                test::make_ids(gpu, {B, T}, test::random_ids(B * T, 97, seed + 1)), true);
      m.backward(gpu);
    };
    auto sum_of_squares = [&] {
      double s = 0;
      for (double g : m.store().flat_grads().to_host_f64(gpu)) s += g * g;
      return s;
    };
    auto clip_norm = [&] { return opt->clip_grad_norm(gpu, 0.0f).to_host_f64(gpu)[0]; };
    const std::string what = precision_name(prec);
    backward(10);
    const double want = sum_of_squares();
    ASSERT_GT(want, 0.0);
    EXPECT_NEAR(clip_norm(), want, 1e-5 * want) << what << ": one backward";
    EXPECT_NEAR(clip_norm(), want, 1e-5 * want) << what << ": no backward since the last clip";
    backward(20);
    backward(10);  // the second backward restarts the round
    EXPECT_NEAR(clip_norm(), want, 1e-5 * want) << what << ": two backwards, one clip";
  }
}

// The FP8 model tests: a GPU with FP8 tensor cores, the tiny model (every width a multiple of 16,
// as the FP8 GEMMs need) and its initial weights.
class TransformerFp8Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    PT_REQUIRE_GPU();
    Context probe(Device::cuda(0));
    if (!fp8_unsupported_reason(probe.target()).empty()) GTEST_SKIP() << "no FP8 tensor cores";
    w0 = initial_weights(cfg);
  }
  const TransformerConfig cfg = test::test_transformer(97, 32, 64, 2, 4, 176);
  std::vector<double> w0;
};

// --precision fp8 (the FP8 GEMMs of the table's layers, bf16 elsewhere) from the same weights and
// batches as the fp32 CPU model (the reference), the CPU's emulation of the FP8 model
// (Context::set_fp8_linear on fp32) and the GPU's bf16 model. The GPU quantises bf16 operands and
// the emulation fp32 ones; where an FP8 rounding boundary falls between the two (for E4M3 about
// one element in 16) they land a whole FP8 step apart, so the two FP8 models' errors are
// independent draws of one size, not the same draw. The GPU's FP8 error against fp32 is held to
// the emulation's size (at most 1.5 times it, plus bf16's own error) and far above bf16's (the
// GEMMs do run in FP8: over 4 times bf16's error). The loss within 1 % of fp32's; ten AdamW steps
// lower it; the same run twice gives the same bits.
TEST_F(TransformerFp8Gpu, ErrorIsTheEmulationsSizeAndRepeatsBitForBit) {
  Context cpu(Device::cpu()), emu(Device::cpu()), gpu(Device::cuda(0), Precision::FP8),
      bf16(Device::cuda(0), Precision::BF16);
  emu.set_fp8_linear(true);
  ASSERT_TRUE(gpu.fp8_linear());
  const TrainRun ref = train(cpu, cfg, w0, 1), emulated = train(emu, cfg, w0, 1), in_bf16 = train(bf16, cfg, w0, 1);
  const TrainRun got = train(gpu, cfg, w0, 10), again = train(gpu, cfg, w0, 10);
  const double fp8_error = test::rel_error(got.grads, ref.grads);
  const double emulation_error = test::rel_error(emulated.grads, ref.grads);
  const double bf16_error = test::rel_error(in_bf16.grads, ref.grads);
  EXPECT_LE(fp8_error, 1.5 * emulation_error + bf16_error);
  EXPECT_GT(fp8_error, 4.0 * bf16_error) << "the GEMMs run in FP8";
  EXPECT_NEAR(got.losses[0], ref.losses[0], 1e-2 * ref.losses[0]);
  EXPECT_LT(got.losses.back(), got.losses.front()) << "the loss falls";
  EXPECT_EQ(again.losses, got.losses);
  EXPECT_EQ(again.grads, got.grads);
  EXPECT_EQ(again.params, got.params);
}

// What the FP8 operands reuse (model/fp8_linear.h) — a weight's casts kept through a step of
// several micro-batches, its amax from forward to backward in a step of one, an input's amax from
// forward for the dW cast of the same (kept or recomputed) input, an amax written by the kernel
// that made the tensor, dy cast once for dX and dW — gives the bits of casts that measure and cast
// afresh at every use (Context::fp8_reuse off), over three steps: the reused values are the same,
// and the kept casts are remade after each update (kept across one, the next step would differ).
// Each --recompute mode, so both kept and recomputed inputs are covered. The weights' casts are
// the store's (ParamStore::fp8_weight: made by the update, in the mirror's bytes), remade by the
// update in order and by the update deferred under the next forward, whose chunks the forward
// must wait for (a read before its chunk's casts would see the last step's).
TEST_F(TransformerFp8Gpu, ReusedCastsAndAmaxesEqualFreshOnes) {
  for (const Recompute r : {Recompute::All, Recompute::Swiglu, Recompute::Off}) {
    for (const int micro_batches : {1, 2}) {
      TransformerConfig c = cfg;
      c.recompute = r;
      Context reuse(Device::cuda(0), Precision::FP8), fresh(Device::cuda(0), Precision::FP8);
      fresh.set_fp8_reuse(false);
      const TrainRun a = train(reuse, c, w0, 3, 1.0f, micro_batches), b = train(fresh, c, w0, 3, 1.0f, micro_batches);
      const TrainRun d = train(reuse, c, w0, 3, 1.0f, micro_batches, UpdateOverlap::On);
      const std::string what = std::string(recompute_name(r)) + ", micro-batches " + std::to_string(micro_batches);
      EXPECT_TRUE(a.fp8_weights_kept && d.fp8_weights_kept) << what;
      EXPECT_FALSE(b.fp8_weights_kept) << what;
      EXPECT_EQ(a.losses, b.losses) << what;
      EXPECT_EQ(a.params, b.params) << what;
      EXPECT_EQ(d.losses, b.losses) << what << ", deferred update";
      EXPECT_EQ(d.params, b.params) << what << ", deferred update";
      EXPECT_LT(a.losses.back(), a.losses.front()) << what;
    }
  }
}

// Under FP8 a GEMM input that only its Linear holds is kept as its dW cast, a byte a value where
// the bf16 input took two (fp8_forward_input): after a forward that saves for backward, the saved
// activations are smaller than with Context::fp8_reuse off (which keeps the inputs) by a byte for
// each value of the kept inputs, both norms' outputs (N, C) a layer and with --recompute off g
// (N, F) too, less at most a device block (512 bytes) a kept cast for the scale it keeps.
// ReusedCastsAndAmaxesEqualFreshOnes holds the gradients to the fresh casts'.
TEST_F(TransformerFp8Gpu, KeptInputCastsHalveTheSavedInputs) {
  const int64_t B = 2, T = 32, N = B * T;
  for (const Recompute r : {Recompute::Swiglu, Recompute::Off}) {
    TransformerConfig c = cfg;
    c.recompute = r;
    int64_t saved[2] = {0, 0};
    for (int reuse = 0; reuse < 2; ++reuse) {
      Context gpu(Device::cuda(0), Precision::FP8);
      gpu.set_fp8_reuse(reuse == 1);
      TransformerLM m(c, gpu);
      m.store().params_from_host_f64(gpu, w0);
      Tensor ids = test::make_ids(gpu, {B, T}, test::random_ids(N, 97, 5));
      Tensor tg = test::make_ids(gpu, {B, T}, test::random_ids(N, 97, 6));
      const int64_t before = TrackingAllocator::instance().stats(DeviceKind::CUDA).in_use;
      m.forward(gpu, ids, tg, true);
      saved[reuse] = TrackingAllocator::instance().stats(DeviceKind::CUDA).in_use - before;
      m.backward(gpu);
    }
    const int64_t kept = r == Recompute::Off ? 3 : 2;  // casts a layer
    const int64_t per_layer = 2 * N * c.d_model + (r == Recompute::Off ? N * c.d_ff : 0) - kept * 512;
    EXPECT_GE(saved[0] - saved[1], c.num_layers * per_layer)
        << recompute_name(r) << ": saved " << saved[1] << " bytes with the kept casts, " << saved[0] << " without";
  }
}

// A kept FP8 weight has no bf16 copy to read: its mirror bytes hold its casts. Reading one is
// an error naming the parameter, not a view of FP8 bytes as bf16; the store's casts of it are
// there instead, both layouts.
TEST_F(TransformerFp8Gpu, KeptWeightHasNoBf16Copy) {
  Context gpu(Device::cuda(0), Precision::FP8);
  TransformerLM m(cfg, gpu);
  Parameter* qkv = nullptr;
  for (const auto& p : m.store().params())
    if (p->fp8_run >= 0 && !qkv) qkv = p.get();
  ASSERT_NE(qkv, nullptr);
  EXPECT_ERROR_HAS(qkv->data_lowp(), qkv->name.c_str(), "FP8 casts");
  const ops::Fp8Operand* casts = m.store().fp8_weight(*qkv);
  ASSERT_NE(casts, nullptr);
  EXPECT_TRUE(casts->stored.defined() && casts->transposed.defined());
  Parameter* embedding = m.store().find("token_embeddings.weight");  // bf16, as the table keeps it
  ASSERT_NE(embedding, nullptr);
  EXPECT_TRUE(embedding->data_lowp().defined());
}

// A GPU without FP8 tensor cores refuses --precision fp8 with one error naming it.
TEST(TransformerGpu, Fp8IsRefusedWithoutFp8TensorCores) {
  PT_REQUIRE_GPU();
  Context probe(Device::cuda(0));
  if (fp8_unsupported_reason(probe.target()).empty()) GTEST_SKIP() << "this GPU has FP8 tensor cores";
  EXPECT_ERROR_HAS(Context(Device::cuda(0), Precision::FP8), "--precision fp8", probe.target().name.c_str(),
                   "compute capability");
}

}  // namespace
}  // namespace pt
