// Data-parallel training of the toy models equals single-process training: 5 SGD steps
// (lr 0.1) on mean squared error, global batch 20 split over the ranks, data reshuffled each
// step, for every strategy and bucket size (the course's DDP tests); with gradients sent in
// bf16 (--grad-comm bf16) it stays within bf16's rounding of it.
#include <gtest/gtest.h>

#include <functional>

#include "parallel/dist_util.h"
#include "parallel/grad_sync.h"
#include "parallel/strategies.h"
#include "toy_training.h"

namespace pt::test {
namespace {

struct DdpCase {
  parallel::Backend backend;
  std::string model;  // toy | toy_tied
  std::string ddp;
  double bucket_mb;
  std::string label;
};

void PrintTo(const DdpCase& c, std::ostream* os) {
  *os << parallel::backend_name(c.backend) << " " << c.model << " " << c.ddp << " bucket_mb " << c.bucket_mb;
}

std::string ddp_case_name(const ::testing::TestParamInfo<DdpCase>& info) {
  return info.param.model + "_" + info.param.ddp + info.param.label;
}

// Bucket caps. Gradient bytes in reverse registration order: toy fc3 1000, fc2 2000, fc1 400;
// toy_tied fc5 1000, fc3 2000, fc2 2000, fc1 400. 0.0025 MiB = 2621 bytes groups fc2 with fc1
// and leaves the others alone: mixed buckets (checked by ToyBuckets below).
constexpr double kPerTensor = 0, kMixed = 0.0025, kSingle = 1000;

class ToyDdpTest : public ::testing::TestWithParam<DdpCase> {
 protected:
  void SetUp() override {
    PT_REQUIRE_BACKEND(GetParam().backend);
    ASSERT_GE(world(), 2) << "run the dist suite under mpiexec -n 2 (or more)";
    if (kGlobalBatch % world() != 0) GTEST_SKIP() << "global batch 20 does not split over " << world() << " ranks";
  }
  static constexpr int kGlobalBatch = 20;
  Context& ctx() { return backend_context(GetParam().backend); }
  parallel::Communicator& comm() { return backend_comm(GetParam().backend); }
  int rank() const { return parallel::Runtime::get().rank(); }
  int world() const { return parallel::Runtime::get().world_size(); }

