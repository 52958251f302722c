#include "ops/loss.h"

#include "core/profiler.h"
#include "cuda/loss.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::ArgCheck;

namespace {
// fp32 on the GPU; the input's type (fp32|fp64) on the CPU.
void check_loss_scalar(const ArgCheck& chk, const Context& ctx, const Tensor& loss, const Tensor& input,
                       const char* input_name) {
  if (ctx.is_cuda())
    chk.dtype_is(loss, "loss", {DType::F32});
  else
    chk.same_dtype(loss, "loss", input, input_name);
  chk.on_device(loss, "loss");
  chk.require(loss.numel() == 1, "loss must have exactly one element, got shape " + shape_str(loss.shape()));
}
}  // namespace

void cross_entropy(Context& ctx, Tensor& loss, Tensor* dlogits, const Tensor& logits, const Tensor& targets,
                   float grad_scale) {
  ArgCheck chk(ctx, "cross_entropy");
  chk.float_storage(logits, "logits");
  chk.matrix(logits, "logits");
  const int64_t n = logits.size(0), v = logits.size(1);
  chk.require(n > 0 && v > 0, "logits " + shape_str(logits.shape()) + " is empty");
  chk.dtype_is(targets, "targets", {DType::I32});
  chk.shape_is(targets, "targets", {n});
  chk.contiguous(targets, "targets");
  check_loss_scalar(chk, ctx, loss, logits, "logits");
  if (dlogits && dlogits->defined()) {
    chk.on_device(*dlogits, "dlogits");
    chk.same_dtype(*dlogits, "dlogits", logits, "logits");
    chk.shape_is(*dlogits, "dlogits", logits.shape());
    chk.contiguous(*dlogits, "dlogits");
  } else {
    dlogits = nullptr;
  }
  if (!ctx.is_cuda()) {
    const int32_t* t = targets.data_as<const int32_t>();
    for (int64_t i = 0; i < n; ++i)
      chk.require(t[i] >= 0 && t[i] < v, "target " + std::to_string(t[i]) + " at position " + std::to_string(i) +
                                             " is outside [0, " + std::to_string(v) + ")");
  }
  // Read the logits and targets, write the loss and dlogits: over the logits in the model's use,
  // which is one update of them.
  OpCost cost;
  cost.read(logits).read(targets).write(loss);
  if (dlogits) cost.write(*dlogits);
  OpScope scope(ctx, "cross_entropy", OpFamily::Loss, cost);
  PT_OP_DISPATCH(ctx, cross_entropy, loss, dlogits, logits, targets, grad_scale);
}

void mse_loss(Context& ctx, Tensor& loss, Tensor* dpred, const Tensor& pred, const Tensor& target,
              Reduction reduction) {
  ArgCheck chk(ctx, "mse_loss");
  chk.float_storage(pred, "pred");
  chk.contiguous(pred, "pred");
  chk.require(pred.numel() > 0, "pred is empty");
  chk.float_storage(target, "target");
  chk.contiguous(target, "target");
  chk.shape_is(target, "target", pred.shape());
  if (!ctx.is_cuda()) chk.same_dtype(target, "target", pred, "pred");
  check_loss_scalar(chk, ctx, loss, pred, "pred");
  if (dpred && dpred->defined()) {
    chk.float_storage(*dpred, "dpred");
    chk.shape_is(*dpred, "dpred", pred.shape());
    chk.contiguous(*dpred, "dpred");
    chk.same_dtype(*dpred, "dpred", pred, "pred");
  } else {
    dpred = nullptr;
  }
  OpCost cost;
  cost.read(pred).read(target).write(loss);
  if (dpred) cost.write(*dpred);
  OpScope scope(ctx, "mse_loss", OpFamily::Loss, cost);
  if (ctx.is_cuda())
    cuda::mse_loss(ctx.stream(), loss, dpred, pred, target, reduction == Reduction::Mean);
  else
    cpu::mse_loss(loss, dpred, pred, target, reduction);
}

}  // namespace pt::ops
