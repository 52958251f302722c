// Sharded optimizers equal the unsharded optimizer: both toy models, the same data on every
// rank, AdamW(lr 0.1, weight decay 0.1), 10 steps of a summed squared error; parameters equal
// to rtol 1e-7 on every rank, frozen parameters untouched (the course's sharding tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/test_util.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "model/transformer.h"
#include "optim/optimizer_state.h"
#include "optim/sharded_optimizer.h"
#include "parallel/dist_util.h"
#include "parallel/host_collectives.h"
#include "toy_training.h"
#include "train/data_parallel.h"

namespace pt::test {
namespace {

struct ShardCase {
  parallel::Backend backend;
  std::string model;
  ShardMode mode;
  std::string ddp;  // the gradient schedule under it
  OptimizerKind kind;
};

void PrintTo(const ShardCase& c, std::ostream* os) {
  *os << parallel::backend_name(c.backend) << " " << c.model << " " << shard_mode_name(c.mode) << " " << c.ddp << " "
      << (c.kind == OptimizerKind::AdamW ? "adamw" : "sgd");
}

std::string shard_case_name(const ::testing::TestParamInfo<ShardCase>& info) {
  return info.param.model + "_" + shard_mode_name(info.param.mode) + "_" + info.param.ddp +
         (info.param.kind == OptimizerKind::AdamW ? "_adamw" : "_sgd");
}

OptimizerConfig config(OptimizerKind kind) {
  OptimizerConfig cfg;
  cfg.kind = kind;
  cfg.adamw.lr = 0.1f;
  cfg.adamw.weight_decay = 0.1f;
  cfg.sgd_weight_decay = 0.1f;
  return cfg;
}

// The comparisons to 1e-7 rely on the average of identical gradients being exact, which in
// fp32 holds when the world size is a power of two ((g + g)/2 = g, but (g + g + g)/3 may not).
#define PT_REQUIRE_EXACT_AVERAGE(world)                                                                              \
  do {                                                                                                               \
    if (((world) & ((world)-1)) != 0) GTEST_SKIP() << "averaging over " << (world) << " ranks is not exact in fp32"; \
  } while (0)

class ShardedTest : public ::testing::TestWithParam<ShardCase> {
 protected:
  void SetUp() override {
    PT_REQUIRE_BACKEND(GetParam().backend);
    ASSERT_GE(world(), 2) << "run the dist suite under mpiexec -n 2 (or more)";
    PT_REQUIRE_EXACT_AVERAGE(world());
  }
  Context& ctx() { return backend_context(GetParam().backend); }
  parallel::Communicator& comm() { return backend_comm(GetParam().backend); }
  int rank() const { return parallel::Runtime::get().rank(); }
  int world() const { return parallel::Runtime::get().world_size(); }

  // The case's data-parallel model (its sync with buckets of bucket_mb, its sharded optimizer)
  // and the unsharded reference, both initialised from `seed`.
  struct Runs {
    std::unique_ptr<ToyNet> model, reference;
    OptimizerConfig cfg;
    DataParallel dp;
    std::unique_ptr<Optimizer> ref_opt;
  };
  Runs runs(uint64_t seed, double bucket_mb) {
    const ShardCase& c = GetParam();
    Runs r;
    r.model = make_toy_model(c.model, ctx());
    r.reference = make_toy_model(c.model, ctx());
    r.model->init_weights(ctx(), seed);
    r.reference->init_weights(ctx(), seed);
    r.cfg = config(c.kind);
    r.dp = make_data_parallel(ctx(), r.model->store(), &comm(), parallel::strategy(c.ddp), bucket_mb, c.mode, r.cfg);
    r.ref_opt = plain_optimizer(r.cfg, ctx(), r.reference->store());
    return r;
  }
  void train_and_compare(Runs& r, int steps, float clip, double rtol, double atol) {
    train_and_compare(*r.model, *r.dp.sync, *r.dp.optimizer, *r.reference, *r.ref_opt, steps, clip, rtol, atol);
  }

