#include "model/layers.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/profiler.h"
#include "model/fp8_linear.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "ops/rmsnorm.h"

namespace pt {

// ---- Linear -------------------------------------------------------------------------------

Linear::Linear(ParamStore& store, const std::string& name, int64_t d_in, int64_t d_out, bool bias, bool bias_trainable)
    : store_(store), d_in_(d_in), d_out_(d_out), units_{{0, d_out}} {
  weights_.push_back(&store.add(name + ".weight", {d_out, d_in}));
  store.add_use(*weights_.front(), GradWrite::Overwrite);
  if (bias) {
    bias_ = &store.add(name + ".bias", {d_out}, bias_trainable);
    store.add_use(*bias_);
  }
}

Linear::Linear(ParamStore& store, const std::vector<Parameter*>& stacked_weights, Parameter* bias, bool split)
    : store_(store), weights_(stacked_weights), bias_(bias) {
  PT_CHECK(!weights_.empty(), "Linear needs at least one weight");
  d_in_ = weights_.front()->shape.at(1);
  for (size_t i = 0; i < weights_.size(); ++i) {
    Parameter* w = weights_[i];
    PT_CHECK(w->shape.size() == 2 && w->shape[1] == d_in_,
             "Linear: stacked weight '" + w->name + "' must be (d_out, " + std::to_string(d_in_) + ")");
    if (i > 0) {
      const Parameter* prev = weights_[i - 1];
      PT_CHECK(w->offset == prev->offset + prev->numel && w->trainable == prev->trainable &&
                   (!w->trainable || w->grad_offset == prev->grad_offset + prev->numel),
               "Linear: stacked weights '" + prev->name + "' and '" + w->name + "' are not adjacent");
    }
    if (split) units_.push_back({d_out_, w->shape[0]});
    d_out_ += w->shape[0];
    store.add_use(*w, GradWrite::Overwrite);
  }
  if (!split) units_.push_back({0, d_out_});
  if (bias_) store.add_use(*bias_);
}

void Linear::set_fp8(bool on) {
  if (on && !fp8_) store_.add_fp8_weight(weights_);
  fp8_ = on;
}

void Linear::release() {
  saved_.clear();
  input_cast_space_ = Tensor();
  fp8_dy_.clear();
  fp8_w_.release_unless_fixed(store_, *weights_.front());
}

Tensor Linear::weight_view(DType operand_dtype, const Unit& u) const {
  const Parameter& w0 = *weights_.front();
  const ParamStore& s = w0.store();
  Tensor flat = operand_dtype == DType::BF16 ? s.flat_lowp() : s.flat_params();
  PT_CHECK(flat.defined(), "Linear '" + w0.name + "': bf16 input but no bf16 parameter mirror");
  return flat.narrow(0, w0.offset + u.row * d_in_, u.rows * d_in_).reshape({u.rows, d_in_});
}

Tensor Linear::weight_grad_view(const Unit& u) const {
  const Parameter& w0 = *weights_.front();
  Tensor flat = w0.store().flat_grads();
  return flat.narrow(0, w0.grad_offset + u.row * d_in_, u.rows * d_in_).reshape({u.rows, d_in_});
}

Tensor Linear::forward(Context& ctx, const Tensor& x, const Tensor& x_amax) {
  PT_CHECK(x.dim() == 2 && x.size(1) == d_in_, "Linear '" + weights_.front()->name + "': input " + x.describe() +
                                                   ", expected (N, " + std::to_string(d_in_) + ")");
  Tensor y = Tensor::empty({x.size(0), d_out_}, x.dtype(), ctx.device(), "linear_out");
  forward_into(ctx, x, y, 0.0f, nullptr, x_amax);
  return y;
}

void Linear::forward_into(Context& ctx, const Tensor& x, Tensor& y, float beta, const Tensor* residual,
                          const Tensor& x_amax) {
  for (const Parameter* w : weights_) store_.about_to_read(*w);
  if (bias_) store_.about_to_read(*bias_);
  saved_.kept_xt = ops::Fp8Operand();
  if (fp8(ctx)) {  // one unit: the model's FP8 layers are fused
    const ops::Fp8Operand xq = fp8_forward_input(ctx, x, x_amax, saved_);
    fp8_linear_forward(ctx, y, xq, fp8_w_.of(ctx, weight_view(x.dtype(), units_[0]), store_, *weights_.front(), false),
                       beta, residual);
  } else {
    for (const Unit& u : units_) {
      Tensor yu = y.narrow(1, u.row, u.rows);  // (N, rows): this unit's columns of y
      Tensor ru = residual ? residual->narrow(1, u.row, u.rows) : Tensor();
      ops::matmul(ctx, yu, x, weight_view(x.dtype(), u), /*trans_a=*/false, /*trans_b=*/true, 1.0f, beta,
                  residual ? &ru : nullptr);
    }
  }
  if (bias_) {
    Tensor b = x.dtype() == DType::BF16 ? bias_->data_lowp() : bias_->data();
    ops::add_bias(ctx, y, b);
  }
  saved_.keep(x);
}

void Linear::restore_input(const Tensor& x) {
  PT_CHECK(x.dim() == 2 && x.size(1) == d_in_, "Linear '" + weights_.front()->name + "': restored input " +
                                                   x.describe() + ", expected (N, " + std::to_string(d_in_) + ")");
  saved_.x = x;
}

void Linear::weight_backward(Context& ctx, const Tensor& dy, bool dx_follows, const Tensor& dy_amax) {
  PT_CHECK(saved_.present(), "Linear '" + weights_.front()->name + "': backward without forward");
  if (weights_.front()->trainable) {
    // The step's first contribution writes dW (beta 0: C not read, and zero_grad skips it),
    // later ones (a tied weight's second use, later micro-batches) add.
    const float beta = store_.grad_beta(weights_);
    if (fp8(ctx)) {
      Tensor dw = weight_grad_view(units_[0]);
      fp8_linear_dw(ctx, dw, fp8_dy_.of(ctx, dy, 0, dx_follows, dy_amax),
                    fp8_dw_input(ctx, saved_, std::exchange(input_cast_space_, Tensor())), beta);
    } else {
      for (const Unit& u : units_) {
        Tensor dw = weight_grad_view(u);  // (rows, d_in) = beta·dW + dy_uᵀ (rows, N) · x (N, d_in)
        ops::matmul(ctx, dw, dy.narrow(1, u.row, u.rows), saved_.x, /*trans_a=*/true, /*trans_b=*/false, 1.0f, beta);
      }
    }
  }
  for (Parameter* w : weights_) store_.grad_contributed(*w);
  if (bias_ && bias_->trainable) {
    Tensor db = bias_->grad();
    ops::bias_backward(ctx, db, dy);
    store_.grad_contributed(*bias_);
  }
}

void Linear::keep_grad_casts_for_dw() {
  PT_CHECK(!bias_,
           "Linear '" + weights_.front()->name + "': keep_grad_casts_for_dw with a bias, whose gradient reads dy");
  fp8_dy_.keep_transposed_only();
}

Tensor Linear::backward(Context& ctx, const Tensor& dy, bool need_dx, const Tensor& dy_amax) {
  if (!need_dx) {
    weight_backward(ctx, dy, /*dx_follows=*/false, dy_amax);
    release();
    return Tensor();
  }
  Tensor dx = Tensor::empty({dy.size(0), d_in_}, dy.dtype(), ctx.device(), "linear_dx");
  backward_into(ctx, dy, dx, 0.0f, dy_amax);
  return dx;
}

void Linear::backward_into(Context& ctx, const Tensor& dy, Tensor& dx, float dx_beta, const Tensor& dy_amax) {
  weight_backward(ctx, dy, /*dx_follows=*/true, dy_amax);
  input_backward_into(ctx, dy, dx, dx_beta, dy_amax);
  release();
}

void Linear::input_backward_into(Context& ctx, const Tensor& dy, Tensor& dx, float dx_beta, const Tensor& dy_amax) {
  // dx (N, d_in) = dx_beta·dx + Σ_u dy_u (N, rows) · W_u (rows, d_in)
  if (fp8(ctx)) {  // dW follows (or came first): dy is cast for both
    fp8_linear_dx(ctx, dx, fp8_dy_.of(ctx, dy, 0, /*both=*/true, dy_amax),
                  fp8_w_.of(ctx, weight_view(dy.dtype(), units_[0]), store_, *weights_.front(), true), dx_beta);
    return;
  }
  float beta = dx_beta;
  for (const Unit& u : units_) {
    ops::matmul(ctx, dx, dy.narrow(1, u.row, u.rows), weight_view(dy.dtype(), u), false, false, 1.0f, beta);
    beta = 1.0f;
  }
}

Tensor Linear::input_backward(Context& ctx, const Tensor& dy, const Tensor& dy_amax) {
  Tensor dx = Tensor::empty({dy.size(0), d_in_}, dy.dtype(), ctx.device(), "linear_dx");
  input_backward_into(ctx, dy, dx, 0.0f, dy_amax);
  return dx;
}

// ---- BatchedLinear ------------------------------------------------------------------------

BatchedLinear::BatchedLinear(ParamStore& store, const std::vector<Parameter*>& weights, bool split)
    : store_(store), weights_(weights), split_(split) {
  PT_CHECK(!weights_.empty(), "BatchedLinear needs at least one weight");
  const Parameter& w0 = *weights_.front();
  PT_CHECK(w0.shape.size() == 2, "BatchedLinear: weight '" + w0.name + "' must be 2-D");
  d_out_ = w0.shape[0];
  d_in_ = w0.shape[1];
  if (weights_.size() > 1) {
    spacing_ = weights_[1]->offset - w0.offset;
    grad_spacing_ = weights_[1]->grad_offset - w0.grad_offset;
  }
  for (size_t i = 0; i < weights_.size(); ++i) {
    const Parameter& w = *weights_[i];
    const int64_t k = static_cast<int64_t>(i);
    PT_CHECK(w.shape == w0.shape && w.trainable == w0.trainable,
             "BatchedLinear: weight '" + w.name + "' differs from '" + w0.name + "' in shape or trainability");
    PT_CHECK(
        w.offset == w0.offset + k * spacing_ && (!w.trainable || w.grad_offset == w0.grad_offset + k * grad_spacing_),
        "BatchedLinear: weights '" + w0.name + "' … '" + w.name + "' are not equally spaced in the flat buffers");
    store.add_use(*weights_[i], GradWrite::Overwrite);
  }
  PT_CHECK(weights_.size() == 1 || (spacing_ >= w0.numel && (!w0.trainable || grad_spacing_ >= w0.numel)),
           "BatchedLinear: weights '" + w0.name + "' … overlap");
  fp8_w_.resize(weights_.size());
}

void BatchedLinear::set_fp8(bool on) {
  if (on && !fp8_)
    for (Parameter* w : weights_) store_.add_fp8_weight({w});
  fp8_ = on;
}

void BatchedLinear::release() {
  saved_.clear();
  fp8_dy_.clear();
  for (size_t b = 0; b < weights_.size(); ++b) fp8_w_[b].release_unless_fixed(store_, *weights_[b]);
}

Tensor BatchedLinear::weights_view(DType operand_dtype) const {
  const Parameter& w0 = *weights_.front();
  Tensor flat = operand_dtype == DType::BF16 ? w0.store().flat_lowp() : w0.store().flat_params();
  PT_CHECK(flat.defined(), "BatchedLinear '" + w0.name + "': bf16 input but no bf16 parameter mirror");
  return flat.as_strided({batch(), d_out_, d_in_}, {spacing_, d_in_, 1}, w0.offset);
}

Tensor BatchedLinear::grads_view() const {
  const Parameter& w0 = *weights_.front();
  return w0.store().flat_grads().as_strided({batch(), d_out_, d_in_}, {grad_spacing_, d_in_, 1}, w0.grad_offset);
}

void BatchedLinear::check_input(const Tensor& x, const char* what) const {
  PT_CHECK(x.dim() == 2 && x.size(1) == d_in_, "BatchedLinear '" + weights_.front()->name + "': " + what + " " +
                                                   x.describe() + ", expected (N, " + std::to_string(d_in_) + ")");
}

void BatchedLinear::gemm(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                         float beta) const {
  if (!split_) {
    ops::matmul(ctx, c, a, b, trans_a, trans_b, 1.0f, beta);
    return;
  }
  for (int64_t i = 0; i < batch(); ++i) {  // a 2-D operand is the same for every weight
    Tensor ci = c.select(0, i);
    ops::matmul(ctx, ci, a.dim() == 3 ? a.select(0, i) : a, b.dim() == 3 ? b.select(0, i) : b, trans_a, trans_b, 1.0f,
                beta);
  }
}

Tensor BatchedLinear::forward(Context& ctx, const Tensor& x, const Tensor& x_amax) {
  check_input(x, "input");
  for (const Parameter* w : weights_) store_.about_to_read(*w);
  Tensor y = Tensor::empty({batch(), x.size(0), d_out_}, x.dtype(), ctx.device(), "batched_linear_out");
  saved_.kept_xt = ops::Fp8Operand();
  if (fp8(ctx)) {  // one GEMM per weight (FP8 GEMMs are 2-D), x cast once for all
    const ops::Fp8Operand xq = fp8_forward_input(ctx, x, x_amax, saved_);
    const Tensor w = weights_view(x.dtype());
    for (int64_t b = 0; b < batch(); ++b) {
      Tensor yb = y.select(0, b);
      fp8_linear_forward(ctx, yb, xq, fp8_w_[size_t(b)].of(ctx, w.select(0, b), store_, *weights_[size_t(b)], false),
                         0.0f);
    }
  } else {
    gemm(ctx, y, x, weights_view(x.dtype()), /*trans_a=*/false, /*trans_b=*/true, 0.0f);  // x broadcast
  }
  saved_.keep(x);
  return y;
}

void BatchedLinear::restore_input(const Tensor& x) {
  check_input(x, "restored input");
  saved_.x = x;
}

namespace {
// One slice of a per-weight amax (batch), or none.
Tensor amax_of(const Tensor& amax, int64_t b) { return amax.defined() ? amax.narrow(0, b, 1) : Tensor(); }
}  // namespace

Tensor BatchedLinear::input_backward(Context& ctx, const Tensor& dy, const Tensor& dy_amax) {
  PT_CHECK(dy.dim() == 3 && dy.size(0) == batch() && dy.size(2) == d_out_,
           "BatchedLinear '" + weights_.front()->name + "': dy " + dy.describe());
  // dx (N, d_in) = Σ_b dy_b (N, d_out) · W_b (d_out, d_in): a sum, so one GEMM per weight.
  Tensor dx = Tensor::empty({dy.size(1), d_in_}, dy.dtype(), ctx.device(), "batched_linear_dx");
  Tensor w = weights_view(dy.dtype());
  for (int64_t b = 0; b < batch(); ++b) {
    const float beta = b == 0 ? 0.0f : 1.0f;
    if (fp8(ctx))  // dW follows: dy_b is cast for both
      fp8_linear_dx(ctx, dx, fp8_dy_.of(ctx, dy, b, /*both=*/true, amax_of(dy_amax, b)),
                    fp8_w_[size_t(b)].of(ctx, w.select(0, b), store_, *weights_[size_t(b)], true), beta);
    else
      ops::matmul(ctx, dx, dy.select(0, b), w.select(0, b), false, false, 1.0f, beta);
  }
  return dx;
}

void BatchedLinear::weight_backward_and_release(Context& ctx, const Tensor& dy, const Tensor& dy_amax) {
  PT_CHECK(saved_.present(), "BatchedLinear '" + weights_.front()->name + "': backward without forward");
  if (weights_.front()->trainable) {
    const float beta = store_.grad_beta(weights_);  // written by the step's first contribution
    Tensor dw = grads_view();  // (batch, d_out, d_in) = beta·dW + dy_bᵀ (d_out, N) · x (N, d_in)
    if (fp8(ctx)) {
      const ops::Fp8Operand xq = fp8_dw_input(ctx, saved_);
      for (int64_t b = 0; b < batch(); ++b) {
        Tensor dwb = dw.select(0, b);
        fp8_linear_dw(ctx, dwb, fp8_dy_.of(ctx, dy, b, /*both=*/false, amax_of(dy_amax, b)), xq, beta);
      }
    } else {
      gemm(ctx, dw, dy, saved_.x, /*trans_a=*/true, /*trans_b=*/false, beta);
    }
  }
  // The last weight first, as the reverse order in which backward finishes parameters.
  for (auto it = weights_.rbegin(); it != weights_.rend(); ++it) store_.grad_contributed(**it);
  release();
}

// ---- Embedding ----------------------------------------------------------------------------

Embedding::Embedding(ParamStore& store, const std::string& name, int64_t vocab, int64_t dim)
    : store_(store), weight_(&store.add(name + ".weight", {vocab, dim})) {
  store.add_use(*weight_);
}

Tensor Embedding::forward(Context& ctx, const Tensor& ids, DType out_dtype) {
  store_.about_to_read(*weight_);
  Tensor w = out_dtype == weight_->data().dtype() ? weight_->data() : weight_->data_lowp();
  PT_CHECK(w.defined() && w.dtype() == out_dtype,
           std::string("Embedding: no ") + dtype_name(out_dtype) + " copy of '" + weight_->name + "' to read");
  Tensor out = Tensor::empty({ids.numel(), w.size(1)}, w.dtype(), ctx.device(), "embedding_out");
  ops::embedding_forward(ctx, out, ids.reshape({ids.numel()}), w);
  saved_ids_ = ids.reshape({ids.numel()});
  return out;
}

void Embedding::backward(Context& ctx, const Tensor& dout) {
  if (weight_->trainable) {
    Tensor dw = weight_->grad();
    ops::embedding_backward(ctx, dw, dout, saved_ids_);
  }
  store_.grad_contributed(*weight_);
  release();
}

// ---- RMSNorm ------------------------------------------------------------------------------

RMSNorm::RMSNorm(ParamStore& store, const std::string& name, int64_t dim, float eps)
    : store_(store), weight_(&store.add(name + ".weight", {dim})), eps_(eps) {
  store.add_use(*weight_, GradWrite::Overwrite, ParamRead::Master);
}

Tensor RMSNorm::forward(Context& ctx, const Tensor& x, DType out_dtype, Tensor* y_amax) {
  store_.about_to_read(*weight_);
  Tensor y = Tensor::empty(x.shape(), out_dtype, ctx.device(), "rmsnorm_out");
  Tensor w = weight_->data();
  rstd_ = Tensor::empty({x.size(0)}, w.dtype(), ctx.device(), "rmsnorm_rstd");
  ops::rmsnorm_forward(ctx, y, rstd_, x, w, eps_, y_amax);
  saved_x_ = x;
  return y;
}

Tensor RMSNorm::recompute_output(Context& ctx, DType out_dtype) const {
  PT_CHECK(saved_x_.defined(), "RMSNorm '" + weight_->name + "': recompute without forward");
  Tensor y = Tensor::empty(saved_x_.shape(), out_dtype, ctx.device(), "rmsnorm_recompute");
  ops::rmsnorm_apply(ctx, y, saved_x_, weight_->data(), rstd_);
  return y;
}

void RMSNorm::backward(Context& ctx, const Tensor& dy, Tensor& dx, bool accumulate, Tensor* dx_lowp, Tensor* dx_amax) {
  PT_CHECK(saved_x_.defined(), "RMSNorm '" + weight_->name + "': backward without forward");
  Tensor w = weight_->data();
  Tensor dw = weight_->grad();
  ops::rmsnorm_backward(ctx, dx, dw, dy, saved_x_, w, rstd_, accumulate, dx_lowp,
                        /*dw_accumulate=*/store_.grad_beta(*weight_) != 0.0f, dx_amax);
  store_.grad_contributed(*weight_);
  release();
}

// ---- initialisers -------------------------------------------------------------------------

// One large parameter's draws: its seed (taken from the caller's generator where it asked) and
// what fills a chunk of its host values from a chunk's own generator.
using ChunkFill = std::function<void(const Tensor& host, size_t begin, size_t end, std::mt19937_64& g)>;
struct InitBatch::Job {
  Parameter* param;
  uint64_t seed;
  ChunkFill fill;
};

namespace {
// A parameter larger than one chunk takes one seed from the caller's generator and is cut into
// fixed chunks, each with its own generator seeded from (seed, chunk) and filled in parallel: the
// values depend on the seed only, not on the thread count. A smaller one draws from the caller's
// generator in order (one distribution object for the whole tensor), as a serial loop would.
constexpr size_t kInitChunk = size_t{1} << 20;
// InitBatch's group: its host values at most this many (1 GiB in fp32).
constexpr int64_t kInitGroupElements = int64_t{1} << 28;

thread_local InitBatch* open_batch = nullptr;

// draw(dist, g) for elements [begin, end) of host (fp64, else fp32: rounded once), dist fresh.
template <typename MakeDist, typename Draw>
ChunkFill chunk_fill(MakeDist make_dist, Draw draw) {
  return [make_dist, draw](const Tensor& host, size_t begin, size_t end, std::mt19937_64& g) {
    auto dist = make_dist();
    if (host.dtype() == DType::F64) {
      auto* v = host.data_as<double>();
      for (size_t i = begin; i < end; ++i) v[i] = draw(dist, g);
    } else {
      auto* v = host.data_as<float>();
      for (size_t i = begin; i < end; ++i) v[i] = static_cast<float>(draw(dist, g));
    }
  };
}

Tensor host_staging(const Parameter& p) {
  return Tensor::empty(p.data().shape(), p.data().dtype(), Device::cpu(), "init_staging");
}

// Makes the jobs' draws, every chunk of every job on one pool of threads (the threads write the
// staging memory themselves: its pages are faulted in in parallel), then writes the parameters.
void run_jobs(Context& ctx, const std::vector<InitBatch::Job>& jobs) {
  std::vector<Tensor> hosts;
  std::vector<std::pair<size_t, size_t>> tasks;  // (job, chunk)
  for (size_t j = 0; j < jobs.size(); ++j) {
    hosts.push_back(host_staging(*jobs[j].param));
    const size_t n = static_cast<size_t>(jobs[j].param->numel);
    for (size_t c = 0; c * kInitChunk < n; ++c) tasks.emplace_back(j, c);
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t t = next++; t < tasks.size(); t = next++) {
      const auto [j, c] = tasks[t];
      const uint64_t seed = jobs[j].seed;
      std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(c),
                        static_cast<uint32_t>(c >> 32)};
      std::mt19937_64 g(seq);
      const size_t n = static_cast<size_t>(jobs[j].param->numel);
      jobs[j].fill(hosts[j], c * kInitChunk, std::min(n, (c + 1) * kInitChunk), g);
    }
  };
  const size_t threads = std::max<size_t>(1, std::min<size_t>(tasks.size(), std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t j = 0; j < jobs.size(); ++j) jobs[j].param->data().copy_from(hosts[j], ctx);
}

// p ← draws: a small parameter at once from rng; a large one takes its seed and is drawn now, or
// at the open batch's close.
void init_random(Context& ctx, Parameter& p, std::mt19937_64& rng, const ChunkFill& fill) {
  const size_t n = static_cast<size_t>(p.numel);
  if (n <= kInitChunk) {
    Tensor host = host_staging(p);
    fill(host, 0, n, rng);
    p.data().copy_from(host, ctx);
    return;
  }
  InitBatch::Job job{&p, rng(), fill};
  if (open_batch != nullptr)
    open_batch->add(std::move(job));
  else
    run_jobs(ctx, {job});
}
}  // namespace

