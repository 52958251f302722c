#pragma once
// Modules with explicit forward/backward: Linear, BatchedLinear, Embedding, RMSNorm. Each saves
// what its backward needs, accumulates its parameter gradients and tells the ParamStore when done.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/tensor.h"
#include "model/fp8_linear.h"
#include "model/param_store.h"

namespace pt {

// y = x Wᵀ (+ b). W (d_out, d_in) as in PyTorch. In bf16 mode the GEMM reads the bf16
// mirror of W and x must already be bf16 (Context::act_dtype); gradients stay fp32.
class Linear {
 public:
  // Registers "<name>.weight" (and "<name>.bias").
  Linear(ParamStore& store, const std::string& name, int64_t d_in, int64_t d_out, bool bias = false,
         bool bias_trainable = true);
  // Uses existing parameters: several weights (d_out_i, d_in) stacked along d_out act as one
  // (Σd_out_i, d_in) GEMM — they must be adjacent in the flat buffers (q_proj, k_proj, v_proj
  // are) — and one weight shared by two Linears is a tied weight (one Parameter, two uses).
  // With `split` the stacked weights run as one GEMM each instead, as separate nn.Linear
  // modules do in eager PyTorch (the unfused comparison, TransformerConfig::fused): forward
  // writes each weight's columns of y through a strided view; backward computes each dW_i on
  // its own and dx as the sum of one GEMM per weight. The same function, only rounding differs.
  Linear(ParamStore& store, const std::vector<Parameter*>& stacked_weights, Parameter* bias = nullptr,
         bool split = false);

  // Under FP8 an input (x, dy) may come with its amax (`x_amax`, `dy_amax`: fp32 (1) on the
  // device, max |value| as the kernel that wrote it found it), and its cast then skips the pass
  // that would measure it (ops::fp8_operand); undefined: measured. Ignored without FP8.

  // x (N, d_in) → y (N, d_out) in x's dtype. Saves x (a reference, not a copy).
  Tensor forward(Context& ctx, const Tensor& x, const Tensor& x_amax = Tensor());
  // y (N, d_out) = beta·y + x Wᵀ: beta = 1 fuses a residual add (y fp32 or bf16, x bf16 is allowed).
  // With `residual` (y's shape and type) y = beta·residual + x Wᵀ instead, residual untouched:
  // the add without first copying the residual into y.
  void forward_into(Context& ctx, const Tensor& x, Tensor& y, float beta, const Tensor* residual = nullptr,
                    const Tensor& x_amax = Tensor());
  // dy (N, d_out) → dx (N, d_in), or nothing when need_dx is false. dW += dyᵀ x (written, not
  // added, by the step's first contribution: ParamStore::grad_beta) and db += Σ dy are computed
  // first and the store is told at once (overlap hangs on that).
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true, const Tensor& dy_amax = Tensor());
  // As backward, with dx = dx_beta·dx + dy W (dx_beta = 1 sums two branches).
  void backward_into(Context& ctx, const Tensor& dy, Tensor& dx, float dx_beta, const Tensor& dy_amax = Tensor());
  // backward in two halves, dx first: input_backward gives dx = dy W and needs no saved input;
  // weight_backward then adds dW (and db), tells the store and releases the input — which may
  // be restored in between (a SwiGLU product recomputed in the pass that needs dx).
  Tensor input_backward(Context& ctx, const Tensor& dy, const Tensor& dy_amax = Tensor());
  void weight_backward_and_release(Context& ctx, const Tensor& dy, const Tensor& dy_amax = Tensor()) {
    weight_backward(ctx, dy, /*dx_follows=*/false, dy_amax);
    release();
  }
  // Under FP8, between input_backward_into and weight_backward: dy's casts keep only what dW
  // reads and the layer lets dy go (Fp8GradCasts::keep_transposed_only): the caller may drop dy
  // and give weight_backward an undefined one. Not with a bias (its gradient reads dy).
  void keep_grad_casts_for_dw();
  // Under FP8: the next weight_backward's transposed cast of the input goes into `space`'s bytes
  // (ops::fp8_operand's space: a buffer nothing reads any more) until release.
  void place_input_cast(Tensor space) { input_cast_space_ = std::move(space); }
  // Drops the saved input (and the FP8 casts that may not outlive it).
  void release();
  // Drops the saved input after forward, for backward to restore (restore_input): an activation
  // recomputed instead of kept. Under FP8 its amax stays: the restored input must be forward's
  // bit for bit, and its cast takes that amax.
  void drop_input() { saved_.drop(); }
  // Under FP8, whether forward keeps its input's transposed cast instead of the input (the
  // model's call: this layer is the input's only holder, and backward does not restore it;
  // fp8_forward_input). Off by default.
  void keep_fp8_input_cast(bool on) { saved_.keep_cast = on; }
  // Gives backward its input again after release() (an activation recomputed instead of kept).
  void restore_input(const Tensor& x);
  // dx (N, d_in) = dx_beta·dx + dy W, dx given (a view into a larger buffer is fine).
  void input_backward_into(Context& ctx, const Tensor& dy, Tensor& dx, float dx_beta, const Tensor& dy_amax = Tensor());

