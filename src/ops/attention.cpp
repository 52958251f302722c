// Naive attention from the matmul and softmax ops, one batched GEMM per batch entry over the
// heads: the per-head matrices of a (B, H, T, D) view are a 3-D strided view (H, T, D) of
// entry b, which matmul takes as is (batch stride = the head stride, row stride = the
// token stride). Device independent: the ops dispatch.
#include "ops/attention.h"

#include <cmath>

#include "core/profiler.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/op_common.h"
#include "ops/softmax.h"

namespace pt::ops {

using detail::ArgCheck;

namespace {

// A 3-D (B, T, D) view is the H = 1 case.
Tensor as_4d(const Tensor& t) {
  if (t.dim() != 3) return t;
  return t.as_strided({t.size(0), 1, t.size(1), t.size(2)},
                      {t.stride(0), t.size(1) * t.stride(1), t.stride(1), t.stride(2)});
}

void check_view(const ArgCheck& chk, const Tensor& t, const char* name) {
  chk.float_storage(t, name);
  chk.require(t.dim() == 4 || t.dim() == 3,
              std::string(name) + " must be a (B, H, T, D) or (B, T, D) view, got " + shape_str(t.shape()));
  chk.require(t.stride(-1) == 1,
              std::string(name) + " must have stride 1 in its last dimension, got strides " + shape_str(t.strides()));
}

// A GEMM result (out, dq, dk, dv): the inputs' type, or fp32 on the GPU (what matmul writes).
void check_result(const ArgCheck& chk, const Tensor& t4, const char* name, const Shape& shape, const Tensor& q) {
  check_view(chk, t4, name);
  chk.shape_is(t4, name, shape);
  chk.require(t4.dtype() == q.dtype() || t4.dtype() == DType::F32,
              std::string(name) + " is " + dtype_name(t4.dtype()) + "; expected " + dtype_name(q.dtype()) + " or fp32");
  chk.cpu_same_dtype(t4, name, q, "q");
}

struct Dims {
  int64_t B, H, Tq, Tk, D, Dv;
};

Dims check_inputs(const ArgCheck& chk, const Tensor& q, const Tensor& k, const Tensor& v) {
  check_view(chk, q, "q");
  check_view(chk, k, "k");
  check_view(chk, v, "v");
  chk.same_dtype(k, "k", q, "q");
  chk.same_dtype(v, "v", q, "q");
  chk.require(q.dim() == k.dim() && q.dim() == v.dim(), "q, k and v must have the same rank");
  const Tensor q4 = as_4d(q), k4 = as_4d(k), v4 = as_4d(v);
  const Dims d{q4.size(0), q4.size(1), q4.size(2), k4.size(2), q4.size(3), v4.size(3)};
  chk.require(k4.size(0) == d.B && v4.size(0) == d.B && k4.size(1) == d.H && v4.size(1) == d.H,
              "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + " and v " + shape_str(v.shape()) +
                  " differ in batch or heads");
  chk.require(k4.size(3) == d.D,
              "q and k differ in head dimension: " + shape_str(q.shape()) + " vs " + shape_str(k.shape()));
  chk.require(v4.size(2) == d.Tk, "k and v differ in length: " + shape_str(k.shape()) + " vs " + shape_str(v.shape()));
  chk.require(d.D > 0, "head dimension must be positive");
  return d;
}

void check_probs(const ArgCheck& chk, const Tensor& probs, const Tensor& q, const Dims& d) {
  chk.on_device(probs, "probs");
  chk.require(
      probs.dtype() == q.dtype() || probs.dtype() == DType::F32,
      std::string("probs is ") + dtype_name(probs.dtype()) + "; expected " + dtype_name(q.dtype()) + " or fp32");
  chk.cpu_same_dtype(probs, "probs", q, "q");
  chk.shape_is(probs, "probs", {d.B, d.H, d.Tq, d.Tk});
  chk.contiguous(probs, "probs");
}

// Softmax statistics need fp32 or better: fp32/fp64 probs can hold the scores first.
bool wide(DType t) { return t == DType::F32 || t == DType::F64; }

}  // namespace

void naive_attention_forward(Context& ctx, Tensor& out, Tensor& probs, const Tensor& q, const Tensor& k,
                             const Tensor& v, bool causal) {
  ArgCheck chk(ctx, "naive_attention_forward");
  const Dims d = check_inputs(chk, q, k, v);
  check_probs(chk, probs, q, d);
  const Tensor q4 = as_4d(q), k4 = as_4d(k), v4 = as_4d(v);
  Tensor out4 = as_4d(out);
  check_result(chk, out4, "out", {d.B, d.H, d.Tq, d.Dv}, q);
  if (d.B * d.H * d.Tq == 0) return;
  NvtxRange range("naive attention forward");
  const double scale = 1.0 / std::sqrt(double(d.D));
  const Shape head_block{d.H, d.Tq, d.Tk};  // one batch entry's scores or probs
  // Scores go straight into probs (softmax in place) when probs is wide; else an fp32 buffer.
  Tensor scores_buf;
  if (!wide(probs.dtype())) scores_buf = Tensor::empty(head_block, DType::F32, ctx.device(), "attn_scores");
  // probs·V needs probs in V's type (fp32 probs with bf16 V happens only by the caller's choice).
  Tensor p_cast;
  if (probs.dtype() != v.dtype()) p_cast = Tensor::empty(head_block, v.dtype(), ctx.device(), "attn_probs_cast");

  // The scopes below time (and cost) the ops inside them as one: the costs are those ops' own.
  // Every (query, key) product is computed: the GEMMs do not skip the causally masked half.
  const double heads = static_cast<double>(d.H), tq = static_cast<double>(d.Tq), tk = static_cast<double>(d.Tk);
  for (int64_t b = 0; b < d.B; ++b) {
    Tensor p_b = probs.select(0, b);
    Tensor s_b = scores_buf.defined() ? scores_buf : p_b;
    {
      const Tensor q_b = q4.select(0, b), k_b = k4.select(0, b);
      OpCost cost;  // S (H, Tq, Tk) = Q Kᵀ: read Q and K, write S
      cost.read(q_b).read(k_b).write(s_b);
      cost.flops = 2.0 * heads * tq * tk * static_cast<double>(d.D);
      OpScope scope(ctx, "computing attention scores", OpFamily::Matmul, cost);
      matmul(ctx, s_b, q_b, k_b, false, true);  // (H, Tq, Tk) = Q Kᵀ
    }
    {
      OpCost cost;  // read S, write P (the same buffer when P is fp32: then S is updated in place)
      cost.read(s_b).write(p_b);
      OpScope scope(ctx, "computing softmax", OpFamily::Softmax, cost);
      softmax_forward(ctx, p_b, s_b, scale, causal);
    }
  }
  // Per batch entry: O (H, Tq, Dv) = P V (read P and V, write O), after a cast of P to V's type
  // when they differ (read P, write the copy, which the GEMM then reads); B entries alike.
  OpCost pv_cost;
  {
    const Tensor p_0 = probs.select(0, 0);
    pv_cost.read(p_0);
    if (p_cast.defined()) pv_cost.update(p_cast);
    pv_cost.read(v4.select(0, 0)).write(out4.select(0, 0));
    pv_cost.flops = 2.0 * heads * tq * tk * static_cast<double>(d.Dv);
    pv_cost.flops *= static_cast<double>(d.B);
    pv_cost.bytes *= static_cast<double>(d.B);
  }
  OpScope scope(ctx, "final matmul", OpFamily::Matmul, pv_cost);
  for (int64_t b = 0; b < d.B; ++b) {
    Tensor p_b = probs.select(0, b);
    if (p_cast.defined()) {
      cast(ctx, p_cast, p_b);
      p_b = p_cast;
    }
    Tensor o_b = out4.select(0, b);
    matmul(ctx, o_b, p_b, v4.select(0, b), false, false);  // (H, Tq, Dv) = P V
  }
}

void naive_attention_backward(Context& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                              const Tensor& k, const Tensor& v, const Tensor& probs, bool causal) {
  ArgCheck chk(ctx, "naive_attention_backward");
  const Dims d = check_inputs(chk, q, k, v);
  check_probs(chk, probs, q, d);
  const Tensor q4 = as_4d(q), k4 = as_4d(k), v4 = as_4d(v);
  Tensor dq4 = as_4d(dq), dk4 = as_4d(dk), dv4 = as_4d(dv);
  const Tensor dout4 = as_4d(dout);
  check_view(chk, dout, "dout");
  chk.same_dtype(dout, "dout", q, "q");
  chk.shape_is(dout4, "dout", {d.B, d.H, d.Tq, d.Dv});
  check_result(chk, dq4, "dq", q4.shape(), q);
  check_result(chk, dk4, "dk", k4.shape(), q);
  check_result(chk, dv4, "dv", v4.shape(), q);
  if (d.B * d.H == 0) return;
  NvtxRange range("naive attention backward");
  const double scale = 1.0 / std::sqrt(double(d.D));
  const Shape head_block{d.H, d.Tq, d.Tk};
  const DType op_type = q.dtype();  // GEMM operand type: P and dS must match it
  // dP = dO Vᵀ in fp32 (or fp64); dS overwrites it when the operands are wide, else its own buffer.
  const DType wide_type = op_type == DType::F64 ? DType::F64 : DType::F32;
  Tensor dp = Tensor::empty(head_block, wide_type, ctx.device(), "attn_dprobs");
  Tensor ds = wide(op_type) ? dp : Tensor::empty(head_block, op_type, ctx.device(), "attn_dscores");
  Tensor p_cast;
  if (probs.dtype() != op_type) p_cast = Tensor::empty(head_block, op_type, ctx.device(), "attn_probs_cast");
  (void)causal;  // masked probabilities are exactly 0, so their gradients vanish by themselves

  for (int64_t b = 0; b < d.B; ++b) {
    const Tensor p_saved = probs.select(0, b);
    Tensor p_b = p_saved;
    if (p_cast.defined()) {
      cast(ctx, p_cast, p_saved);
      p_b = p_cast;
    }
    const Tensor do_b = dout4.select(0, b), q_b = q4.select(0, b), k_b = k4.select(0, b), v_b = v4.select(0, b);
    Tensor dq_b = dq4.select(0, b), dk_b = dk4.select(0, b), dv_b = dv4.select(0, b);
    matmul(ctx, dv_b, p_b, do_b, true, false);      // dV (H, Tk, Dv) = Pᵀ dO
    matmul(ctx, dp, do_b, v_b, false, true);        // dP (H, Tq, Tk) = dO Vᵀ
    softmax_backward(ctx, ds, dp, p_saved, scale);  // dS = scale·P⊙(dP − rowsum(dP⊙P))
    matmul(ctx, dq_b, ds, k_b, false, false);       // dQ (H, Tq, D) = dS K
    matmul(ctx, dk_b, ds, q_b, true, false);        // dK (H, Tk, D) = dSᵀ Q
  }
}

}  // namespace pt::ops
