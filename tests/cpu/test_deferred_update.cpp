// The optimizer update deferred under the next forward (--update-overlap, optim/deferred_update.h)
// on the CPU, where it runs in order at the first read: the same losses, parameters and moments
// as the plain update bit for bit, the update launched by whatever reads first (zero_grad, a
// forward, a host copy), the chunks, and which runs may defer.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "cpu/model_test_util.h"
#include "model/transformer.h"
#include "optim/deferred_update.h"
#include "optim/optimizer_state.h"
#include "optim/sharded_optimizer.h"
#include "parallel/grad_sync.h"
#include "train/data_parallel.h"
#include "train/train_step.h"

namespace pt {
namespace {

using model_test::tiny_config;

struct Trained {
  std::vector<double> losses, norms, params;
  WholeOptimizerState state;
};

// Four steps of the tiny model (the last two in two micro-batches), clipped hard enough that
// the clip folds into every update, with the plain optimizer or the deferred one in chunks of
// at least `min_chunk` elements (0: plain).
Trained train(OptimizerKind kind, int64_t min_chunk) {
  Context ctx(Device::cpu());
  const TransformerConfig cfg = tiny_config();
  TransformerLM m(cfg, ctx);
  m.init_weights(ctx, 5);
  OptimizerConfig oc;
  oc.kind = kind;
  oc.adamw.weight_decay = 0.1f;
  std::unique_ptr<Optimizer> opt;
  if (min_chunk > 0) {
    auto d = std::make_unique<DeferredUpdateOptimizer>(oc, ctx, m.store(), min_chunk);
    EXPECT_GE(d->chunks(), 4u) << "the test should cover several chunks";
    opt = std::move(d);
  } else {
    opt = make_optimizer(oc, ctx, contiguous_ranges(trainable_params(m.store())));
  }
  parallel::NoSync sync;
  TrainStep step(m, *opt, sync, 0.05f);
  Trained t;
  const int64_t B = 4, T = 6;
  for (int s = 0; s < 4; ++s) {
    const auto ids = test::random_ids(B * T, static_cast<int32_t>(cfg.vocab_size), 300 + s);
    const auto tgt = test::random_ids(B * T, static_cast<int32_t>(cfg.vocab_size), 400 + s);
    StepOutputs out =
        step.run(ctx, test::make_ids(ctx, {B, T}, ids), test::make_ids(ctx, {B, T}, tgt), 1e-2f, s < 2 ? 1 : 2);
    t.losses.push_back(out.loss.to_host_f64(ctx)[0]);
    t.norms.push_back(out.grad_sumsq.to_host_f64(ctx)[0]);
  }
  t.params = m.store().params_to_host_f64(ctx);
  t.state = gather_optimizer_state(*opt, ctx, m.store().grad_numel(), true);
  return t;
}

TEST(DeferredUpdate, TrainsAsThePlainUpdateBitForBit) {
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::SGD}) {
    SCOPED_TRACE(optimizer_kind_name(kind));
    const Trained plain = train(kind, 0), deferred = train(kind, 40);
    // Each loss is read by a forward that must see the update before it, each norm comes from
    // gradients that zero_grad must not clear under the update still reading them.
    EXPECT_EQ(deferred.losses, plain.losses);
    EXPECT_EQ(deferred.norms, plain.norms);
    EXPECT_GT(plain.norms.front(), 0.05 * 0.05) << "the clip should fold into the updates";
    EXPECT_EQ(deferred.params, plain.params);
    ASSERT_EQ(deferred.state.steps, 4);
    EXPECT_EQ(deferred.state.steps, plain.state.steps);
    ASSERT_EQ(deferred.state.bytes.size(), plain.state.bytes.size());
    EXPECT_EQ(std::memcmp(deferred.state.bytes.data(), plain.state.bytes.data(), plain.state.bytes.size()), 0);
  }
}