  Parameter& weight() { return *weights_.front(); }
  Parameter* bias() { return bias_; }
  // Whether this layer's GEMMs take FP8 operands when the context runs FP8 Linear GEMMs
  // (Context::fp8_linear; the model's table decides per layer). Off by default. On registers the
  // stacked weight as one FP8 weight run (ParamStore::add_fp8_weight): call before finalize.
  void set_fp8(bool on);
  int64_t d_in() const { return d_in_; }
  int64_t d_out() const { return d_out_; }

 private:
  // The GEMM units: the whole stack (one unit), or each stacked weight when split.
  struct Unit {
    int64_t row, rows;  // first row and row count in the stacked (d_out, d_in) weight
  };
  Tensor weight_view(DType operand_dtype, const Unit& u) const;  // (u.rows, d_in)
  Tensor weight_grad_view(const Unit& u) const;
  // dx_follows: the other half reads dy too (FP8: dy is cast for both at once).
  void weight_backward(Context& ctx, const Tensor& dy, bool dx_follows, const Tensor& dy_amax);
  ParamStore& store_;
  std::vector<Parameter*> weights_;
  Parameter* bias_ = nullptr;
  int64_t d_in_ = 0, d_out_ = 0;
  std::vector<Unit> units_;
  bool fp8_ = false;
  // FP8 runs the stacked weight as one GEMM (the unfused model's per-weight units are refused).
  bool fp8(const Context& ctx) const {
    const bool on = fp8_ && ctx.fp8_linear();
    PT_CHECK(!on || units_.size() == 1, "Linear '" + weights_.front()->name + "': FP8 GEMMs need the fused model");
    return on;
  }
  Tensor input_cast_space_;  // place_input_cast's, or undefined
  Fp8GradCasts fp8_dy_;
  Fp8WeightCasts fp8_w_;  // of the stacked weight (one unit under FP8)
  SavedInput saved_;
};

// y_b = x W_bᵀ for b < batch: several bias-free weights of one shape (d_out, d_in) that read the
// same input — SwiGLU's w1 and w3 — as one batched GEMM: one launch, faster than two at XL's
// shapes (docs/reports/2026-11-25_grad-first-write_h100.md). The weights need not be adjacent, only
// equally spaced in the flat parameter and gradient buffers (w1 and w3 have w2 between them in
// state-dict order). `split` runs one GEMM per weight instead (the unfused comparison, as separate
// nn.Linear modules). dW_b is written or added as ParamStore::grad_beta says; dx = Σ_b dy_b W_b is
// one GEMM per weight.
class BatchedLinear {
 public:
  BatchedLinear(ParamStore& store, const std::vector<Parameter*>& weights, bool split = false);
  // The amax arguments as Linear's; dy_amax holds one per weight (batch).
  // x (N, d_in) → y (batch, N, d_out) in x's dtype (y[b] contiguous). Saves x (a reference).
  Tensor forward(Context& ctx, const Tensor& x, const Tensor& x_amax = Tensor());
  // dy (batch, N, d_out) → dx (N, d_in); needs no saved input. Under FP8 call it before
  // weight_backward_and_release: dy_b is cast for both GEMMs at once and kept for the second.
  Tensor input_backward(Context& ctx, const Tensor& dy, const Tensor& dy_amax = Tensor());
  // dW_b from dy_b and the saved input; tells the store; releases the input.
  void weight_backward_and_release(Context& ctx, const Tensor& dy, const Tensor& dy_amax = Tensor());
  void release();                                               // as Linear::release
  void drop_input() { saved_.drop(); }                          // as Linear::drop_input
  void keep_fp8_input_cast(bool on) { saved_.keep_cast = on; }  // as Linear's
  void restore_input(const Tensor& x);
  // Under FP8: dy's casts in the next backward go into `space`'s bytes (Fp8GradCasts::place_in)
  // until release.
  void place_grad_casts(Tensor space) { fp8_dy_.place_in(std::move(space)); }
  int64_t batch() const { return static_cast<int64_t>(weights_.size()); }
  void set_fp8(bool on);  // as Linear::set_fp8; each weight its own run

