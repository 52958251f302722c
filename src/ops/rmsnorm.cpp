#include "ops/rmsnorm.h"

#include "core/profiler.h"
#include "cuda/rmsnorm.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::ArgCheck;

namespace {
// x (N, C): on the GPU fp32, or bf16 (the residual stream in bf16, --residual-dtype), with w (C)
// and rstd (N) fp32; on the CPU fp32|fp64 with w and rstd in x's type.
void check_master(const ArgCheck& chk, const Context& ctx, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  if (ctx.is_cuda())
    chk.dtype_is(x, "x", {DType::F32, DType::BF16});
  else
    chk.float_storage(x, "x");
  chk.matrix(x, "x");
  chk.on_device(w, "w");
  if (ctx.is_cuda())
    chk.dtype_is(w, "w", {DType::F32});
  else
    chk.same_dtype(w, "w", x, "x");
  chk.shape_is(w, "w", {x.size(1)});
  chk.contiguous(w, "w");
  chk.on_device(rstd, "rstd");
  chk.same_dtype(rstd, "rstd", w, "w");
  chk.shape_is(rstd, "rstd", {x.size(0)});
  chk.contiguous(rstd, "rstd");
}
// A (N, C) tensor in any storage type the device allows (the CPU: x's type).
void check_like_x(const ArgCheck& chk, const Context& ctx, const Tensor& t, const char* name, const Tensor& x) {
  chk.float_storage(t, name);
  chk.shape_is(t, name, x.shape());
  chk.contiguous(t, name);
  if (!ctx.is_cuda()) chk.same_dtype(t, name, x, "x");
}
}  // namespace

void rmsnorm_forward(Context& ctx, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps,
                     Tensor* y_amax) {
  ArgCheck chk(ctx, "rmsnorm_forward");
  check_master(chk, ctx, x, w, rstd);
  check_like_x(chk, ctx, y, "y", x);
  float* y_amax_out = chk.amax_output(y_amax, "y_amax");
  OpScope scope(ctx, "rmsnorm_forward", OpFamily::Norm, OpCost().read(x).read(w).write(y).write(rstd));
  PT_OP_DISPATCH(ctx, rmsnorm_forward, y, rstd, x, w, eps, y_amax_out);
}

void rmsnorm_apply(Context& ctx, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  ArgCheck chk(ctx, "rmsnorm_apply");
  check_master(chk, ctx, x, w, rstd);
  check_like_x(chk, ctx, y, "y", x);
  OpScope scope(ctx, "rmsnorm_apply", OpFamily::Norm, OpCost().read(x).read(w).read(rstd).write(y));
  PT_OP_DISPATCH(ctx, rmsnorm_apply, y, x, w, rstd);
}

void rmsnorm_backward(Context& ctx, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w,
                      const Tensor& rstd, bool accumulate, Tensor* dx_lowp, bool dw_accumulate, Tensor* dx_amax) {
  ArgCheck chk(ctx, "rmsnorm_backward");
  check_master(chk, ctx, x, w, rstd);
  check_like_x(chk, ctx, dy, "dy", x);
  chk.on_device(dx, "dx");
  chk.same_dtype(dx, "dx", w, "w");  // the gradient stream stays fp32 when x is bf16
  chk.shape_is(dx, "dx", x.shape());
  chk.contiguous(dx, "dx");
  chk.on_device(dw, "dw");
  if (ctx.is_cuda())
    chk.dtype_is(dw, "dw", {DType::F32, DType::BF16});  // bf16: --grad-dtype bf16
  else
    chk.same_dtype(dw, "dw", x, "x");
  chk.shape_is(dw, "dw", w.shape());
  chk.contiguous(dw, "dw");
  if (dx_lowp) {
    chk.require(ctx.is_cuda(), "dx_lowp (a bf16 copy of dx) is for the GPU");
    chk.on_device(*dx_lowp, "dx_lowp");
    chk.dtype_is(*dx_lowp, "dx_lowp", {DType::BF16});
    chk.shape_is(*dx_lowp, "dx_lowp", x.shape());
    chk.contiguous(*dx_lowp, "dx_lowp");
  }
  float* dx_amax_out = chk.amax_output(dx_amax, "dx_amax");
  // Read dy, x, w and rstd; dx written, or read and written when accumulated into (unless it is
  // dy itself, already read); dw likewise; the bf16 copy of dx written.
  OpCost cost;
  cost.read(dy).read(x).read(w).read(rstd);
  if (dw_accumulate)
    cost.update(dw);
  else
    cost.write(dw);
  if (accumulate && dx.data() != dy.data())
    cost.update(dx);
  else
    cost.write(dx);
  if (dx_lowp) cost.write(*dx_lowp);
  OpScope scope(ctx, "rmsnorm_backward", OpFamily::Norm, cost);
  if (!ctx.is_cuda()) {
    cpu::rmsnorm_backward(dx, dw, dy, x, w, rstd, accumulate, dw_accumulate, dx_amax_out);
    return;
  }
  // dw's per-block column sums (cuda/rmsnorm.h): each is written before it is read.
  Tensor partial = Tensor::empty({cuda::rmsnorm_dw_partial_rows(x.size(0)), x.size(1)}, DType::F32, ctx.device(),
                                 "rmsnorm_dw_partial", MemCategory::Workspace);
  cuda::rmsnorm_backward(ctx.stream(), dx, dw, dy, x, w, rstd, accumulate, partial.data_as<float>(), dx_lowp,
                         dw_accumulate, dx_amax_out);
}

}  // namespace pt::ops
