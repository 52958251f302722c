#pragma once
// Ten training steps whose losses and parameters two runs must reproduce bit for bit (the CUDA
// graph's and the deferred update's GPU tests): the learning rate changes every step (it
// reaches a captured step through device memory), and the batch is a permutation of distinct
// token ids, so each embedding row gets at most one gradient contribution (its atomics add
// once) and, with B·T ≤ 64 rows a micro-batch, RMSNorm's weight gradient is one row slice:
// nothing depends on the order of atomics. Run the TrainStep without clipping (the global norm
// is summed with atomics: measured, never applied).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/transformer.h"
#include "train/train_step.h"

namespace pt::test {

struct TenSteps {
  std::vector<float> losses;  // as the device holds them: compared bit for bit
  std::vector<float> params;  // after the tenth step (a host copy: any deferred work finished)
};

// B = 2·micro rows of T = 32 tokens, the same batch each step (so the loss must fall).
// `after_step`, when given, runs on the host after each step is enqueued.
inline TenSteps run_ten_steps(Context& ctx, const TransformerConfig& cfg, TransformerLM& m, TrainStep& step, int micro,
                              const std::function<void()>& after_step = {}) {
  const int64_t B = 2 * micro, T = 32;
  TenSteps r;
  std::vector<int32_t> perm(static_cast<size_t>(cfg.vocab_size));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(100));
  const std::vector<int32_t> ids(perm.begin(), perm.begin() + B * T), tg(perm.rbegin(), perm.rbegin() + B * T);
  for (int s = 0; s < 10; ++s) {
    StepOutputs o = step.run(ctx, make_ids(ctx, {B, T}, ids), make_ids(ctx, {B, T}, tg),
                             1e-3f * (1.0f + 0.1f * static_cast<float>(s)), micro);
    if (after_step) after_step();
    std::vector<float> loss(1);
    copy_bytes(ctx, loss.data(), DeviceKind::CPU, o.loss.data(), DeviceKind::CUDA, sizeof(float));
    r.losses.push_back(loss[0]);
  }
  r.params = m.store().params_to_host(ctx);
  return r;
}

// The step's numerics the bit-for-bit tests run under: precision, weight-gradient type
// (--grad-dtype) and residual-stream type (--residual-dtype).
struct Numerics {
  Precision precision;
  DType grads, residual;
  void apply(Context& ctx) const {
    ctx.set_grad_dtype(grads);
    ctx.set_residual_dtype(residual);
  }
  std::string name() const {
    return std::string(precision_name(precision)) + " grads " + dtype_name(grads) + " stream " + dtype_name(residual);
  }
};
inline const Numerics kStepNumerics[] = {{Precision::FP32, DType::F32, DType::F32},
                                         {Precision::BF16, DType::F32, DType::F32},
                                         {Precision::BF16, DType::BF16, DType::F32},
                                         {Precision::BF16, DType::BF16, DType::BF16}};

// The same losses and parameters, bit for bit, and a falling loss.
inline void expect_same_ten_steps(const TenSteps& a, const TenSteps& b, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (size_t s = 0; s < a.losses.size(); ++s)
    EXPECT_EQ(std::memcmp(&a.losses[s], &b.losses[s], sizeof(float)), 0)
        << what << " step " << s << ": " << a.losses[s] << " vs " << b.losses[s];
  EXPECT_TRUE(a.params == b.params) << what << ": parameters differ";
  EXPECT_LT(b.losses.back(), b.losses.front()) << what << ": the loss falls";
}

}  // namespace pt::test
