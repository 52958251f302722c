#include "ops/elementwise.h"

#include "core/profiler.h"
#include "cuda/elementwise.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::ArgCheck;

namespace {
struct Operand {
  const Tensor& t;
  const char* name;
};
void first(const ArgCheck& chk, const Tensor& t, const char* name) {
  chk.float_storage(t, name);
  chk.contiguous(t, name);
}
// The operands of an elementwise op: the first (float storage, contiguous), and the others like
// it (its shape; on the CPU its dtype).
void elementwise_operands(const ArgCheck& chk, std::initializer_list<Operand> operands) {
  const Operand& ref = *operands.begin();
  first(chk, ref.t, ref.name);
  for (auto it = operands.begin() + 1; it != operands.end(); ++it) chk.like(it->t, it->name, ref.t, ref.name);
}
}  // namespace

void add(Context& ctx, Tensor& out, const Tensor& a, const Tensor& b) {
  ArgCheck chk(ctx, "add");
  elementwise_operands(chk, {{out, "out"}, {a, "a"}, {b, "b"}});
  // out = a + b: read a and b, write out (out aliasing a or b changes nothing: each is moved once).
  OpScope scope(ctx, "add", OpFamily::Elementwise, OpCost().read(a).read(b).write(out));
  PT_OP_DISPATCH(ctx, add, out, a, b);
}

void add_inplace(Context& ctx, Tensor& x, const Tensor& y, float alpha) {
  ArgCheck chk(ctx, "add_inplace");
  elementwise_operands(chk, {{x, "x"}, {y, "y"}});
  OpScope scope(ctx, "add_inplace", OpFamily::Elementwise, OpCost().update(x).read(y));
  PT_OP_DISPATCH(ctx, add_inplace, x, y, alpha);
}

void scale_inplace(Context& ctx, Tensor& x, float alpha) {
  ArgCheck chk(ctx, "scale_inplace");
  first(chk, x, "x");
  OpScope scope(ctx, "scale_inplace", OpFamily::Elementwise, OpCost().update(x));
  PT_OP_DISPATCH(ctx, scale_inplace, x, alpha);
}

void cast(Context& ctx, Tensor& dst, const Tensor& src, float scale) {
  ArgCheck chk(ctx, "cast");
  if (ctx.is_cuda()) {
    chk.float_storage(dst, "dst");
    chk.float_storage(src, "src");
  } else {  // host conversions exist for every float type
    chk.dtype_is(dst, "dst", {DType::F32, DType::F64, DType::BF16, DType::F16});
    chk.dtype_is(src, "src", {DType::F32, DType::F64, DType::BF16, DType::F16});
  }
  chk.contiguous(dst, "dst");
  chk.contiguous(src, "src");
  chk.require(dst.numel() == src.numel(),
              "dst has " + std::to_string(dst.numel()) + " elements but src has " + std::to_string(src.numel()));
  OpScope scope(ctx, "cast", OpFamily::Elementwise, OpCost().read(src).write(dst));
  PT_OP_DISPATCH(ctx, cast, dst, src, scale);
}

void add_bias(Context& ctx, Tensor& y, const Tensor& bias) {
  ArgCheck chk(ctx, "add_bias");
  first(chk, y, "y");
  chk.rank_is(y, "y", 2);
  chk.float_storage(bias, "bias");
  chk.shape_is(bias, "bias", {y.size(1)});
  if (!ctx.is_cuda()) chk.same_dtype(bias, "bias", y, "y");
  OpScope scope(ctx, "add_bias", OpFamily::Elementwise, OpCost().update(y).read(bias));
  PT_OP_DISPATCH(ctx, add_bias, y, bias);
}

void bias_backward(Context& ctx, Tensor& dbias, const Tensor& dy) {
  ArgCheck chk(ctx, "bias_backward");
  first(chk, dy, "dy");
  chk.rank_is(dy, "dy", 2);
  if (ctx.is_cuda())
    chk.dtype_is(dbias, "dbias", {DType::F32});  // accumulated with fp32 atomics
  else
    chk.same_dtype(dbias, "dbias", dy, "dy");
  chk.shape_is(dbias, "dbias", {dy.size(1)});
  OpScope scope(ctx, "bias_backward", OpFamily::Elementwise, OpCost().read(dy).update(dbias));
  PT_OP_DISPATCH(ctx, bias_backward, dbias, dy);
}

void relu_forward(Context& ctx, Tensor& y, const Tensor& x) {
  ArgCheck chk(ctx, "relu_forward");
  elementwise_operands(chk, {{y, "y"}, {x, "x"}});
  OpScope scope(ctx, "relu_forward", OpFamily::Elementwise, OpCost().read(x).write(y));
  PT_OP_DISPATCH(ctx, relu_forward, y, x);
}

void relu_backward(Context& ctx, Tensor& dx, const Tensor& dy, const Tensor& y) {
  ArgCheck chk(ctx, "relu_backward");
  elementwise_operands(chk, {{dx, "dx"}, {dy, "dy"}, {y, "y"}});
  OpScope scope(ctx, "relu_backward", OpFamily::Elementwise, OpCost().read(dy).read(y).write(dx));
  PT_OP_DISPATCH(ctx, relu_backward, dx, dy, y);
}

void swiglu_forward(Context& ctx, Tensor& g, const Tensor& h1, const Tensor& h3, Tensor* g_amax) {
  ArgCheck chk(ctx, "swiglu_forward");
  elementwise_operands(chk, {{g, "g"}, {h1, "h1"}, {h3, "h3"}});
  chk.same_dtype(h3, "h3", h1, "h1");
  float* amax = chk.amax_output(g_amax, "g_amax");
  OpScope scope(ctx, "swiglu_forward", OpFamily::Elementwise, OpCost().read(h1).read(h3).write(g));
  PT_OP_DISPATCH(ctx, swiglu_forward, g, h1, h3, amax);
}

void swiglu_backward(Context& ctx, Tensor& dh1, Tensor& dh3, const Tensor& dg, const Tensor& h1, const Tensor& h3,
                     Tensor* g, Tensor* dh_amax) {
  ArgCheck chk(ctx, "swiglu_backward");
  elementwise_operands(chk, {{dg, "dg"}, {dh1, "dh1"}, {dh3, "dh3"}, {h1, "h1"}, {h3, "h3"}});
  chk.same_dtype(dh1, "dh1", dg, "dg");
  chk.same_dtype(dh3, "dh3", dg, "dg");
  chk.same_dtype(h3, "h3", h1, "h1");
  OpCost cost = OpCost().read(dg).read(h1).read(h3).write(dh1).write(dh3);
  if (g) {
    elementwise_operands(chk, {{*g, "g"}, {h1, "h1"}});
    chk.same_dtype(*g, "g", h1, "h1");
    chk.require(g->data() != dg.data() && g->data() != h1.data() && g->data() != h3.data(),
                "g must not alias dg, h1 or h3");
    cost.write(*g);
  }
  float* amax = chk.amax_output(dh_amax, "dh_amax", 2);
  OpScope scope(ctx, "swiglu_backward", OpFamily::Elementwise, cost);
  PT_OP_DISPATCH(ctx, swiglu_backward, dh1, dh3, dg, h1, h3, g, amax);
}

}  // namespace pt::ops
