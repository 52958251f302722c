// What a Linear under FP8 reuses between its forward and its backward (model/fp8_linear.h), shown
// by breaking the contract the reuse rests on: the weight changed after forward, or an input
// restored that is not forward's. With reuse (Context::fp8_reuse) the backward casts with
// forward's amax, so the change shows as saturated values; without, it measures afresh. The two
// results differ exactly when the reuse is live, and agree when the contract holds.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "model/layers.h"
#include "model/param_store.h"

namespace pt::test {
namespace {

struct Grads {
  std::vector<double> dx, dw;
};

// One FP8 Linear (16 → 32), forward on x, then (between forward and backward) the weight scaled
// by `w_scale` and the input restored scaled by `x_scale`; dx and dW of a fixed dy.
Grads linear_grads(bool reuse, float w_scale, float x_scale) {
  Context ctx(Device::cpu());
  ctx.set_fp8_linear(true);
  ctx.set_fp8_reuse(reuse);
  ParamStore store;
  Linear lin(store, "lin", 16, 32);
  lin.set_fp8(true);
  store.finalize(ctx, false);
  std::vector<float> w(16 * 32);
  const std::vector<double> wv = randn(int64_t(w.size()), 1);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(wv[i]);
  store.params_from_host(ctx, w);
  const std::vector<double> xv = randn(16 * 16, 2), dyv = randn(16 * 32, 3);
  Tensor x = make_tensor(ctx, {16, 16}, DType::F32, xv);
  Tensor dy = make_tensor(ctx, {16, 32}, DType::F32, dyv);
  store.zero_grad(ctx);
  lin.forward(ctx, x);
  for (float& v : w) v *= w_scale;
  store.params_from_host(ctx, w);
  std::vector<double> xs = xv;
  for (double& v : xs) v *= x_scale;
  lin.drop_input();
  lin.restore_input(make_tensor(ctx, {16, 16}, DType::F32, xs));
  Grads g;
  g.dx = lin.backward(ctx, dy).to_host_f64(ctx);
  g.dw = store.flat_grads().to_host_f64(ctx);
  return g;
}

TEST(Fp8Linear, BackwardCastsWithForwardsAmaxes) {
  const Grads same_on = linear_grads(true, 1.0f, 1.0f), same_off = linear_grads(false, 1.0f, 1.0f);
  EXPECT_EQ(same_on.dx, same_off.dx) << "the contract holds: reuse gives fresh casts' bits";
  EXPECT_EQ(same_on.dw, same_off.dw);
  // The weight four times larger after forward: dX's cast of W takes forward's amax (reuse) and
  // saturates, or measures the new one.
  const Grads w_on = linear_grads(true, 4.0f, 1.0f), w_off = linear_grads(false, 4.0f, 1.0f);
  EXPECT_NE(w_on.dx, w_off.dx) << "dX's weight cast reuses forward's amax";
  EXPECT_EQ(w_on.dw, w_off.dw) << "dW does not read the weight";
  // The restored input four times forward's: dW's cast of x takes forward's amax (reuse).
  const Grads x_on = linear_grads(true, 1.0f, 4.0f), x_off = linear_grads(false, 1.0f, 4.0f);
  EXPECT_NE(x_on.dw, x_off.dw) << "dW's input cast reuses forward's amax";
  EXPECT_EQ(x_on.dx, x_off.dx) << "dX does not read the input";
}

// FP8 weight runs (ParamStore::add_fp8_weight): a stacked Linear registers one run, a
// BatchedLinear one per weight; the runs are numbered in offset order after finalize whatever the
// order the layers registered them (the update casts the runs that end in each range it updates,
// found by that order), misfits are refused, and without a mirror (the CPU) nothing is kept.
TEST(Fp8WeightRuns, StackedAndBatchedWeightsInOffsetOrder) {
  Context ctx(Device::cpu());
  ctx.set_fp8_linear(true);
  ParamStore store;
  Parameter& q = store.add("q", {8, 16});
  Parameter& k = store.add("k", {8, 16});
  Parameter& w1 = store.add("w1", {32, 16});
  Parameter& w2 = store.add("w2", {16, 32});
  Parameter& w3 = store.add("w3", {32, 16});
  Parameter& odd = store.add("odd", {4, 8});
  store.add("gap", {2, 8});
  Parameter& odd2 = store.add("odd2", {4, 8});
  Linear qk(store, {&q, &k}, nullptr, /*split=*/false);
  BatchedLinear w13(store, {&w1, &w3});
  Linear w2_lin(store, {&w2}, nullptr, false);
  w13.set_fp8(true);  // registered before w2, as the Transformer's block does
  w2_lin.set_fp8(true);
  qk.set_fp8(true);
  EXPECT_ERROR_HAS(store.add_fp8_weight({&q}), "'q'", "in a run already");
  EXPECT_ERROR_HAS(store.add_fp8_weight({&odd, &odd2}), "'odd2'", "adjacent");
  EXPECT_EQ(odd.fp8_run, -1) << "a refused run leaves its first parameter out";
  store.finalize(ctx, /*lowp_mirror=*/false);
  EXPECT_ERROR_HAS(store.add_fp8_weight({&odd}), "after finalize");
  EXPECT_EQ(q.fp8_run, k.fp8_run) << "stacked: one run";
  EXPECT_LT(k.fp8_run, w1.fp8_run);
  EXPECT_LT(w1.fp8_run, w2.fp8_run) << "w2 lies between w1 and w3";
  EXPECT_LT(w2.fp8_run, w3.fp8_run);
  EXPECT_EQ(odd.fp8_run, -1);
  EXPECT_FALSE(store.keeps_fp8_weights()) << "no mirror: the layers cast at each use";
  EXPECT_EQ(store.fp8_weight(q), nullptr);
}

}  // namespace
}  // namespace pt::test
