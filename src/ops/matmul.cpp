#include "ops/matmul.h"

#include <climits>

#include "core/profiler.h"
#include "cuda/matmul.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops {

namespace {

// One operand as the GEMM sees it: stored (rows, cols) with a row stride and a batch stride.
struct Operand {
  int64_t batch, rows, cols, ld, batch_stride;
};

Operand describe_operand(const detail::ArgCheck& chk, const Tensor& t, const char* name) {
  chk.require(t.dim() == 2 || t.dim() == 3,
              std::string(name) + " must be 2-D or 3-D (batched), got " + shape_str(t.shape()));
  const bool batched = t.dim() == 3;
  Operand o{batched ? t.size(0) : 1, t.size(-2), t.size(-1), t.stride(-2), batched ? t.stride(0) : 0};
  chk.require(
      t.stride(-1) == 1 || o.cols <= 1,
      std::string(name) + " must have unit stride in its last dimension, got strides " + shape_str(t.strides()));
  // A single row may carry any row stride; BLAS still wants ld ≥ cols.
  if (o.rows <= 1) o.ld = std::max<int64_t>(o.ld, o.cols);
  chk.require(o.ld >= o.cols, std::string(name) + " has row stride " + std::to_string(o.ld) +
                                  " smaller than its row length " + std::to_string(o.cols) + " (overlapping rows)");
  o.ld = std::max<int64_t>(o.ld, 1);
  if (o.batch == 1) o.batch_stride = 0;
  return o;
}

GemmDesc make_desc(const detail::ArgCheck& chk, Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, bool trans_a,
                   bool trans_b, float alpha, float beta) {
  chk.float_storage(a, "A");
  chk.float_storage(b, "B");
  chk.float_storage(c, "C");
  chk.same_dtype(b, "B", a, "A");
  if (ctx.is_cuda())
    chk.require(c.dtype() == DType::F32 || c.dtype() == a.dtype(), std::string("C is ") + dtype_name(c.dtype()) +
                                                                       " but A and B are " + dtype_name(a.dtype()) +
                                                                       " (C must be fp32 or the operands' type)");
  else
    chk.same_dtype(c, "C", a, "A");

  const Operand oa = describe_operand(chk, a, "A"), ob = describe_operand(chk, b, "B"),
                oc = describe_operand(chk, c, "C");
  const int64_t m = trans_a ? oa.cols : oa.rows, ka = trans_a ? oa.rows : oa.cols;
  const int64_t kb = trans_b ? ob.cols : ob.rows, n = trans_b ? ob.rows : ob.cols;
  auto shapes = [&] {
    return " (A " + shape_str(a.shape()) + (trans_a ? "^T" : "") + ", B " + shape_str(b.shape()) +
           (trans_b ? "^T" : "") + ", C " + shape_str(c.shape()) + ")";
  };
  chk.require(ka == kb, "inner dimensions differ: op(A) is " + std::to_string(m) + "×" + std::to_string(ka) +
                            ", op(B) is " + std::to_string(kb) + "×" + std::to_string(n) + shapes());
  chk.require(oc.rows == m && oc.cols == n, "C must be " + std::to_string(m) + "×" + std::to_string(n) + shapes());
  if (c.dim() == 2) chk.require(a.dim() == 2 && b.dim() == 2, "a 2-D C needs 2-D A and B" + shapes());
  const int64_t batch = oc.batch;
  chk.require((a.dim() == 2 || oa.batch == batch) && (b.dim() == 2 || ob.batch == batch),
              "batch sizes differ" + shapes());
  // Entries of C may interleave (per-head slices) but must not coincide.
  chk.require(batch == 1 || oc.batch_stride != 0, "C cannot be broadcast over the batch" + shapes());
  for (int64_t v : {m, n, ka, batch, oa.ld, ob.ld, oc.ld})
    chk.require(v <= INT_MAX, "dimension or leading dimension beyond 2^31" + shapes());

  // In GemmDesc's order: dimensions, transposes, types, scalars, then each operand's pointer,
  // leading dimension and batch stride.
  // clang-format off
  return GemmDesc{batch, m, n, ka, trans_a, trans_b, a.dtype(), c.dtype(), alpha, beta,
                  a.data(), oa.ld, oa.batch_stride,
                  b.data(), ob.ld, ob.batch_stride,
                  c.data(), oc.ld, oc.batch_stride};
  // clang-format on
}

}  // namespace

void matmul(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, float alpha,
            float beta, const Tensor* c_in) {
  detail::ArgCheck chk(ctx, "matmul");
  GemmDesc g = make_desc(chk, ctx, c, a, b, trans_a, trans_b, alpha, beta);
  if (c_in && c_in->data() != c.data()) {
    chk.require(c.dim() == 2, "a separate C input (c_in) is for 2-D GEMMs");
    chk.on_device(*c_in, "c_in");
    chk.same_dtype(*c_in, "c_in", c, "C");
    chk.require(
        c_in->shape() == c.shape() && c_in->strides() == c.strides(),
        "c_in must have C's shape and strides: " + shape_str(c_in->shape()) + " against " + shape_str(c.shape()));
    if (beta != 0.0f) g.c_in = c_in->data();
  }
  if (g.batch == 0 || g.m == 0 || g.n == 0) return;
  // 2·m·n·k per batch entry; A and B read once each (an operand with batch stride 0 is one
  // matrix for the whole batch), C written, and read too when beta ≠ 0.
  OpCost cost;
  const double batch = static_cast<double>(g.batch), ab = static_cast<double>(dtype_size(g.ab_dtype));
  cost.flops = 2.0 * batch * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  cost.bytes = ab * static_cast<double>(g.m * g.k) * (g.stride_a == 0 ? 1.0 : batch) +
               ab * static_cast<double>(g.k * g.n) * (g.stride_b == 0 ? 1.0 : batch) +
               (g.beta != 0.0f ? 2.0 : 1.0) * batch * static_cast<double>(g.m * g.n) *
                   static_cast<double>(dtype_size(g.c_dtype));
  OpScope scope(ctx, "matmul", OpFamily::Matmul, cost);
  if (ctx.is_cuda()) {
    cuda::matmul(ctx, g);
    return;
  }
  if (g.c_in) {  // the CPU's GEMM reads C where it writes it
    c.copy_from(*c_in, ctx);
    g.c_in = nullptr;
  }
  cpu::matmul(g);
}

}  // namespace pt::ops
