// Data-parallel Transformer training equals single-process training with the same global
// batch: 10 sequential SGD steps in fp32, for every strategy and both sharding modes; with
// gradients sent in bf16 (--grad-comm bf16), to bf16's rounding. In FP8 (GPU FP8 GEMMs, or the
// CPU's emulation of them), data parallelism averages what each rank's own FP8 backward makes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "common/test_util.h"
#include "core/error.h"
#include "core/fp8.h"
#include "model/transformer.h"
#include "optim/sharded_optimizer.h"
#include "parallel/dist_util.h"
#include "parallel/grad_sync.h"
#include "parallel/strategies.h"
#include "train/data_parallel.h"
#include "train/train_step.h"

namespace pt::test {
namespace {

struct TfCase {
  parallel::Backend backend;
  std::string ddp;
  double bucket_mb;
  ShardMode shard;
  std::string label;
  int comm_sms = 0;  // NCCL: collectives capped at this many CTAs, GEMMs kept off as many SMs
  parallel::GradComm grad_comm = parallel::GradComm::FP32;
};

void PrintTo(const TfCase& c, std::ostream* os) { *os << parallel::backend_name(c.backend) << " " << c.label; }

std::string tf_case_name(const ::testing::TestParamInfo<TfCase>& info) { return info.param.label; }

TransformerConfig tiny() { return test::test_transformer(97, 16, 32, 2, 4, 64); }

class TransformerDdpTest : public ::testing::TestWithParam<TfCase> {
 protected:
  static constexpr int kGlobalBatch = 4, kSeq = 16;
  void SetUp() override {
    PT_REQUIRE_BACKEND(GetParam().backend);
    ASSERT_GE(world(), 2) << "run the dist suite under mpiexec -n 2 (or more)";
    if (kGlobalBatch % world() != 0) GTEST_SKIP() << "global batch 4 does not split over " << world() << " ranks";
  }
  Context& ctx() { return backend_context(GetParam().backend); }
  parallel::Communicator& comm() { return backend_comm(GetParam().backend, GetParam().comm_sms); }
  int rank() const { return parallel::Runtime::get().rank(); }
  int world() const { return parallel::Runtime::get().world_size(); }
  static OptimizerConfig sgd() {
    OptimizerConfig o;
    o.kind = OptimizerKind::SGD;
    return o;
  }
  // The case's strategy over model, stepping with opt_cfg.
  auto data_parallel(TransformerLM& model, const OptimizerConfig& opt_cfg) {
    const TfCase& c = GetParam();
    return make_data_parallel(ctx(), model.store(), &comm(), parallel::strategy(c.ddp), c.bucket_mb, c.shard, opt_cfg,
                              c.grad_comm);
  }
};

TEST_P(TransformerDdpTest, TwoRanksEqualOneRankOverTenSteps) {
  const auto& c = GetParam();
  const TransformerConfig cfg = tiny();
  TransformerLM model(cfg, ctx());
  model.init_weights(ctx(), 11 + rank());  // different starts: the strategy must broadcast
  TransformerLM reference(cfg, ctx());
  reference.init_weights(ctx(), 11);

  const OptimizerConfig opt_cfg = sgd();
  auto dp = data_parallel(model, opt_cfg);
  // fp32 sums in another order agree to rounding; bf16 gradients carry 8 significant bits
  // (after 10 steps the parameters differ by up to 2.5e-4, the updates by 0.2 %).
  const bool bf16 = c.grad_comm == parallel::GradComm::BF16;
  const double loss_rtol = bf16 ? 1e-4 : 1e-5, param_rtol = bf16 ? 1e-3 : 1e-5, param_atol = bf16 ? 1e-3 : 1e-6,
               update_rtol = bf16 ? 1e-2 : 1e-4;
  auto ref_opt = make_optimizer(opt_cfg, ctx(), contiguous_ranges(trainable_params(reference.store())));
  const auto start = reference.store().params_to_host(ctx());
  ASSERT_EQ(model.store().params_to_host(ctx()), start) << "rank 0's weights after construction";

  const int local = kGlobalBatch / world();
  for (int step = 0; step < 10; ++step) {
    const auto ids = random_ids(kGlobalBatch * kSeq, static_cast<int32_t>(cfg.vocab_size), 500 + step);
    const auto tgt = random_ids(kGlobalBatch * kSeq, static_cast<int32_t>(cfg.vocab_size), 900 + step);
    const auto mine = [&](const std::vector<int32_t>& all) {
      return std::vector<int32_t>(all.begin() + rank() * local * kSeq, all.begin() + (rank() + 1) * local * kSeq);
    };

    reference.store().zero_grad(ctx());
    Tensor ref_loss = reference.forward(ctx(), make_ids(ctx(), {kGlobalBatch, kSeq}, ids),
                                        make_ids(ctx(), {kGlobalBatch, kSeq}, tgt));
    reference.backward(ctx());
    ref_opt->step(ctx(), 0.5f);

    model.store().zero_grad(ctx());
    dp.sync->begin_step(ctx());
    Tensor loss =
        model.forward(ctx(), make_ids(ctx(), {local, kSeq}, mine(ids)), make_ids(ctx(), {local, kSeq}, mine(tgt)));
    model.backward(ctx());
    // An overlapped strategy on a capped communicator keeps GEMMs off its SMs from its first
    // collective until finish(); nothing else reserves any.
    const bool overlapped = parallel::strategy(c.ddp).overlapped;
    EXPECT_EQ(ctx().reserved_sms(), overlapped && ctx().is_cuda() ? c.comm_sms : 0) << "step " << step;
    dp.sync->finish(ctx());
    EXPECT_EQ(ctx().reserved_sms(), 0) << "step " << step;
    dp.optimizer->step(ctx(), 0.5f);

    // The mean of the ranks' losses is the full batch's loss.
    const auto losses = mpi_all_gather(loss.to_host_f64(ctx())[0]);
    double mean = 0;
    for (double v : losses) mean += v / world();
    EXPECT_NEAR(mean, ref_loss.to_host_f64(ctx())[0], loss_rtol * std::abs(mean)) << "step " << step;
    const auto got = model.store().params_to_host(ctx());
    const auto want = reference.store().params_to_host(ctx());
    const std::vector<double> g(got.begin(), got.end()), w(want.begin(), want.end());
    PT_EXPECT_ALLCLOSE(g, w, param_rtol, param_atol) << "step " << step;
    // The updates themselves (small next to the weights) agree too.
    std::vector<double> dg(g.size()), dw(w.size());
    for (size_t i = 0; i < g.size(); ++i) dg[i] = g[i] - start[i], dw[i] = w[i] - start[i];
    EXPECT_LE(rel_error(dg, dw), update_rtol) << "step " << step;
  }
}

// Gradient accumulation over ranks (--grad-accum): each rank runs its share of the step's rows
// as 2 micro-batches through TrainStep, the strategy synchronising only in the last one; the
// updates equal one process's over the whole batch of 2 × kGlobalBatch rows.
TEST_P(TransformerDdpTest, AccumulatedMicroBatchesOverRanksEqualOneBatch) {
  const auto& c = GetParam();
  if (c.grad_comm == parallel::GradComm::BF16) GTEST_SKIP() << "fp32 gradients only";
  constexpr int kMicro = 2;
  const TransformerConfig cfg = tiny();
  TransformerLM model(cfg, ctx());
  model.init_weights(ctx(), 11);
  TransformerLM reference(cfg, ctx());
  reference.init_weights(ctx(), 11);
  const OptimizerConfig opt_cfg = sgd();
  auto dp = data_parallel(model, opt_cfg);
  auto ref_opt = make_optimizer(opt_cfg, ctx(), contiguous_ranges(trainable_params(reference.store())));
  parallel::NoSync no_sync;
  TrainStep step(model, *dp.optimizer, *dp.sync, 0.0f), ref_step(reference, *ref_opt, no_sync, 0.0f);
  const auto start = reference.store().params_to_host(ctx());
  const int rows = kMicro * kGlobalBatch, local = rows / world();
  for (int s = 0; s < 4; ++s) {
    const auto ids = random_ids(rows * kSeq, static_cast<int32_t>(cfg.vocab_size), 700 + s);
    const auto tgt = random_ids(rows * kSeq, static_cast<int32_t>(cfg.vocab_size), 800 + s);
    const auto mine = [&](const std::vector<int32_t>& all) {
      return std::vector<int32_t>(all.begin() + rank() * local * kSeq, all.begin() + (rank() + 1) * local * kSeq);
    };
    const StepOutputs ref =
        ref_step.run(ctx(), make_ids(ctx(), {rows, kSeq}, ids), make_ids(ctx(), {rows, kSeq}, tgt), 0.5f);
    const StepOutputs out = step.run(ctx(), make_ids(ctx(), {local, kSeq}, mine(ids)),
                                     make_ids(ctx(), {local, kSeq}, mine(tgt)), 0.5f, kMicro);
    const auto losses = mpi_all_gather(out.loss.to_host_f64(ctx())[0]);
    double mean = 0;
    for (double v : losses) mean += v / world();
    EXPECT_NEAR(mean, ref.loss.to_host_f64(ctx())[0], 1e-5 * std::abs(mean)) << "step " << s;
    // The averaged gradients (the whole buffer holds them without sharding) to 1e-6; the
    // updates to 2e-6, as fp32 weights of size ~1 round them to about 1e-6 of their size here.
    if (c.shard == ShardMode::None)
      EXPECT_LE(
          rel_error(model.store().flat_grads().to_host_f64(ctx()), reference.store().flat_grads().to_host_f64(ctx())),
          1e-6)
          << "step " << s;
    const auto got = model.store().params_to_host(ctx()), want = reference.store().params_to_host(ctx());
    std::vector<double> dg(got.size()), dw(want.size());
    for (size_t i = 0; i < got.size(); ++i) dg[i] = got[i] - start[i], dw[i] = want[i] - start[i];
    EXPECT_LE(rel_error(dg, dw), 2e-6) << "step " << s;
  }
}

// --precision fp8 changes only the GEMM inputs (per-tensor scales from each rank's own rows, so
// two ranks do not compute one process's FP8 step over the whole batch): every rank also runs a
// copy of the model without a strategy on its own rows, whose gradients are averaged over the ranks
// with raw MPI in fp64 and stepped by a plain optimizer. After each of five SGD steps the strategy's
// weights and loss equal that copy's (with two ranks the fp32 average is exact; more ranks sum in
// another order, hence the bounds). The GPU runs its FP8 GEMMs; the CPU the emulation they are checked
// against (Context::set_fp8_linear).
TEST_P(TransformerDdpTest, Fp8AveragesEachRanksFp8Gradients) {
  const auto& c = GetParam();
  if (c.grad_comm == parallel::GradComm::BF16 || c.comm_sms != 0) GTEST_SKIP() << "fp32 gradients, default SMs";
  Context& cx = ctx();
  if (cx.is_cuda() && !fp8_unsupported_reason(cx.target()).empty()) GTEST_SKIP() << "no FP8 tensor cores";
  // FP8 on the backend's shared context (its communicator is bound to it); the CPU keeps fp32.
  const PrecisionScope fp8(cx, cx.is_cuda() ? Precision::FP8 : cx.precision(), /*fp8_linear=*/true);
  const TransformerConfig cfg = test::test_transformer(97, 32, 64, 2, 4, 176);  // FP8 widths: multiples of 16
  TransformerLM model(cfg, cx), local(cfg, cx);
  model.init_weights(cx, 11);
  local.init_weights(cx, 11);
  const OptimizerConfig opt_cfg = sgd();
  auto dp = data_parallel(model, opt_cfg);
  auto local_opt = make_optimizer(opt_cfg, cx, contiguous_ranges(trainable_params(local.store())));
  const int rows = kGlobalBatch / world(), seq = 32;
  for (int step = 0; step < 5; ++step) {
    const auto all_ids = random_ids(kGlobalBatch * seq, static_cast<int32_t>(cfg.vocab_size), 300 + step);
    const auto all_tgt = random_ids(kGlobalBatch * seq, static_cast<int32_t>(cfg.vocab_size), 400 + step);
    const auto mine = [&](const std::vector<int32_t>& all) {
      return make_ids(cx, {rows, seq},
                      std::vector<int32_t>(all.begin() + rank() * rows * seq, all.begin() + (rank() + 1) * rows * seq));
    };
    const Tensor ids = mine(all_ids), tgt = mine(all_tgt);  // this rank's rows, for both models
    local.store().zero_grad(cx);
    const double local_loss = local.forward(cx, ids, tgt).to_host_f64(cx)[0];
    local.backward(cx);
    std::vector<double> g = local.store().flat_grads().to_host_f64(cx);
    PT_MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, g.data(), static_cast<int>(g.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (double& v : g) v /= world();
    local.store().flat_grads().copy_from(device_f32(cx, g), cx);
    local_opt->step(cx, 0.5f);

    model.store().zero_grad(cx);
    dp.sync->begin_step(cx);
    const double loss = model.forward(cx, ids, tgt).to_host_f64(cx)[0];
    model.backward(cx);
    dp.sync->finish(cx);
    dp.optimizer->step(cx, 0.5f);

    const auto got = model.store().params_to_host(cx), want = local.store().params_to_host(cx);
    const std::vector<double> gd(got.begin(), got.end()), wd(want.begin(), want.end());
    if (world() == 2) {
      EXPECT_EQ(loss, local_loss) << "step " << step << ": the same weights and rows";
      EXPECT_EQ(gd, wd) << "step " << step;
    } else {
      EXPECT_NEAR(loss, local_loss, 1e-6 * std::abs(local_loss)) << "step " << step;
      PT_EXPECT_ALLCLOSE(gd, wd, 1e-6, 1e-7) << "step " << step;
    }
  }
}

std::vector<TfCase> tf_cases(parallel::Backend b) {
  return {{b, "naive", 0, ShardMode::None, "naive"},
          {b, "flat", 0, ShardMode::None, "flat"},
          {b, "overlap", 0, ShardMode::None, "overlap"},
          {b, "bucketed", 0.01, ShardMode::None, "bucketed"},
          {b, "bucketed", parallel::kDefaultBucketMB, ShardMode::Broadcast, "shard_broadcast"},
          {b, "flat", 0, ShardMode::Zero1, "shard_zero1_flat"},
          {b, "bucketed", 0.01, ShardMode::Zero1, "shard_zero1_bucketed"}};
}
INSTANTIATE_TEST_SUITE_P(Mpi, TransformerDdpTest, ::testing::ValuesIn(tf_cases(parallel::Backend::MPI)), tf_case_name);
INSTANTIATE_TEST_SUITE_P(Nccl, TransformerDdpTest, ::testing::ValuesIn(tf_cases(parallel::Backend::NCCL)),
                         tf_case_name);

// --comm-sms: the same training on collectives capped at 8 CTAs, with GEMMs kept off 8 SMs
// while they are in flight.
std::vector<TfCase> comm_sms_cases() {
  const auto b = parallel::Backend::NCCL;
  return {{b, "overlap", 0, ShardMode::None, "overlap_comm_sms8", 8},
          {b, "bucketed", 0.01, ShardMode::None, "bucketed_comm_sms8", 8},
          {b, "flat", 0, ShardMode::None, "flat_comm_sms8", 8},
          {b, "bucketed", 0.01, ShardMode::Zero1, "shard_zero1_bucketed_comm_sms8", 8}};
}
INSTANTIATE_TEST_SUITE_P(NcclCommSms, TransformerDdpTest, ::testing::ValuesIn(comm_sms_cases()), tf_case_name);

// --grad-comm bf16 under every gradient schedule: all-reduces overlapped with backward, broadcast
// sharding, ZeRO-1's reduce-scatter and its bucketed reduces (on NCCL with capped CTAs too).
std::vector<TfCase> bf16_cases(parallel::Backend b, int comm_sms) {
  const auto bf16 = parallel::GradComm::BF16;
  const std::string sms = comm_sms ? "_comm_sms" + std::to_string(comm_sms) : "";
  return {
      {b, "overlap", 0, ShardMode::None, "overlap_bf16" + sms, comm_sms, bf16},
      {b, "bucketed", 0.01, ShardMode::None, "bucketed_bf16" + sms, comm_sms, bf16},
      {b, "flat", 0, ShardMode::None, "flat_bf16" + sms, comm_sms, bf16},
      {b, "bucketed", parallel::kDefaultBucketMB, ShardMode::Broadcast, "shard_broadcast_bf16" + sms, comm_sms, bf16},
      {b, "flat", 0, ShardMode::Zero1, "shard_zero1_flat_bf16" + sms, comm_sms, bf16},
      {b, "bucketed", 0.01, ShardMode::Zero1, "shard_zero1_bucketed_bf16" + sms, comm_sms, bf16}};
}
INSTANTIATE_TEST_SUITE_P(MpiBf16, TransformerDdpTest, ::testing::ValuesIn(bf16_cases(parallel::Backend::MPI, 0)),
                         tf_case_name);
INSTANTIATE_TEST_SUITE_P(NcclBf16, TransformerDdpTest, ::testing::ValuesIn(bf16_cases(parallel::Backend::NCCL, 8)),
                         tf_case_name);

}  // namespace
}  // namespace pt::test
