// Data-parallel training of the toy models equals single-process training: 5 SGD steps
// (lr 0.1) on mean squared error, global batch 20 split over the ranks, data reshuffled each
// step, for every strategy and bucket size (the course's DDP tests).
#include <gtest/gtest.h>

#include "dist/dist_util.h"
#include "dist/grad_sync.h"
#include "toy_training.h"

namespace pt::test {
namespace {

struct DdpCase {
  dist::Backend backend;
  std::string model;  // toy | toy_tied
  std::string ddp;
  double bucket_mb;
  std::string label;
};

void PrintTo(const DdpCase& c, std::ostream* os) { *os << dist::backend_name(c.backend) << " " << c.model << " " << c.ddp << " bucket_mb " << c.bucket_mb; }


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
  dist::Communicator& comm() { return backend_comm(GetParam().backend); }
  int rank() const { return dist::Runtime::get().rank(); }
  int world() const { return dist::Runtime::get().world_size(); }
};

TEST_P(ToyDdpTest, MatchesSingleProcessTrainingAfterEveryStep) {
  const auto& c = GetParam();
  auto model = make_toy_model(c.model, ctx());
  model->init_weights(ctx(), 100 + rank());  // ranks start different
  auto reference = make_toy_model(c.model, ctx());
  reference->init_weights(ctx(), 100);  // rank 0's start, trained on the whole batch alone
  const auto frozen = frozen_values(ctx(), reference->store());

  auto sync = dist::make_grad_sync(c.ddp, ctx(), model->store(), &comm(), c.bucket_mb);
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
    PT_EXPECT_ALLCLOSE(got, params_f64(ctx(), reference->store()), 1e-5, 1e-7) << "step " << step;
    EXPECT_EQ(frozen_values(ctx(), model->store()), frozen) << "frozen parameters moved";
    EXPECT_TRUE(mpi_all_true(got == mpi_bcast_from_root(got))) << "ranks diverged at step " << step;
  }
}

std::vector<DdpCase> ddp_cases(dist::Backend b) {
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
INSTANTIATE_TEST_SUITE_P(Mpi, ToyDdpTest, ::testing::ValuesIn(ddp_cases(dist::Backend::MPI)), ddp_case_name);
INSTANTIATE_TEST_SUITE_P(Nccl, ToyDdpTest, ::testing::ValuesIn(ddp_cases(dist::Backend::NCCL)), ddp_case_name);

// The three caps really give one bucket per tensor, mixed buckets, and a single bucket.
TEST(ToyBuckets, CapsGivePerTensorMixedAndSingleBuckets) {
  Context ctx(Device::cpu());
  for (const std::string name : {"toy", "toy_tied"}) {
    auto m = make_toy_model(name, ctx);
    const size_t trainable = trainable_params(m->store()).size();
    EXPECT_EQ(dist::plan_buckets(m->store(), kPerTensor).size(), trainable) << name;
    const auto mixed = dist::plan_buckets(m->store(), kMixed);
    EXPECT_GT(mixed.size(), 1u) << name;
    EXPECT_LT(mixed.size(), trainable) << name;
    EXPECT_EQ(dist::plan_buckets(m->store(), kSingle).size(), 1u) << name;
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
