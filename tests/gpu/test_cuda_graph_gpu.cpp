// CUDA graphs (TrainStep::enable_cuda_graph, --cuda-graph on): the captured step gives the same
// losses and parameters as the uncaptured one, bit for bit, over ten steps, and gradient
// accumulation inside the graph too; the cross-entropy loss itself is the same bit for bit from
// run to run (its rows are summed in a fixed order), which such a comparison needs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "bench/model_bench.h"
#include "common/test_util.h"
#include "gpu/ten_steps_gpu.h"
#include "model/transformer.h"
#include "ops/loss.h"
#include "parallel/grad_sync.h"
#include "train/train_step.h"

namespace pt {
namespace {

struct GraphRun {
  test::TenSteps steps;
  bool captured = false;
};

// Ten AdamW steps (test::run_ten_steps), captured after two warm-up steps or not.
GraphRun train(Context& ctx, const TransformerConfig& cfg, bool graph, int micro) {
  TransformerLM m(cfg, ctx);
  m.init_weights(ctx, 7);
  OptimizerConfig oc;
  oc.adamw.lr = 1e-3f;
  auto opt = make_optimizer(oc, ctx, contiguous_ranges(trainable_params(m.store())));
  parallel::NoSync sync;
  TrainStep step(m, *opt, sync, /*max_grad_norm=*/0.0f);
  if (graph) step.enable_cuda_graph(ctx, 2);
  GraphRun r;
  r.steps = test::run_ten_steps(ctx, cfg, m, step, micro);
  r.captured = step.graph_captured();
  return r;
}

TEST(CudaGraphGpu, CapturedStepsEqualUncapturedBitForBit) {
  PT_REQUIRE_GPU();
  // fp32; bf16 with fp32 gradients; bf16 with bf16 gradients (--grad-dtype bf16: the embedding's
  // and RMSNorm's fp32 sums come from scratch allocated inside the captured step); and with the
  // residual stream in bf16 too (--residual-dtype bf16: the embedding reads the bf16 mirror).
  for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash})
    for (const test::Numerics& n : test::kStepNumerics)
      for (int micro : {1, 2}) {
        // vocab 256 > 2·B·T = 256 at most: every batch's ids are distinct
        const TransformerConfig cfg = test::test_transformer(256, 32, 64, 2, 4, 172, attn);
        Context gpu(Device::cuda(0), n.precision);
        n.apply(gpu);
        const GraphRun eager = train(gpu, cfg, false, micro), graph = train(gpu, cfg, true, micro);
        const std::string what = n.name() + " " + attention_impl_name(attn) + " micro " + std::to_string(micro);
        EXPECT_TRUE(graph.captured) << what;
        test::expect_same_ten_steps(eager.steps, graph.steps, what);
      }
}

// bench model, bf16 flash, the update not deferred (a graph cannot capture it), one configuration.
bench::ModelBenchOptions bench_options(const std::string& size, int64_t context, int64_t warmup) {
  bench::ModelBenchOptions opt;
  opt.sizes = {size};
  opt.contexts = {context};
  opt.precisions = {Precision::BF16};
  opt.attention = {"flash"};
  opt.warmups = {warmup};
  opt.update_overlap = UpdateOverlap::Off;
  return opt;
}

// bench model --cuda-graph on with --grad-accum N: the captured step runs N micro-batches of
// --batch-size rows, as the uncaptured bench step does. (Given the batch once, TrainStep would split
// it into N micro-batches of batch/N rows, and the step would be credited with N times the tokens it
// ran.) No step can beat the GPU's dense peak, so with 8
// micro-batches that error would show as an MFU far above 1; both records' MFU stay below it.
TEST(CudaGraphGpu, BenchModelCapturedStepRunsEveryMicroBatch) {
  PT_REQUIRE_GPU();
  bench::ModelBenchOptions opt = bench_options("small", 512, 2);
  opt.steps = 2;
  opt.batch_size = 4;
  opt.grad_accum = 8;
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "captured" : "uncaptured");
    opt.cuda_graph = graph;
    const auto r = bench::run_model_bench(opt, Device::cuda(0), nullptr);
    const io::ResultTable& t = r.timings;
    ASSERT_EQ(t.rows(), 1u);
    ASSERT_EQ(std::get<std::string>(t.at(0, t.column_index("status"))), "ok");
    const double mfu = std::get<double>(t.at(0, t.column_index("mfu")));
    if (std::isnan(mfu)) GTEST_SKIP() << "no dense peak known for this GPU";
    EXPECT_GT(mfu, 0.0);
    EXPECT_LT(mfu, 1.0);
  }
}

// bench model refuses a captured step that would be measured before it is replayed.
TEST(CudaGraphGpu, BenchModelNeedsTwoWarmUpStepsForAGraph) {
  PT_REQUIRE_GPU();
  bench::ModelBenchOptions opt = bench_options("tiny", 64, 1);
  opt.steps = 1;
  opt.cuda_graph = true;
  const std::string msg = test::error_of([&] { bench::run_model_bench(opt, Device::cuda(0), nullptr); });
  EXPECT_NE(msg.find("--warmup 2 or more"), std::string::npos) << (msg.empty() ? "accepted" : msg);
}

// Refused combinations name what cannot be captured.
TEST(CudaGraphGpu, RefusesDataParallelSyncs) {
  PT_REQUIRE_GPU();
  struct FakeSync : parallel::GradSync {
    void finish(Context&) override {}
    const char* name() const override { return "bucketed"; }
  } sync;
  Context gpu(Device::cuda(0));
  TransformerLM m(test::test_transformer(64, 16, 32, 1, 2, 64), gpu);
  auto opt = make_optimizer(OptimizerConfig{}, gpu, contiguous_ranges(trainable_params(m.store())));
  TrainStep step(m, *opt, sync, 1.0f);
  EXPECT_NE(test::error_of([&] { step.enable_cuda_graph(gpu); }).find("data parallelism"), std::string::npos);
}

// The loss of many rows, twice: the same bits (the rows' losses meet in a fixed order, not in
// atomics whose order varies from launch to launch).
TEST(CudaGraphGpu, CrossEntropyLossIsTheSameBitForBit) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  const int64_t N = 8192, V = 512;
  const Tensor logits = test::make_tensor(gpu, {N, V}, DType::F32, test::randn(N * V, 3));
  const Tensor targets = test::make_ids(gpu, {N}, test::random_ids(N, static_cast<int32_t>(V), 4));
  std::vector<float> seen;
  for (int i = 0; i < 20; ++i) {
    Tensor loss = Tensor::zeros({1}, DType::F32, gpu, "loss");
    ops::cross_entropy(gpu, loss, nullptr, logits, targets);
    float v = 0;
    copy_bytes(gpu, &v, DeviceKind::CPU, loss.data(), DeviceKind::CUDA, sizeof v);
    seen.push_back(v);
  }
  for (float v : seen) EXPECT_EQ(std::memcmp(&v, &seen[0], sizeof v), 0) << v << " vs " << seen[0];
}

}  // namespace
}  // namespace pt