  // Trains the case's model data-parallel (ranks starting from different weights, gradients on
  // the wire as `wire`) and, alone on the whole batch, rank 0's start; after every step hands
  // check() both models' parameters (and the common start). Frozen parameters must not move,
  // nor the ranks drift apart.
  using Check = std::function<void(int step, const std::vector<double>& got, const std::vector<double>& want,
                                   const std::vector<double>& start)>;
  void train_and_compare(parallel::GradComm wire, const Check& check) {
    const auto& c = GetParam();
    auto model = make_toy_model(c.model, ctx());
    model->init_weights(ctx(), 100 + rank());  // ranks start different
    auto reference = make_toy_model(c.model, ctx());
    reference->init_weights(ctx(), 100);  // rank 0's start, trained on the whole batch alone
    const auto frozen = frozen_values(ctx(), reference->store());

    auto sync = parallel::make_grad_sync(parallel::strategy(c.ddp), ctx(), model->store(), &comm(), c.bucket_mb, wire);
    const auto start = params_f64(ctx(), model->store());
    EXPECT_EQ(start, mpi_bcast_from_root(start)) << "every rank holds rank 0's weights";
    EXPECT_EQ(start, params_f64(ctx(), reference->store()));

    OptimizerConfig cfg;
    cfg.kind = OptimizerKind::SGD;
    auto opt = plain_optimizer(cfg, ctx(), model->store());
    auto ref_opt = plain_optimizer(cfg, ctx(), reference->store());
    const int local = kGlobalBatch / world();
    for (int step = 0; step < 5; ++step) {
      const auto perm = shuffled(kGlobalBatch, step);

      reference->store().zero_grad(ctx());
      toy_forward_backward(ctx(), *reference, toy_rows(perm, 0, kGlobalBatch, 7), ops::Reduction::Mean);
      ref_opt->step(ctx(), 0.1f);

      model->store().zero_grad(ctx());
      sync->begin_step(ctx());
      toy_forward_backward(ctx(), *model, toy_rows(perm, rank() * local, local, 7), ops::Reduction::Mean);
      sync->finish(ctx());
      opt->step(ctx(), 0.1f);

      const auto got = params_f64(ctx(), model->store());
      check(step, got, params_f64(ctx(), reference->store()), start);
      EXPECT_EQ(frozen_values(ctx(), model->store()), frozen) << "frozen parameters moved";
      EXPECT_TRUE(mpi_all_true(got == mpi_bcast_from_root(got))) << "ranks diverged at step " << step;
    }
  }
};

TEST_P(ToyDdpTest, MatchesSingleProcessTrainingAfterEveryStep) {
  train_and_compare(parallel::GradComm::FP32, [](int step, const auto& got, const auto& want, const auto&) {
    PT_EXPECT_ALLCLOSE(got, want, 1e-5, 1e-7) << "step " << step;
  });
}

// --grad-comm bf16: the same training, each averaged gradient carrying bf16's rounding (up to
// 2^-8 relative, three times): the updates stay within 1 % of single-process training's, and
// visibly not equal to them.
TEST_P(ToyDdpTest, Bf16WireStaysWithinBf16RoundingOfSingleProcessTraining) {
  train_and_compare(parallel::GradComm::BF16, [](int step, const auto& got, const auto& want, const auto& start) {
    std::vector<double> dg(got.size()), dw(want.size());
    for (size_t i = 0; i < got.size(); ++i) dg[i] = got[i] - start[i], dw[i] = want[i] - start[i];
    const double err = rel_error(dg, dw);
    EXPECT_LE(err, 1e-2) << "step " << step;
    EXPECT_GE(err, 1e-5) << "step " << step << ": no bf16 rounding to be seen (fp32 agrees to 1e-7)";
  });
}

std::vector<DdpCase> ddp_cases(parallel::Backend b) {
  std::vector<DdpCase> out;
  for (const std::string model : {"toy", "toy_tied"}) {
    out.push_back({b, model, "naive", 0, ""});
    out.push_back({b, model, "flat", 0, ""});
    out.push_back({b, model, "overlap", 0, ""});
    out.push_back({b, model, "bucketed", kPerTensor, "_per_tensor"});
    out.push_back({b, model, "bucketed", kMixed, "_mixed"});
    out.push_back({b, model, "bucketed", kSingle, "_single"});
  }
  return out;
}
INSTANTIATE_TEST_SUITE_P(Mpi, ToyDdpTest, ::testing::ValuesIn(ddp_cases(parallel::Backend::MPI)), ddp_case_name);
INSTANTIATE_TEST_SUITE_P(Nccl, ToyDdpTest, ::testing::ValuesIn(ddp_cases(parallel::Backend::NCCL)), ddp_case_name);

// The three caps really give one bucket per tensor, mixed buckets, and a single bucket.
TEST(ToyBuckets, CapsGivePerTensorMixedAndSingleBuckets) {
  Context ctx(Device::cpu());
  for (const std::string name : {"toy", "toy_tied"}) {
    auto m = make_toy_model(name, ctx);
    const size_t trainable = trainable_params(m->store()).size();
    EXPECT_EQ(parallel::plan_buckets(m->store(), kPerTensor).size(), trainable) << name;
    const auto mixed = parallel::plan_buckets(m->store(), kMixed);
    EXPECT_GT(mixed.size(), 1u) << name;
    EXPECT_LT(mixed.size(), trainable) << name;
    EXPECT_EQ(parallel::plan_buckets(m->store(), kSingle).size(), 1u) << name;
  }
}

TEST(ToyModels, ParameterLayout) {
  Context ctx(Device::cpu());
  auto toy = make_toy_model("toy", ctx);
  const ParamStore& s = toy->store();
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[2].name, "fc2.bias");
  EXPECT_FALSE(s[2].trainable);
  EXPECT_FALSE(s.find("no_grad_fixed_param")->trainable);
  EXPECT_EQ(s.grad_numel(), 100 + 500 + 250);
  EXPECT_EQ(frozen_values(ctx, s).back(), 2.0);
  auto tied = make_toy_model("toy_tied", ctx);
  EXPECT_EQ(tied->store().size(), 4u) << "fc4 reuses fc2's weight";
  EXPECT_EQ(tied->store().find("fc2.weight")->uses, 2);
}

}  // namespace
}  // namespace pt::test
