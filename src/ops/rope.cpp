#include "ops/rope.h"

#include "core/profiler.h"
#include "cuda/rope.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops {

namespace {
// A 3-D (B, T, D) view is the H = 1 case, as in the attention ops.
Tensor as_4d(const Tensor& t) {
  if (t.dim() != 3) return t;
  return t.as_strided({t.size(0), 1, t.size(1), t.size(2)},
                      {t.stride(0), t.size(1) * t.stride(1), t.stride(1), t.stride(2)});
}
}  // namespace

void rope(Context& ctx, Tensor& out, const Tensor& in, double theta, bool inverse) {
  detail::ArgCheck chk(ctx, "rope");
  chk.float_storage(in, "in");
  chk.float_storage(out, "out");
  chk.same_dtype(out, "out", in, "in");
  chk.require(in.dim() == 4 || in.dim() == 3,
              "in must be a (B, H, T, D) or (B, T, D) view, got " + shape_str(in.shape()));
  chk.require(out.shape() == in.shape(),
              "out has shape " + shape_str(out.shape()) + " but in has " + shape_str(in.shape()));
  chk.require(in.stride(-1) == 1 && out.stride(-1) == 1, "the last dimension (D) must have stride 1");
  chk.require(in.size(-1) % 2 == 0,
              "D = " + std::to_string(in.size(-1)) + " must be even (dimensions rotate in pairs)");
  chk.require(theta > 0, "theta must be positive");
  Tensor in4 = as_4d(in), out4 = as_4d(out);
  if (in4.numel() == 0) return;
  // Read in, write out: in place (out = in, the model's use) that is one update of the view.
  OpScope scope(ctx, "rope", OpFamily::Elementwise, OpCost().read(in4).write(out4));
  PT_OP_DISPATCH(ctx, rope, out4, in4, theta, inverse);
}

RopeTable rope_table(Context& ctx, int64_t positions, int64_t head_dim, double theta) {
  PT_CHECK(positions >= 1 && head_dim >= 2 && head_dim % 2 == 0,
           "rope table: needs positions >= 1 and an even head dimension, got " + std::to_string(positions) + " and " +
               std::to_string(head_dim));
  PT_CHECK(theta > 0, "rope table: theta must be positive");
  RopeTable r;
  r.theta = theta;
  r.cos_sin =
      Tensor::empty({positions, head_dim / 2, 2}, DType::F32, ctx.device(), "rope_table", MemCategory::Workspace);
  PT_OP_DISPATCH(ctx, rope_table, r.cos_sin, theta);
  return r;
}

}  // namespace pt::ops