  // Trains `model` with (sync, opt) and `reference` with ref_opt on identical batches and
  // compares after every step. clip > 0 clips both by the global gradient norm first.
  void train_and_compare(ToyNet& model, parallel::GradSync& sync, Optimizer& opt, ToyNet& reference, Optimizer& ref_opt,
                         int steps, float clip, double rtol, double atol) {
    // AdamW at the course's lr 0.1; SGD on a summed loss needs a small one to stay finite.
    const float lr = GetParam().kind == OptimizerKind::AdamW ? 0.1f : 1e-3f;
    const auto frozen = frozen_values(ctx(), reference.store());
    for (int step = 0; step < steps; ++step) {
      const auto perm = shuffled(16, step);
      const auto batch = toy_rows(perm, 0, 16, 31 + step);  // the same on every rank

      reference.store().zero_grad(ctx());
      toy_forward_backward(ctx(), reference, batch, ops::Reduction::Sum);
      if (clip > 0) ref_opt.clip_grad_norm(ctx(), clip);
      ref_opt.step(ctx(), lr);

      model.store().zero_grad(ctx());
      sync.begin_step(ctx());
      toy_forward_backward(ctx(), model, batch, ops::Reduction::Sum);
      sync.finish(ctx());
      if (clip > 0) opt.clip_grad_norm(ctx(), clip);
      opt.step(ctx(), lr);

      PT_EXPECT_ALLCLOSE(params_f64(ctx(), model.store()), params_f64(ctx(), reference.store()), rtol, atol)
          << "step " << step;
      EXPECT_EQ(frozen_values(ctx(), model.store()), frozen) << "frozen parameters moved";
    }
  }
};

TEST_P(ShardedTest, EqualsUnshardedOptimizer) {
  Runs r = runs(5, 0.0025);
  train_and_compare(r, 10, 0, 1e-7, 0);
  // State lives only for this rank's part.
  EXPECT_LT(r.dp.optimizer->state_bytes(), r.ref_opt->state_bytes() + (GetParam().kind == OptimizerKind::SGD ? 1 : 0));
}

TEST_P(ShardedTest, GlobalNormClippingEqualsUnsharded) {
  Runs r = runs(6, 0);
  // Clipping is active (the gradient norm of the summed loss is far above 0.5); the norm is
  // summed in another order, so agreement is to rounding, not bitwise.
  train_and_compare(r, 4, 0.5f, 1e-5, 1e-6);
}

// A checkpoint holds the whole optimizer state, gathered from every rank's shard: it equals the
// unsharded optimizer's, and a fresh sharded optimizer that loads it (each rank reading its
// shard) goes on exactly as the original state would.
TEST_P(ShardedTest, CheckpointHoldsTheWholeStateAndResumesIt) {
  const auto& c = GetParam();
  Runs r = runs(7, 0.0025);
  train_and_compare(r, 3, 0, 1e-7, 0);
  auto& [model, reference, cfg, dp, ref_opt] = r;

  const int64_t n = model->store().grad_numel();
  const WholeOptimizerState whole = gather_optimizer_state(*dp.optimizer, ctx(), n, /*replicated=*/false);
  const WholeOptimizerState expected = gather_optimizer_state(*ref_opt, ctx(), n, /*replicated=*/true);
  EXPECT_EQ(whole.steps, 3);
  if (rank() == 0) {
    ASSERT_EQ(whole.tensors.size(), c.kind == OptimizerKind::AdamW ? 2u : 0u);
    ASSERT_EQ(whole.tensors.size(), expected.tensors.size());
    for (size_t k = 0; k < whole.tensors.size(); ++k) {
      EXPECT_EQ(whole.tensors[k].kind, expected.tensors[k].kind);
      const auto* a = reinterpret_cast<const float*>(whole.data(whole.tensors[k]));
      const auto* b = reinterpret_cast<const float*>(expected.data(expected.tensors[k]));
      PT_EXPECT_ALLCLOSE(std::vector<double>(a, a + n), std::vector<double>(b, b + n), 1e-7, 0)
          << whole.tensors[k].kind;
    }
  }
  // Rank 0 writes the checkpoint where every rank can read it.
  const std::string path = parallel::all_gather_strings(scratch_dir("sharded_ckpt") + "/ck.h5")[0];
  if (rank() == 0) io::save_checkpoint(path, model->store(), ctx(), &cfg, &whole, io::CheckpointInfo{});
  ASSERT_TRUE(mpi_all_true(true));  // a barrier
  auto resumed = make_toy_model(c.model, ctx());
  resumed->init_weights(ctx(), 99);
  auto dp2 = make_data_parallel(ctx(), resumed->store(), &comm(), parallel::strategy(c.ddp), 0.0025, c.mode, cfg);
  io::load_weights(path, resumed->store(), ctx());
  io::load_optimizer_state(path, *dp2.optimizer, ctx(), n);
  EXPECT_EQ(dp2.optimizer->steps_taken(), 3);
  train_and_compare(*resumed, *dp2.sync, *dp2.optimizer, *reference, *ref_opt, 3, 0, 1e-7, 0);
}

std::vector<ShardCase> shard_cases(parallel::Backend b) {
  std::vector<ShardCase> out;
  const std::vector<std::pair<ShardMode, std::string>> modes = {
      {ShardMode::Broadcast, "flat"}, {ShardMode::Zero1, "flat"}, {ShardMode::Zero1, "bucketed"}};
  for (const std::string model : {"toy", "toy_tied"})
    for (const auto& [mode, ddp] : modes)
      for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::SGD}) out.push_back({b, model, mode, ddp, kind});
  return out;
}
INSTANTIATE_TEST_SUITE_P(Mpi, ShardedTest, ::testing::ValuesIn(shard_cases(parallel::Backend::MPI)), shard_case_name);
INSTANTIATE_TEST_SUITE_P(Nccl, ShardedTest, ::testing::ValuesIn(shard_cases(parallel::Backend::NCCL)), shard_case_name);

