#pragma once
// Modules with explicit forward/backward: Linear, Embedding, RMSNorm. Each saves what its
// backward needs, accumulates its parameter gradients and tells the ParamStore when done.
#include <cstdint>
#include <random>
#include <string>

#include "core/context.h"
#include "core/tensor.h"
#include "model/param_store.h"

namespace pt {

// y = x Wᵀ (+ b). W (d_out, d_in) as in PyTorch. In bf16 mode the GEMM reads the bf16
// mirror of W and x must already be bf16 (Context::act_dtype); gradients are fp32.
class Linear {
 public:
  Linear(ParamStore& store, const std::string& name, int64_t d_in, int64_t d_out, bool bias = false,
         bool bias_trainable = true);
  // Tied weight: reuses `shared_weight` (one Parameter used twice, synchronised once).
  Linear(ParamStore& store, const std::string& name, Parameter& shared_weight, bool bias = false);

  // x (N, d_in) → (N, d_out) in ctx.act_dtype(). Saves x (a reference, not a copy).
  Tensor forward(Context& ctx, const Tensor& x);
  // dy (N, d_out) → dx (N, d_in) (skipped, undefined, when need_dx is false).
  // dW += dyᵀ x, db += Σ dy; then the store is told both are final.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true);
  void release() { saved_x_ = Tensor(); }

  Parameter& weight() { return *weight_; }
  Parameter* bias() { return bias_; }
  int64_t d_in() const { return d_in_; }
  int64_t d_out() const { return d_out_; }

 private:
  ParamStore& store_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
  int64_t d_in_, d_out_;
  Tensor saved_x_;
};

// Token embedding (V, C): out (N, C) fp32 rows gathered by id.
class Embedding {
 public:
  Embedding(ParamStore& store, const std::string& name, int64_t vocab, int64_t dim);
  Tensor forward(Context& ctx, const Tensor& ids);  // ids (N) int32; saves ids
  void backward(Context& ctx, const Tensor& dout);  // dweight += scatter; store told
  void release() { saved_ids_ = Tensor(); }
  Parameter& weight() { return *weight_; }

 private:
  ParamStore& store_;
  Parameter* weight_;
  Tensor saved_ids_;
};

// RMSNorm over the last dimension, eps 1e-5, weight initialised to ones; computed in fp32,
// output in ctx.act_dtype() (the GEMM operand that follows).
class RMSNorm {
 public:
  RMSNorm(ParamStore& store, const std::string& name, int64_t dim, float eps = 1e-5f);
  Tensor forward(Context& ctx, const Tensor& x);  // x (N, C) fp32; saves x and rstd
  // dx of the norm's input added into `dx_accum` (N, C) fp32 when accumulate, else written.
  void backward(Context& ctx, const Tensor& dy, Tensor& dx, bool accumulate);
  void release() { saved_x_ = Tensor(); rstd_ = Tensor(); }
  Parameter& weight() { return *weight_; }

 private:
  ParamStore& store_;
  Parameter* weight_;
  float eps_;
  Tensor saved_x_, rstd_;
};

// Initialisers (host RNG, so CPU and GPU runs start from identical weights).
// Truncated normal N(0, std²) cut at [lo, hi] (absolute values, as torch.nn.init.trunc_normal_).
void init_trunc_normal(Context& ctx, Parameter& p, double std, double lo, double hi, std::mt19937_64& rng);
void init_constant(Context& ctx, Parameter& p, double value);
// torch.nn.Linear's default: U(−1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
void init_uniform(Context& ctx, Parameter& p, double bound, std::mt19937_64& rng);

}  // namespace pt
