#include "model/fp8_linear.h"

#include "core/error.h"

namespace pt {

void Fp8GradCasts::keep_transposed_only() {
  for (ops::Fp8Operand& o : casts_)
    if (o.transposed.defined()) o.stored = Tensor();  // the CPU's emulated operand is one layout for both
  dy_ = Tensor();
  transposed_only_ = true;
}

const ops::Fp8Operand& Fp8GradCasts::of(Context& ctx, const Tensor& dy, int64_t i, bool both, const Tensor& amax) {
  if (transposed_only_) {
    PT_CHECK(!both && i >= 0 && i < int64_t(casts_.size()) && casts_[size_t(i)].amax.defined(),
             "Fp8GradCasts: after keep_transposed_only only dW's transposed casts of slices cast before are left");
    return casts_[size_t(i)];
  }
  const bool same = dy_.defined() && dy_.data() == dy.data() && dy_.shape() == dy.shape() && dy_.dtype() == dy.dtype();
  if (!same) {
    dy_ = dy;
    casts_.assign(size_t(dy.dim() == 3 ? dy.size(0) : 1), ops::Fp8Operand());
  }
  PT_CHECK(i >= 0 && i < int64_t(casts_.size()),
           "Fp8GradCasts: slice " + std::to_string(i) + " of dy " + dy.describe());
  ops::Fp8Operand& o = casts_[size_t(i)];
  // Cast once (every cast sets amax). The layers ask for both layouts at the first use whenever
  // dX reads dy too, so a later use finds the layout it needs (matmul_fp8_operands checks).
  if (!o.amax.defined()) {
    const Tensor slice = dy.dim() == 3 ? dy.select(0, i) : dy;
    const int64_t bytes = (both ? 2 : 1) * slice.numel();  // one a value
    Tensor space;
    if (space_.defined() && slice.numel() % 16 == 0 && space_used_ + bytes <= int64_t(space_.nbytes())) {
      space = space_.reinterpret(space_used_, {bytes}, fp8_dtype(kFp8Gradient));
      space_used_ += bytes;
    }
    o = ops::fp8_operand(ctx, slice, kFp8Gradient, both, true, fp8_known_amax(ctx, amax), space);
  }
  return o;
}

ops::Fp8Operand fp8_forward_input(Context& ctx, const Tensor& x, const Tensor& x_amax, SavedInput& saved) {
  const bool keep = saved.keep_cast && ctx.fp8_reuse() && ctx.is_cuda();  // the CPU's emulated operand has one layout
  ops::Fp8Operand xq = ops::fp8_operand(ctx, x, kFp8Input, true, keep, fp8_known_amax(ctx, x_amax));
  saved.kept_xt = ops::Fp8Operand();
  if (keep) {
    saved.kept_xt = xq;
    saved.kept_xt.stored = Tensor();  // forward's GEMM reads it from xq; freed with xq after the call
  }
  saved.amax = xq.amax;
  return xq;
}

ops::Fp8Operand fp8_dw_input(Context& ctx, const SavedInput& saved, const Tensor& space) {
  if (saved.kept_xt.transposed.defined()) return saved.kept_xt;
  return ops::fp8_operand(ctx, saved.x, kFp8Input, false, true, fp8_known_amax(ctx, saved.amax), space);
}

ops::Fp8Operand Fp8WeightCasts::of(Context& ctx, const Tensor& w, const ParamStore& store, const Parameter& p,
                                   bool transposed) {
  if (const ops::Fp8Operand* kept = store.fp8_weight(p)) return *kept;  // the store's: both layouts
  // Kept this step (values_fixed held when it was cast; the layer drops it at release_unless_fixed
  // once its gradient is final, before any update): the casts, or the amax to cast with.
  const bool kept = kept_step_ != 0 && kept_step_ == store.steps();
  if (kept && (transposed ? kept_.transposed : kept_.stored).defined()) return kept_;
  if (kept) return ops::fp8_operand(ctx, w, kFp8Weight, /*stored=*/!transposed, transposed, kept_.amax);
  if (!ctx.fp8_reuse() || !store.values_fixed(p))
    return ops::fp8_operand(ctx, w, kFp8Weight, /*stored=*/!transposed, transposed);
  if (store.micro_batches() == 1) {  // the cast this use needs; its amax kept for the other
    ops::Fp8Operand o = ops::fp8_operand(ctx, w, kFp8Weight, /*stored=*/!transposed, transposed);
    kept_ = ops::Fp8Operand();
    kept_.amax = o.amax;
    kept_step_ = store.steps();
    return o;
  }
  kept_ = ops::fp8_operand(ctx, w, kFp8Weight, /*stored=*/true, /*transposed=*/true);
  kept_step_ = store.steps();
  return kept_;
}

void fp8_linear_forward(Context& ctx, Tensor& y, const ops::Fp8Operand& x, const ops::Fp8Operand& w, float beta,
                        const Tensor* residual) {
  ops::matmul_fp8_operands(ctx, y, x, w, /*trans_a=*/false, /*trans_b=*/true, 1.0f, beta, residual);
}

void fp8_linear_dx(Context& ctx, Tensor& dx, const ops::Fp8Operand& dy, const ops::Fp8Operand& w, float beta) {
  ops::matmul_fp8_operands(ctx, dx, dy, w, /*trans_a=*/false, /*trans_b=*/false, 1.0f, beta);
}

void fp8_linear_dw(Context& ctx, Tensor& dw, const ops::Fp8Operand& dy, const ops::Fp8Operand& x, float beta) {
  ops::matmul_fp8_operands(ctx, dw, dy, x, /*trans_a=*/true, /*trans_b=*/false, 1.0f, beta);
}

}  // namespace pt