class ShardedDetailTest : public BackendTest {};

// Parameter groups added after construction are assigned and trained like the rest.
TEST_P(ShardedDetailTest, BroadcastAddsParameterGroupsAfterConstruction) {
  PT_REQUIRE_EXACT_AVERAGE(world());
  auto model = make_toy_model("toy", ctx());
  auto reference = make_toy_model("toy", ctx());
  model->init_weights(ctx(), 8);
  reference->init_weights(ctx(), 8);
  const auto cfg = config(OptimizerKind::AdamW);
  auto sync = parallel::make_grad_sync(parallel::strategy("overlap"), ctx(), model->store(), &comm());
  auto units = per_parameter_ranges(trainable_params(model->store()));
  ASSERT_EQ(units.size(), 3u);
  BroadcastShardedOptimizer opt(cfg, ctx(), comm(), {units[0]});
  opt.add_ranges({units[1], units[2]});
  int64_t total = 0, largest = 0;
  for (const auto& u : units) total += u.param.numel(), largest = std::max(largest, u.param.numel());
  const auto& load = opt.elements_per_rank();
  EXPECT_EQ(std::accumulate(load.begin(), load.end(), int64_t{0}), total);
  EXPECT_LE(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()), largest);
  auto ref_opt = plain_optimizer(cfg, ctx(), reference->store());

  for (int step = 0; step < 10; ++step) {
    const auto batch = toy_rows(shuffled(16, step), 0, 16, 77 + step);
    reference->store().zero_grad(ctx());
    toy_forward_backward(ctx(), *reference, batch, ops::Reduction::Sum);
    ref_opt->step(ctx(), 0.1f);
    model->store().zero_grad(ctx());
    sync->begin_step(ctx());
    toy_forward_backward(ctx(), *model, batch, ops::Reduction::Sum);
    sync->finish(ctx());
    opt.step(ctx(), 0.1f);
    PT_EXPECT_ALLCLOSE(params_f64(ctx(), model->store()), params_f64(ctx(), reference->store()), 1e-7, 0)
        << "step " << step;
  }
}

// ZeRO-1 keeps state for exactly its part of the gradient buffer (about 1/world of it).
TEST_P(ShardedDetailTest, Zero1StateIsThisRanksPart) {
  auto model = make_toy_model("toy_tied", ctx());
  model->init_weights(ctx(), 9);
  const auto cfg = config(OptimizerKind::AdamW);
  auto dp = make_data_parallel(ctx(), model->store(), &comm(), parallel::strategy("flat"), 25, ShardMode::Zero1, cfg);
  auto full = plain_optimizer(cfg, ctx(), model->store());
  // Optimizers may allocate their state at the first step: take one with zero gradients.
  model->store().zero_grad(ctx());
  dp.sync->finish(ctx());
  dp.optimizer->step(ctx(), 0.0f);
  full->step(ctx(), 0.0f);
  const auto& layout = dynamic_cast<const Zero1Optimizer&>(*dp.optimizer).layout();
  const double share = double(layout.owned_numel(rank())) / double(layout.numel);
  EXPECT_GT(full->state_bytes(), 0);
  EXPECT_DOUBLE_EQ(double(dp.optimizer->state_bytes()) / double(full->state_bytes()), share);
  EXPECT_THROW(dp.optimizer->add_ranges({}), Error);
}

