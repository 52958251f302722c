#pragma once
// Shared pieces of the toy-model training tests: data, one training step, parameter reads.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "common/test_util.h"
#include "model/toy_models.h"
#include "ops/loss.h"
#include "optim/optimizer.h"

namespace pt::test {

// A batch of rows of the toy data set (inputs (N, 10), targets (N, 5)), host-side.
struct ToyBatch {
  std::vector<double> x, y;
  int64_t rows = 0;
};

// `rows` rows of a fixed random data set, in the order `perm` (a permutation of rows).
inline ToyBatch toy_rows(const std::vector<int>& perm, int64_t begin, int64_t count, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(perm.size());
  const auto x = randn(n * ToyNet::kIn, seed), y = randn(n * ToyNet::kOut, seed + 1);
  ToyBatch b;
  b.rows = count;
  for (int64_t i = begin; i < begin + count; ++i) {
    const int src = perm[i];
    b.x.insert(b.x.end(), x.begin() + src * ToyNet::kIn, x.begin() + (src + 1) * ToyNet::kIn);
    b.y.insert(b.y.end(), y.begin() + src * ToyNet::kOut, y.begin() + (src + 1) * ToyNet::kOut);
  }
  return b;
}

// The data reshuffled for step `step` (same permutation on every rank).
inline std::vector<int> shuffled(int n, int step) {
  std::vector<int> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(4242 + step);
  // Fisher–Yates with our own draws: std::shuffle's algorithm is implementation-defined.
  for (int i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng() % static_cast<uint64_t>(i + 1)]);
  return perm;
}

// forward, loss (mean or sum of squared errors), backward: gradients land in the store.
inline void toy_forward_backward(Context& ctx, ToyNet& model, const ToyBatch& b, ops::Reduction red) {
  Tensor x = make_tensor(ctx, {b.rows, ToyNet::kIn}, DType::F32, b.x);
  Tensor y = make_tensor(ctx, {b.rows, ToyNet::kOut}, DType::F32, b.y);
  Tensor pred = model.forward(ctx, x);
  Tensor loss = Tensor::empty({1}, DType::F32, ctx.device(), "loss");
  Tensor dpred = Tensor::empty(pred.shape(), DType::F32, ctx.device(), "dpred");
  ops::mse_loss(ctx, loss, &dpred, pred, y, red);
  model.backward(ctx, dpred);
}

inline std::vector<double> params_f64(Context& ctx, const ParamStore& store) {
  const auto f = store.params_to_host(ctx);
  return std::vector<double>(f.begin(), f.end());
}

// The values of the frozen parameters, in registration order.
inline std::vector<double> frozen_values(Context& ctx, const ParamStore& store) {
  const auto all = params_f64(ctx, store);
  std::vector<double> out;
  for (const auto& p : store.params())
    if (!p->trainable) out.insert(out.end(), all.begin() + p->offset, all.begin() + p->offset + p->numel);
  return out;
}

inline std::unique_ptr<Optimizer> plain_optimizer(const OptimizerConfig& cfg, Context& ctx, ParamStore& store) {
  return make_optimizer(cfg, ctx, contiguous_ranges(trainable_params(store)));
}

}  // namespace pt::test