TEST(DeferredUpdate, RunsWhenTheParametersAreNextRead) {
  Context ctx(Device::cpu());
  TransformerLM m(tiny_config(), ctx);
  m.init_weights(ctx, 9);
  OptimizerConfig oc;
  DeferredUpdateOptimizer opt(oc, ctx, m.store(), 64);
  Tensor g = m.store().flat_grads(), p = m.store().flat_params();
  const Tensor ones = test::make_tensor(ctx, g.shape(), g.dtype(), std::vector<double>(g.numel(), 1.0));
  g.copy_from(ones, ctx);
  const Tensor start = test::make_tensor(ctx, p.shape(), p.dtype(), p.to_host_f64(ctx));
  const auto before = p.to_host_f64(ctx);  // the raw buffer: no read announced
  for (const char* reader : {"a module's read", "zero_grad", "a host copy", "the optimizer state"}) {
    SCOPED_TRACE(reader);
    opt.step(ctx, 1e-2f);
    EXPECT_TRUE(opt.update_pending());
    EXPECT_EQ(p.to_host_f64(ctx), before) << "nothing read yet: nothing updated";
    const std::string r = reader;
    if (r == "a module's read")
      m.store().about_to_read(*m.store().params().front());
    else if (r == "zero_grad")
      m.store().zero_grad(ctx);
    else if (r == "a host copy")
      m.store().params_to_host(ctx);
    else
      opt.state_pieces();
    EXPECT_FALSE(opt.update_pending());
    EXPECT_FALSE(opt.parameters_in_flight());
    EXPECT_NE(p.to_host_f64(ctx), before);
    p.copy_from(start, ctx);
    g.copy_from(ones, ctx);
  }
  EXPECT_EQ(opt.steps_taken(), 4);
}

TEST(DeferredUpdate, ChunksCutAtParameterBoundariesInBufferOrder) {
  Context ctx(Device::cpu());
  ParamStore store;
  for (int64_t n : {5, 3, 4, 10, 1, 2}) store.add("p" + std::to_string(n), {n});
  store.add("frozen", {7}, /*trainable=*/false);
  store.add("last", {3});
  store.finalize(ctx, false);
  const auto chunks = chunked_ranges(trainable_params(store), 6);
  // 5+3 = 8 ≥ 6 | 4+10 = 14 | 1+2+3 = 6 (the frozen parameter leaves its own gap).
  std::vector<int64_t> sizes, begins;
  for (const FlatRange& r : chunks) {
    sizes.push_back(r.param.numel());
    begins.push_back(r.grad_begin);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{8, 14, 3, 3}));
  EXPECT_EQ(begins, (std::vector<int64_t>{0, 8, 22, 25}));
  EXPECT_EQ(chunked_ranges(trainable_params(store), 1000).size(), 2u) << "one chunk but for the frozen gap";
}

TEST(DeferredUpdate, RunsOnlyWhereItCan) {
  EXPECT_TRUE(defers_update(UpdateOverlap::Auto, true, true, false));
  EXPECT_FALSE(defers_update(UpdateOverlap::Auto, false, true, false)) << "the CPU";
  EXPECT_FALSE(defers_update(UpdateOverlap::Auto, true, false, false)) << "--fused off";
  EXPECT_FALSE(defers_update(UpdateOverlap::Auto, true, true, true)) << "a CUDA graph";
  EXPECT_FALSE(defers_update(UpdateOverlap::Off, true, true, false));
  EXPECT_TRUE(defers_update(UpdateOverlap::On, true, true, false));
  EXPECT_NE(test::error_of([] { defers_update(UpdateOverlap::On, false, true, false); }).find("needs a GPU"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { defers_update(UpdateOverlap::On, true, false, false); }).find("--fused on"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { defers_update(UpdateOverlap::On, true, true, true); }).find("CUDA graph"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { update_overlap_from_name("sometimes"); }).find("--update-overlap"), std::string::npos);

  Context ctx(Device::cpu());
  TransformerLM m(tiny_config(), ctx);
  OptimizerConfig oc;
  auto opt = make_update_optimizer(oc, ctx, m.store(), UpdateOverlap::Auto, false);
  EXPECT_EQ(dynamic_cast<DeferredUpdateOptimizer*>(opt.get()), nullptr) << "auto on the CPU: the plain update";
  DeferredUpdateOptimizer first(oc, ctx, m.store());
  EXPECT_NE(test::error_of([&] { DeferredUpdateOptimizer second(oc, ctx, m.store()); }).find("read listener"),
            std::string::npos);
  // What train and bench model build through: on is refused for the sharded optimizers and on the CPU.
  TransformerLM third(tiny_config(), ctx);
  EXPECT_NE(test::error_of([&] {
              make_data_parallel(ctx, third.store(), nullptr, parallel::strategy("naive"), 25, ShardMode::Broadcast, oc,
                                 parallel::GradComm::FP32, true, UpdateOverlap::On);
            }).find("--update-overlap on cannot run with --shard-optimizer broadcast"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              make_data_parallel(ctx, third.store(), nullptr, parallel::strategy("none"), 25, ShardMode::None, oc,
                                 parallel::GradComm::FP32, true, UpdateOverlap::On);
            }).find("needs a GPU"),
            std::string::npos);
  oc.fused = false;
  TransformerLM other(tiny_config(), ctx);
  EXPECT_NE(test::error_of([&] { DeferredUpdateOptimizer unfused(oc, ctx, other.store()); }).find("--fused on"),
            std::string::npos);
}

}  // namespace
}  // namespace pt