// --grad-comm reaches the gradient sync of every sharding mode (the broadcast mode's too): a
// step sends bf16 gradients (half the fp32 bytes), and with 2 ranks, where every schedule's bf16
// sums are the same values, every mode ends with the parameters of the unsharded one.
TEST_P(ShardedDetailTest, GradCommReachesEveryShardingMode) {
  const auto cfg = config(OptimizerKind::AdamW);
  for (const std::string ddp : {"flat", "bucketed"}) {
    std::vector<double> unsharded;
    for (ShardMode mode : {ShardMode::None, ShardMode::Broadcast, ShardMode::Zero1}) {
      SCOPED_TRACE(std::string(shard_mode_name(mode)) + " " + ddp);
      auto model = make_toy_model("toy_tied", ctx());
      model->init_weights(ctx(), 12);
      auto dp = make_data_parallel(ctx(), model->store(), &comm(), parallel::strategy(ddp), 0.0025, mode, cfg,
                                   parallel::GradComm::BF16);
      model->store().zero_grad(ctx());
      dp.sync->begin_step(ctx());
      toy_forward_backward(ctx(), *model, toy_rows(shuffled(16 * world(), 0), rank() * 16, 16, 5),
                           ops::Reduction::Mean);
      dp.sync->finish(ctx());
      dp.optimizer->step(ctx(), 0.1f);
      EXPECT_EQ(dp.sync->bytes_communicated(), model->store().grad_numel() * 2);
      const auto p = params_f64(ctx(), model->store());
      EXPECT_TRUE(mpi_all_true(p == mpi_bcast_from_root(p))) << "ranks disagree";
      if (mode == ShardMode::None)
        unsharded = p;
      else if (world() == 2)
        PT_EXPECT_ALLCLOSE(p, unsharded, 1e-7, 0);
    }
  }
}

