// The optimizer update deferred under the next forward on the GPU (--update-overlap,
// optim/deferred_update.h): on its low-priority side stream, chunk by chunk, ordered only by
// events. The losses and parameters of ten steps are those of the plain update bit for bit in
// fp32, bf16 and bf16 gradients, with gradient accumulation, AdamW and SGD; a forward that read
// a chunk before its update finished, or a zero_grad that cleared a gradient the update still
// reads, changes them. A CUDA graph refuses the deferred update.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include "common/test_util.h"
#include "core/error.h"
#include "gpu/ten_steps_gpu.h"
#include "model/transformer.h"
#include "optim/deferred_update.h"
#include "parallel/grad_sync.h"
#include "train/train_step.h"

namespace pt {
namespace {

struct TrainedRun {
  test::TenSteps steps;
  size_t chunks = 0;
  int reserved_sms = -1;  // the context's GEMM reservation after the final host copy, the optimizer still alive
};

// Ten steps (test::run_ten_steps) with the plain update or the deferred one in small chunks:
// many events, each layer's parameters over several of them.
TrainedRun train(Context& ctx, const TransformerConfig& cfg, OptimizerKind kind, bool deferred, int micro) {
  TransformerLM m(cfg, ctx);
  m.init_weights(ctx, 7);
  OptimizerConfig oc;
  oc.kind = kind;
  oc.adamw.weight_decay = 0.1f;
  TrainedRun r;
  std::unique_ptr<Optimizer> opt;
  std::function<void()> delay_update;
  if (deferred) {
    auto d = std::make_unique<DeferredUpdateOptimizer>(oc, ctx, m.store(), 8192);
    r.chunks = d->chunks();
    // Each recorded update starts 2 ms late on its stream (a host function holds the stream):
    // a read that did not wait for its chunk would find the old parameters, whatever the
    // host's lead over the GPU.
    delay_update = [stream = d->side_stream()] {
      PT_CUDA_CHECK(cudaLaunchHostFunc(
          stream, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }, nullptr));
    };
    opt = std::move(d);
  } else {
    opt = make_optimizer(oc, ctx, contiguous_ranges(trainable_params(m.store())));
  }
  parallel::NoSync sync;
  TrainStep step(m, *opt, sync, /*max_grad_norm=*/0.0f);
  r.steps = test::run_ten_steps(ctx, cfg, m, step, micro, delay_update);
  r.reserved_sms = ctx.reserved_sms();
  return r;
}

TEST(DeferredUpdateGpu, TrainsAsThePlainUpdateBitForBit) {
  PT_REQUIRE_GPU();
  // vocab 256 ≥ 2·B·T: every batch's ids are distinct. d_model 256 and 4 layers: the update of
  // each chunk lasts long enough that an unordered read would see it half done.
  const TransformerConfig cfg = test::test_transformer(256, 32, 256, 4, 4, 688, AttentionImpl::Flash);
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::SGD})
    for (const test::Numerics& n : test::kStepNumerics)
      for (int micro : {1, 2}) {
        if (kind == OptimizerKind::SGD && (n.precision != Precision::BF16 || n.grads != DType::BF16)) continue;
        Context gpu(Device::cuda(0), n.precision);
        n.apply(gpu);
        const TrainedRun plain = train(gpu, cfg, kind, false, micro), deferred = train(gpu, cfg, kind, true, micro);
        const std::string what =
            std::string(optimizer_kind_name(kind)) + " " + n.name() + " micro " + std::to_string(micro);
        EXPECT_GE(deferred.chunks, 20u) << what;
        test::expect_same_ten_steps(plain.steps, deferred.steps, what);
      }
}

// --update-sms: GEMMs keep off a quarter of the SMs while the update runs under the forward. They
// may take other cuBLAS algorithms than with every SM, so the run is held to the plain update's
// parameters to rounding, and to itself bit for bit; the SMs go back to GEMMs once the forward has
// waited for the update (the final host copy waits for every chunk).
TEST(DeferredUpdateGpu, SmsKeptForTheUpdateGoBackToGemms) {
  PT_REQUIRE_GPU();
  const TransformerConfig cfg = test::test_transformer(256, 32, 256, 4, 4, 688, AttentionImpl::Flash);
  Context gpu(Device::cuda(0), Precision::BF16);
  gpu.set_grad_dtype(DType::BF16);
  const TrainedRun plain = train(gpu, cfg, OptimizerKind::AdamW, false, 1);
  gpu.set_update_sms(gpu.sm_count() / 4);
  const TrainedRun a = train(gpu, cfg, OptimizerKind::AdamW, true, 1);
  EXPECT_EQ(a.reserved_sms, 0) << "the update's SMs went back to GEMMs";
  const TrainedRun b = train(gpu, cfg, OptimizerKind::AdamW, true, 1);
  test::expect_same_ten_steps(a.steps, b.steps, "--update-sms, run twice");
  ASSERT_EQ(plain.steps.params.size(), a.steps.params.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.steps.params.size(); ++i) {
    const double d = static_cast<double>(a.steps.params[i]) - plain.steps.params[i];
    diff += d * d;
    norm += static_cast<double>(plain.steps.params[i]) * plain.steps.params[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-3) << "parameters against the plain update's";
  EXPECT_NEAR(a.steps.losses.back(), plain.steps.losses.back(), 1e-2 * std::fabs(plain.steps.losses.back()));
}

// The reservation's span: none while the update is only recorded, from its launch (the first
// read of a parameter) until the compute stream has waited for every chunk, then none again.
TEST(DeferredUpdateGpu, KeepsSmsFromGemmsUntilTheForwardHasWaitedForTheUpdate) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::BF16);
  gpu.set_update_sms(8);
  TransformerLM m(test::test_transformer(256, 32, 256, 4, 4, 688, AttentionImpl::Flash), gpu);
  DeferredUpdateOptimizer opt(OptimizerConfig{}, gpu, m.store(), 8192);
  ASSERT_GE(opt.chunks(), 2u);
  opt.step(gpu, 1e-3f);
  EXPECT_EQ(gpu.reserved_sms(), 0) << "recorded, not launched";
  opt.before_read(*m.store().params().front());  // the first chunk's parameters: the update launches
  EXPECT_EQ(gpu.reserved_sms(), 8) << "launched, later chunks not yet waited for";
  opt.finish();
  EXPECT_EQ(gpu.reserved_sms(), 0) << "every chunk waited for";
}

TEST(DeferredUpdateGpu, CudaGraphRefusesIt) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  TransformerLM m(test::test_transformer(64, 16, 32, 1, 2, 64), gpu);
  DeferredUpdateOptimizer opt(OptimizerConfig{}, gpu, m.store());
  parallel::NoSync sync;
  TrainStep step(m, opt, sync, 1.0f);
  EXPECT_NE(test::error_of([&] { step.enable_cuda_graph(gpu); }).find("--update-overlap"), std::string::npos);
}

}  // namespace
}  // namespace pt
