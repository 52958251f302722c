#pragma once
// The hand-built ParamStore the gradient-sync tests share (no model): parameters of several
// shapes, one frozen, one tied (two uses), one that never receives a gradient, and a fake
// backward that reports them in another order than registration.
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/param_store.h"

namespace pt::test::grad_sync_fixture {

// Registration order; the fake backward below fires them in another order.
struct Spec {
  const char* name;
  Shape shape;
  bool trainable;
  int uses;
};
inline const std::vector<Spec> kSpecs = {{"embed", {8, 4}, true, 1}, {"frozen_scale", {5}, false, 1},
                                         {"tied", {6, 3}, true, 2},  {"block.w", {40, 25}, true, 1},
                                         {"block.b", {25}, true, 1}, {"unused", {3}, true, 1},
                                         {"head", {7, 11}, true, 1}, {"const", {2}, false, 1}};
// A backward pass: the tied weight contributes twice; "unused" never does.
inline const std::vector<const char*> kBackwardOrder = {"head", "tied", "block.b", "block.w", "tied", "embed"};

inline std::unique_ptr<ParamStore> make_store(Context& ctx) {
  auto store = std::make_unique<ParamStore>();
  for (const auto& s : kSpecs) {
    Parameter& p = store->add(s.name, s.shape, s.trainable);
    for (int u = 0; u < s.uses; ++u) store->add_use(p);
  }
  store->finalize(ctx, false);
  return store;
}

inline std::vector<double> params_of(int rank, int64_t n) { return randn(n, 50 + rank); }
inline std::vector<double> grads_of(int rank, int step, int64_t n) { return randn(n, 1000 * step + rank); }

inline void set_flat(Context& ctx, const Tensor& flat, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  copy_bytes(ctx, flat.data(), flat.device().kind, f.data(), DeviceKind::CPU, f.size() * 4);
}

inline void fake_backward(ParamStore& store) {
  for (const char* name : kBackwardOrder) store.grad_contributed(*store.find(name));
}

}  // namespace pt::test::grad_sync_fixture