// With a bf16 mirror ZeRO-1 gathers the mirror, not the fp32 master. The tiny Transformer's
// RMSNorm weights are read in fp32 by every rank: after each step every rank holds their owner's
// updated values, bit for bit, with no whole-buffer read in between; the gathered mirror is the
// bf16 rounding of the fp32 parameters. Losses and parameters follow unsharded bucketed training
// (SGD: the two schedules' averages may differ in the last bit, which AdamW's normalisation
// would amplify on near-zero gradients; a flipped bf16 rounding stays within the tolerances).
TEST_P(ShardedDetailTest, Zero1GathersTheBf16MirrorAndEqualsUnshardedTraining) {
  if (!ctx().is_cuda()) GTEST_SKIP() << "a bf16 parameter mirror exists on CUDA only";
  PT_REQUIRE_EXACT_AVERAGE(world());
  const PrecisionScope bf16(ctx(), Precision::BF16);
  const TransformerConfig tcfg = test_transformer(97, 16, 32, 2, 4, 64);
  auto cfg = config(OptimizerKind::SGD);
  constexpr int kRows = 2, kSeq = 16;
  std::vector<std::vector<double>> losses(2), master(2), mirror(2);
  for (ShardMode mode : {ShardMode::None, ShardMode::Zero1}) {
    SCOPED_TRACE(shard_mode_name(mode));
    const size_t m = mode == ShardMode::None ? 0 : 1;
    TransformerLM model(tcfg, ctx());
    ASSERT_TRUE(model.store().has_lowp());
    model.init_weights(ctx(), 21);
    auto dp = make_data_parallel(ctx(), model.store(), &comm(), parallel::strategy("bucketed"), 0.002, mode, cfg);
    if (mode == ShardMode::Zero1) EXPECT_TRUE(dynamic_cast<const Zero1Optimizer&>(*dp.optimizer).gathers_mirror());
    for (int step = 0; step < 4; ++step) {
      const uint64_t seed = 700 + 10 * uint64_t(step) + uint64_t(rank());  // each rank its own rows
      const auto ids = random_ids(kRows * kSeq, int32_t(tcfg.vocab_size), seed);
      const auto tgt = random_ids(kRows * kSeq, int32_t(tcfg.vocab_size), seed + 5);
      model.store().zero_grad(ctx());
      dp.sync->begin_step(ctx());
      Tensor loss = model.forward(ctx(), make_ids(ctx(), {kRows, kSeq}, ids), make_ids(ctx(), {kRows, kSeq}, tgt));
      model.backward(ctx());
      dp.sync->finish(ctx());
      dp.optimizer->step(ctx(), 0.01f);
      losses[m].push_back(loss.to_host_f64(ctx())[0]);
      int read_in_fp32 = 0;
      for (const auto& p : model.store().params()) {
        if (!p->reads_master) continue;
        ++read_in_fp32;
        const auto v = p->data().to_host_f64(ctx());  // the parameter alone: no whole-buffer read
        EXPECT_TRUE(mpi_all_true(v == mpi_bcast_from_root(v))) << p->name << " differs between ranks, step " << step;
      }
      EXPECT_EQ(read_in_fp32, 2 * tcfg.num_layers + 1) << "two norms a block and the final one";
    }
    master[m] = params_f64(ctx(), model.store());  // a whole-buffer read: gathers the fp32 master
    mirror[m] = model.store().flat_lowp().to_host_f64(ctx());
    EXPECT_TRUE(mpi_all_true(master[m] == mpi_bcast_from_root(master[m]))) << "ranks' parameters disagree";
    EXPECT_TRUE(mpi_all_true(mirror[m] == mpi_bcast_from_root(mirror[m]))) << "ranks' mirrors disagree";
    for (size_t i = 0; i < master[m].size(); ++i)
      ASSERT_EQ(mirror[m][i], double(round_to_bf16(float(master[m][i])))) << "element " << i;
  }
  // Losses of a bf16 forward: a weight whose bf16 rounding flipped moves the tiny model's loss by
  // up to 2.2e-4 relative (seen on 2 x H200); a stale weight by far more.
  PT_EXPECT_ALLCLOSE(losses[1], losses[0], 1e-3, 0);
  PT_EXPECT_ALLCLOSE(master[1], master[0], 1e-3, 1e-5);
  PT_EXPECT_ALLCLOSE(mirror[1], mirror[0], 1e-2, 1e-4);
}

// --zero1-prefetch: step() leaves the all-gathers of every bucket in flight and the next forward
// waits for them as it reads (the tied toy model: no frozen parameter in between, so gathers run
// in place); the parameters are those of waiting at the end of each step, bit for bit.
TEST_P(ShardedDetailTest, Zero1PrefetchedGathersGiveTheParametersOfWaitingAtTheStepEnd) {
  const auto cfg = config(OptimizerKind::AdamW);
  std::vector<std::vector<double>> per_mode;
  for (bool prefetch : {false, true}) {
    SCOPED_TRACE(prefetch ? "prefetch on" : "prefetch off");
    auto model = make_toy_model("toy_tied", ctx());
    model->init_weights(ctx(), 13);
    auto dp = make_data_parallel(ctx(), model->store(), &comm(), parallel::strategy("bucketed"), 0.0008,
                                 ShardMode::Zero1, cfg, parallel::GradComm::FP32, prefetch);
    const auto& opt = dynamic_cast<const Zero1Optimizer&>(*dp.optimizer);
    ASSERT_GT(opt.layout().buckets.size(), 2u) << "several buckets, so the forward waits for them in turn";
    EXPECT_EQ(opt.prefetches(), prefetch);
    // Nothing reads the whole buffer between steps: each forward finds the gathers in flight.
    for (int step = 0; step < 5; ++step) {
      model->store().zero_grad(ctx());
      dp.sync->begin_step(ctx());
      toy_forward_backward(ctx(), *model, toy_rows(shuffled(16 * world(), step), rank() * 16, 16, 40 + step),
                           ops::Reduction::Mean);
      EXPECT_FALSE(dp.optimizer->parameters_in_flight()) << "the forward read, so waited for, every bucket";
      dp.sync->finish(ctx());
      dp.optimizer->step(ctx(), 0.1f);
      EXPECT_EQ(dp.optimizer->parameters_in_flight(), prefetch) << "step " << step;
    }
    const auto p = params_f64(ctx(), model->store());  // a whole-buffer read: waits for the rest
    EXPECT_FALSE(dp.optimizer->parameters_in_flight());
    EXPECT_TRUE(mpi_all_true(p == mpi_bcast_from_root(p))) << "ranks disagree";
    per_mode.push_back(p);
  }
  EXPECT_EQ(per_mode[0], per_mode[1]);
}

