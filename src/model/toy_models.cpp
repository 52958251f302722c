// Toy models: Linear layers and ReLU, forward and backward by hand.
#include "model/toy_models.h"

#include <cmath>
#include <random>

#include "core/error.h"
#include "ops/elementwise.h"

namespace pt {

namespace {

void check_fp32(const Context& ctx) {
  PT_CHECK(ctx.act_dtype() == DType::F32,
           "the toy models run in fp32 or tf32 (they have no bf16 path); got precision " +
               std::string(precision_name(ctx.precision())));
}

Tensor relu(Context& ctx, const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device(), "relu_out", MemCategory::Activations);
  ops::relu_forward(ctx, y, x);
  return y;
}

// dy → dx in place (dy is a fresh gradient no one else holds).
Tensor relu_back(Context& ctx, Tensor dy, const Tensor& y) {
  ops::relu_backward(ctx, dy, dy, y);
  return dy;
}

void init_linear(Context& ctx, Linear& l, std::mt19937_64& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(l.d_in()));
  init_uniform(ctx, l.weight(), bound, rng);
  if (l.bias()) init_uniform(ctx, *l.bias(), bound, rng);
}

}  // namespace

ToyModel::ToyModel(Context& ctx)
    : fc1_(store_, "fc1", 10, 10),
      fc2_(store_, "fc2", 10, 50, /*bias=*/true, /*bias_trainable=*/false),
      fc3_(store_, "fc3", 50, 5),
      fixed_(&store_.add("no_grad_fixed_param", {2}, /*trainable=*/false)) {
  check_fp32(ctx);
  store_.finalize(ctx, false);
  init_constant(ctx, *fixed_, 2.0);
}

void ToyModel::init_weights(Context& ctx, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Linear* l : {&fc1_, &fc2_, &fc3_}) init_linear(ctx, *l, rng);
}

Tensor ToyModel::forward(Context& ctx, const Tensor& x) {
  check_shape(x, {x.size(0), kIn}, "ToyModel input");
  h1_ = relu(ctx, fc1_.forward(ctx, x));
  h2_ = relu(ctx, fc2_.forward(ctx, h1_));
  return fc3_.forward(ctx, h2_);
}

void ToyModel::backward(Context& ctx, const Tensor& dout) {
  Tensor d = relu_back(ctx, fc3_.backward(ctx, dout), h2_);
  d = relu_back(ctx, fc2_.backward(ctx, d), h1_);
  fc1_.backward(ctx, d, /*need_dx=*/false);
  h1_ = h2_ = Tensor();
}

ToyModelWithTiedWeights::ToyModelWithTiedWeights(Context& ctx)
    : fc1_(store_, "fc1", 10, 10),
      fc2_(store_, "fc2", 10, 50),
      fc3_(store_, "fc3", 50, 10),
      fc4_(store_, {&fc2_.weight()}),
      fc5_(store_, "fc5", 50, 5) {
  check_fp32(ctx);
  store_.finalize(ctx, false);
}

void ToyModelWithTiedWeights::init_weights(Context& ctx, uint64_t seed) {
  std::mt19937_64 rng(seed);
  // fc4 has no parameter of its own.
  for (Linear* l : {&fc1_, &fc2_, &fc3_, &fc5_}) init_linear(ctx, *l, rng);
}

Tensor ToyModelWithTiedWeights::forward(Context& ctx, const Tensor& x) {
  check_shape(x, {x.size(0), kIn}, "ToyModelWithTiedWeights input");
  relu_out_.clear();
  Tensor h = x;
  for (Linear* l : {&fc1_, &fc2_, &fc3_, &fc4_}) {
    relu_out_.push_back(relu(ctx, l->forward(ctx, h)));
    h = relu_out_.back();
  }
  return fc5_.forward(ctx, h);
}

void ToyModelWithTiedWeights::backward(Context& ctx, const Tensor& dout) {
  PT_CHECK(relu_out_.size() == 4, "ToyModelWithTiedWeights::backward without a forward");
  Tensor d = fc5_.backward(ctx, dout);
  Linear* layers[] = {&fc1_, &fc2_, &fc3_, &fc4_};
  for (int i = 3; i >= 0; --i) {
    d = relu_back(ctx, d, relu_out_[i]);
    d = layers[i]->backward(ctx, d, /*need_dx=*/i > 0);
  }
  relu_out_.clear();
}

std::unique_ptr<ToyNet> make_toy_model(const std::string& name, Context& ctx) {
  if (name == "toy") return std::make_unique<ToyModel>(ctx);
  if (name == "toy_tied") return std::make_unique<ToyModelWithTiedWeights>(ctx);
  PT_FAIL("unknown toy model '" + name + "' (expected toy or toy_tied)");
}

}  // namespace pt
