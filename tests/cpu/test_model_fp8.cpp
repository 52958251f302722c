// The Transformer with FP8 Linear GEMMs on the CPU (Context::set_fp8_linear on an fp32 context:
// the emulation of ops/fp8_gemm.h): its logits, loss and gradients stay within FP8's rounding of
// the fp32 model's, and the layers the table keeps in bf16 are untouched.
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "cpu/model_test_util.h"
#include "model/transformer.h"

namespace pt {
namespace {

// ‖a − b‖ / ‖b‖ over [begin, end) of two flat vectors.
double rel_error_in(const std::vector<double>& a, const std::vector<double>& b, int64_t begin, int64_t end) {
  return test::rel_error(std::vector<double>(a.begin() + begin, a.begin() + end),
                         std::vector<double>(b.begin() + begin, b.begin() + end));
}

struct Fp8ModelRun {
  double loss;
  std::vector<double> logits, grads;
};

// Vocabulary 64, context 16, d_model 32, two layers of two heads, d_ff 64: every k of its GEMMs
// a multiple of 16, as the GPU's FP8 GEMMs need; batch 2 × 8 tokens.
constexpr int64_t kB = 2, kT = 8;
TransformerConfig fp8_config() { return test::test_transformer(64, 16, 32, 2, 2, 64); }

Fp8ModelRun run(Context& ctx, TransformerLM& m) {
  const auto ids = test::random_ids(kB * kT, 64, 5), targets = test::random_ids(kB * kT, 64, 6);
  Fp8ModelRun r;
  m.store().zero_grad(ctx);
  r.loss = model_test::model_loss(ctx, m, ids, targets, kB, kT, /*save=*/true);
  m.backward(ctx);
  r.grads = m.store().flat_grads().to_host_f64(ctx);
  r.logits = m.forward_logits(ctx, test::make_ids(ctx, {kB, kT}, ids)).to_host_f64(ctx);
  return r;
}

// Bounds, from the formats' relative precision (half an ulp): u4 = 2^-4 for E4M3 (3 mantissa
// bits), u5 = 2^-3 for E5M2 (2). A quantised operand's elements are off by at most u relative,
// uniformly within ±u on random data, so by u/√3 in the norm; a GEMM of two quantised operands
// by about √2·u/√3 ≈ 0.82·u. Each branch of a block passes two FP8 GEMMs in sequence (qkv then
// out_proj; w1|w3, their product, then w2), whose errors add as a random walk: about 1.16·u per
// branch, diluted by the residual stream the embedding starts. So:
//  · logits (forward only, E4M3 × E4M3): within 1.25·u4 = 2^-4 + 2^-6 norm-wise; one forward
//    operand in E5M2 (twice the error) or a scale applied the wrong way exceeds it;
//  · loss: within 2^-6 relative (the cross-entropy moves far less than its logits);
//  · all gradients (E5M2 × E4M3 in backward, carrying the forward's error): within u5 = 2^-3
//    norm-wise; each parameter's within 2·u5 (fewer elements average less).
TEST(TransformerFp8, LossLogitsAndGradientsStayWithinFp8RoundingOfFp32) {
  Context fp32(Device::cpu()), fp8(Device::cpu());
  fp8.set_fp8_linear(true);
  TransformerLM m(fp8_config(), fp32);
  m.init_weights(fp32, 7);
  const Fp8ModelRun ref = run(fp32, m), got = run(fp8, m);
  const double logits_err = test::rel_error(got.logits, ref.logits);
  const double grad_err = test::rel_error(got.grads, ref.grads);
  EXPECT_LE(logits_err, 0x1p-4 + 0x1p-6);
  EXPECT_LE(std::fabs(got.loss - ref.loss), 0x1p-6 * std::fabs(ref.loss));
  EXPECT_LE(grad_err, 0x1p-3);
  for (const auto& p : m.store().params()) {
    const double e = rel_error_in(got.grads, ref.grads, p->grad_offset, p->grad_offset + p->numel);
    EXPECT_LE(e, 0x1p-2) << p->name;
  }
  // FP8 changed something: the path is taken (a silent bf16/fp32 fallback would pass the bounds).
  EXPECT_GT(logits_err, 1e-4);
  EXPECT_GT(grad_err, 1e-4);
}

// The emulation reuses what the GPU does (Context::fp8_reuse: an input's amax kept from forward
// for the dW cast of the same input, kept or recomputed; dy cast once for dX and dW) and gives the
// bits of casts that measure afresh, in each --recompute mode.
TEST(TransformerFp8, ReusedAmaxesEqualFreshOnes) {
  for (const Recompute r : {Recompute::All, Recompute::Swiglu, Recompute::Off}) {
    TransformerConfig cfg = fp8_config();
    cfg.recompute = r;
    Context reuse(Device::cpu()), fresh(Device::cpu());
    reuse.set_fp8_linear(true);
    fresh.set_fp8_linear(true);
    fresh.set_fp8_reuse(false);
    TransformerLM m(cfg, reuse);
    m.init_weights(reuse, 7);
    const Fp8ModelRun a = run(reuse, m), b = run(fresh, m);
    EXPECT_EQ(a.grads, b.grads) << recompute_name(r);
    EXPECT_EQ(a.logits, b.logits) << recompute_name(r);
  }
}

TEST(TransformerFp8, TheUnfusedModelAndUnalignedShapesAreRefused) {
  Context fp8(Device::cpu());
  fp8.set_fp8_linear(true);
  TransformerConfig split = fp8_config();
  split.fused = false;
  EXPECT_ERROR_HAS(TransformerLM(split, fp8), "--precision fp8 runs the fused model only");
  EXPECT_ERROR_HAS(TransformerLM(test::test_transformer(64, 16, 24, 1, 2, 64), fp8), "multiples of 16");
  TransformerLM m(fp8_config(), fp8);
  m.init_weights(fp8, 1);
  const auto ids = test::random_ids(3 * 5, 64, 1);
  EXPECT_ERROR_HAS(model_test::model_loss(fp8, m, ids, ids, 3, 5, true), "multiple of 16");
}

}  // namespace
}  // namespace pt