TEST_P(ShardedDetailTest, ContradictoryConfigurationsAreRejected) {
  auto model = make_toy_model("toy", ctx());
  const auto cfg = config(OptimizerKind::AdamW);
  EXPECT_THROW(
      make_data_parallel(ctx(), model->store(), &comm(), parallel::strategy("none"), 25, ShardMode::Zero1, cfg), Error);
  EXPECT_THROW(
      make_data_parallel(ctx(), model->store(), nullptr, parallel::strategy("flat"), 25, ShardMode::Broadcast, cfg),
      Error);
  EXPECT_THROW(shard_mode_from_name("zero3"), Error);
}

PT_INSTANTIATE_BACKENDS(ShardedDetailTest);

}  // namespace
}  // namespace pt::test

namespace pt::test {
namespace {

// ZeRO-1 on hand-built stores whose gradient buffer does not divide by the world size (a tail
// for the last rank), with frozen parameters in between (packed gather) and without (in
// place): one SGD step gives p − lr·mean over ranks of the gradients, everywhere.
class Zero1LayoutTest : public BackendTest {
 protected:
  void check_layout(const std::vector<std::pair<Shape, bool>>& specs) {
    // One bucket; and per-parameter buckets, their ends moved up to multiples of the world size.
    check_layout(specs, "flat");
    check_layout(specs, "overlap");
  }
  void check_layout(const std::vector<std::pair<Shape, bool>>& specs, const std::string& ddp) {
    SCOPED_TRACE(ddp);
    ParamStore store;
    for (size_t i = 0; i < specs.size(); ++i) store.add("p" + std::to_string(i), specs[i].first, specs[i].second);
    for (const auto& p : store.params()) store.add_use(*p);
    store.finalize(ctx(), false);
    const int64_t n = store.numel(), g = store.grad_numel();
    ASSERT_NE(g % world(), 0) << "the layout must leave a tail";
    const auto p0 = randn(n, 3);  // the same start everywhere
    const auto f32 = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    store.params_from_host(ctx(), f32(p0));

    OptimizerConfig cfg;
    cfg.kind = OptimizerKind::SGD;
    auto dp = make_data_parallel(ctx(), store, &comm(), parallel::strategy(ddp), 25, ShardMode::Zero1, cfg);
    store.zero_grad(ctx());
    const auto mine = f32(randn(g, 70 + rank()));
    copy_bytes(ctx(), store.flat_grads().data(), store.device().kind, mine.data(), DeviceKind::CPU, mine.size() * 4);
    dp.sync->finish(ctx());
    dp.optimizer->step(ctx(), 0.5f);

    std::vector<double> want(p0.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<float>(p0[i]);
    for (const auto& p : store.params()) {
      if (!p->trainable) continue;
      for (int64_t k = 0; k < p->numel; ++k) {
        double mean = 0;
        for (int r = 0; r < world(); ++r) mean += static_cast<float>(randn(g, 70 + r)[p->grad_offset + k]);
        want[p->offset + k] -= 0.5 * mean / world();
      }
    }
    PT_EXPECT_ALLCLOSE(params_f64(ctx(), store), want, 1e-6, 1e-7);
  }
};

TEST_P(Zero1LayoutTest, FrozenInBetweenAndATail) {
  check_layout({{{7, 3}, true}, {{4}, false}, {{33}, true}, {{2}, false}, {{5}, true}});
}
TEST_P(Zero1LayoutTest, ContiguousTrainableAndATail) {
  check_layout({{{3}, false}, {{7, 3}, true}, {{33}, true}, {{5}, true}});
}

PT_INSTANTIATE_BACKENDS(Zero1LayoutTest);

}  // namespace
}  // namespace pt::test
