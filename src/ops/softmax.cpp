#include "ops/softmax.h"

#include "core/profiler.h"
#include "cuda/softmax.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::ArgCheck;

void softmax_forward(Context& ctx, Tensor& probs, const Tensor& scores, double scale, bool causal) {
  ArgCheck chk(ctx, "softmax_forward");
  chk.float_storage(scores, "scores");
  chk.contiguous(scores, "scores");
  chk.require(scores.dim() >= 2, "scores must be (..., Tq, Tk), got " + shape_str(scores.shape()));
  chk.like(probs, "probs", scores, "scores");
  if (probs.data() == scores.data()) chk.same_dtype(probs, "probs", scores, "scores (in place)");
  if (scores.numel() == 0) return;
  OpScope scope(ctx, "softmax_forward", OpFamily::Softmax, OpCost().read(scores).write(probs));
  PT_OP_DISPATCH(ctx, softmax_forward, probs, scores, scale, causal);
}

void softmax_backward(Context& ctx, Tensor& dscores, const Tensor& dprobs, const Tensor& probs, double scale) {
  ArgCheck chk(ctx, "softmax_backward");
  chk.float_storage(probs, "probs");
  chk.contiguous(probs, "probs");
  chk.require(probs.dim() >= 1, "probs must have a last dimension");
  chk.like(dprobs, "dprobs", probs, "probs");
  chk.like(dscores, "dscores", probs, "probs");
  if (dscores.data() == dprobs.data()) chk.same_dtype(dscores, "dscores", dprobs, "dprobs (in place)");
  if (probs.numel() == 0) return;
  OpScope scope(ctx, "softmax_backward", OpFamily::Softmax, OpCost().read(dprobs).read(probs).write(dscores));
  PT_OP_DISPATCH(ctx, softmax_backward, dscores, dprobs, probs, scale);
}

}  // namespace pt::ops