InitBatch::InitBatch(Context& ctx) : ctx_(ctx) {
  PT_CHECK(open_batch == nullptr, "InitBatch: one is already open on this thread");
  open_batch = this;
}

InitBatch::~InitBatch() {
  if (open_) open_batch = nullptr;
}

void InitBatch::add(Job job) { jobs_.push_back(std::move(job)); }

void InitBatch::close() {
  if (!open_) return;
  open_ = false;
  open_batch = nullptr;
  // In groups of consecutive parameters, so that the host holds a bounded share of the model.
  std::vector<Job> group;
  int64_t elements = 0;
  for (Job& job : jobs_) {
    if (!group.empty() && elements + job.param->numel > kInitGroupElements) {
      run_jobs(ctx_, group);
      group.clear();
      elements = 0;
    }
    elements += job.param->numel;
    group.push_back(std::move(job));
  }
  if (!group.empty()) run_jobs(ctx_, group);
  jobs_.clear();
}

void init_trunc_normal(Context& ctx, Parameter& p, double std, double lo, double hi, std::mt19937_64& rng) {
  init_random(ctx, p, rng,
              chunk_fill([std] { return std::normal_distribution<double>(0.0, std); },
                         [lo, hi](std::normal_distribution<double>& normal, std::mt19937_64& g) {
                           double x;
                           do {
                             x = normal(g);
                           } while (x < lo || x > hi);  // rejection: the same law as torch.nn.init.trunc_normal_
                           return x;
                         }));
}

void init_constant(Context& ctx, Parameter& p, double value) {
  Tensor host = host_staging(p);
  if (host.dtype() == DType::F64)
    std::fill_n(host.data_as<double>(), p.numel, value);
  else
    std::fill_n(host.data_as<float>(), p.numel, static_cast<float>(value));
  p.data().copy_from(host, ctx);
}

void init_uniform(Context& ctx, Parameter& p, double bound, std::mt19937_64& rng) {
  init_random(ctx, p, rng,
              chunk_fill([bound] { return std::uniform_real_distribution<double>(-bound, bound); },
                         [](std::uniform_real_distribution<double>& u, std::mt19937_64& g) { return u(g); }));
}

}  // namespace pt