 private:
  // (batch, d_out, d_in) views of the weights (bf16 mirror or fp32) and of their gradients.
  Tensor weights_view(DType operand_dtype) const;
  Tensor grads_view() const;
  void check_input(const Tensor& x, const char* what) const;  // (N, d_in)
  // c (batch, …) = op(a)·op(b) + beta·c: one batched GEMM, or one per weight when split (a 2-D
  // operand is shared by every weight).
  void gemm(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, float beta) const;
  bool fp8(const Context& ctx) const { return fp8_ && ctx.fp8_linear(); }
  bool fp8_ = false;
  Fp8GradCasts fp8_dy_;
  std::vector<Fp8WeightCasts> fp8_w_;  // one per weight
  ParamStore& store_;
  std::vector<Parameter*> weights_;
  bool split_;
  int64_t d_in_ = 0, d_out_ = 0;
  int64_t spacing_ = 0, grad_spacing_ = 0;  // elements between consecutive weights (and gradients)
  SavedInput saved_;
};

// Token embedding (V, C): out (N, C) fp32 rows gathered by id.
class Embedding {
 public:
  Embedding(ParamStore& store, const std::string& name, int64_t vocab, int64_t dim);
  // ids (N) int32 → (N, C) in out_dtype: the parameters' dtype, or bf16 from the bf16 mirror (the
  // residual stream in bf16, --residual-dtype). Saves ids.
  Tensor forward(Context& ctx, const Tensor& ids, DType out_dtype);
  void backward(Context& ctx, const Tensor& dout);  // dweight += scatter; store told
  void release() { saved_ids_ = Tensor(); }
  Parameter& weight() { return *weight_; }

 private:
  ParamStore& store_;
  Parameter* weight_;
  Tensor saved_ids_;
};

// RMSNorm over the last dimension, eps 1e-5, weight initialised to ones; computed in fp32,
// output in `out_dtype` (the dtype of the GEMM operand that follows).
class RMSNorm {
 public:
  RMSNorm(ParamStore& store, const std::string& name, int64_t dim, float eps = 1e-5f);
  // x (N, C) fp32 (or bf16 on the GPU); saves x, rstd. y_amax (optional, fp32 (1)): max |y| as
  // stored, for an FP8 GEMM that reads y next (ops::rmsnorm_forward).
  Tensor forward(Context& ctx, const Tensor& x, DType out_dtype, Tensor* y_amax = nullptr);
  // dx (N, C), the parameters' dtype (fp32 also for a bf16 x): the gradient of the norm's input, added when
  // accumulate else written.
  // dx_lowp (optional, GPU): a bf16 copy of the final dx written in the same pass. dx_amax
  // (optional): max |value| of dx_lowp (or of dx without one) as stored (ops::rmsnorm_backward).
  void backward(Context& ctx, const Tensor& dy, Tensor& dx, bool accumulate, Tensor* dx_lowp = nullptr,
                Tensor* dx_amax = nullptr);
  // The forward output again, from the saved input (bit-identical to forward's): for a layer
  // that recomputes its input rather than keeping it.
  Tensor recompute_output(Context& ctx, DType out_dtype) const;
  void release() {
    saved_x_ = Tensor();
    rstd_ = Tensor();
  }
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

// While one is open on this thread, the random initialisers above only take a large parameter's
// seed (in call order, so the generator advances as without it) and its draws are made with every
// other's at close(), on every core: the same values, sooner (a parameter alone has too few
// chunks of draws to fill the cores). The host holds at most 2^28 values (1 GiB in fp32) at a time.
class InitBatch {
 public:
  struct Job;
  explicit InitBatch(Context& ctx);
  ~InitBatch();  // destroyed open (an exception on its way), it drops the draws not made
  InitBatch(const InitBatch&) = delete;
  InitBatch& operator=(const InitBatch&) = delete;
  void add(Job job);  // the initialisers' (layers.cpp)
  // Makes the draws and writes the parameters.
  void close();

 private:
  Context& ctx_;
  std::vector<Job> jobs_;
  bool open_ = true;
};

}  // namespace pt
