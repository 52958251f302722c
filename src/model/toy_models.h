#pragma once
// The toy models of the data-parallel tests (any module must work, not only the Transformer):
// small MLPs built from Linear and ReLU, with frozen parameters and a tied weight. fp32 only.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "model/layers.h"
#include "model/param_store.h"

namespace pt {

// A model with explicit forward/backward over a ParamStore it owns.
class ToyNet {
 public:
  virtual ~ToyNet() = default;
  ParamStore& store() { return store_; }
  // torch.nn.Linear's default init U(−1/sqrt(fan_in), 1/sqrt(fan_in)) for every Linear
  // parameter (host RNG: identical on CPU and GPU); other frozen parameters keep their values.
  virtual void init_weights(Context& ctx, uint64_t seed) = 0;
  // x (N, 10) fp32 → (N, 5) fp32; saves what backward needs.
  virtual Tensor forward(Context& ctx, const Tensor& x) = 0;
  // dout (N, 5) fp32: accumulates parameter gradients; the store's listener hears each one.
  virtual void backward(Context& ctx, const Tensor& dout) = 0;
  static constexpr int64_t kIn = 10, kOut = 5;

 protected:
  ParamStore store_;  // declared first: the layers register into it
};

// fc1 Linear(10→10, no bias), ReLU, fc2 Linear(10→50) with a frozen bias, ReLU,
// fc3 Linear(50→5, no bias); plus `no_grad_fixed_param`, a frozen 2-element parameter [2, 2].
class ToyModel : public ToyNet {
 public:
  explicit ToyModel(Context& ctx);
  void init_weights(Context& ctx, uint64_t seed) override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  void backward(Context& ctx, const Tensor& dout) override;

 private:
  Linear fc1_, fc2_, fc3_;
  Parameter* fixed_;
  Tensor h1_, h2_;  // ReLU outputs (N, 10), (N, 50)
};

// Five bias-free Linears 10→10→50→10→50→5 with ReLU between them; fc4 reuses fc2's weight
// (one Parameter, two uses: its gradient is final after fc2's backward).
class ToyModelWithTiedWeights : public ToyNet {
 public:
  explicit ToyModelWithTiedWeights(Context& ctx);
  void init_weights(Context& ctx, uint64_t seed) override;
  Tensor forward(Context& ctx, const Tensor& x) override;
  void backward(Context& ctx, const Tensor& dout) override;

 private:
  Linear fc1_, fc2_, fc3_, fc4_, fc5_;
  std::vector<Tensor> relu_out_;  // the four ReLU outputs
};

// "toy" | "toy_tied"
std::unique_ptr<ToyNet> make_toy_model(const std::string& name, Context& ctx);

}  // namespace pt
