#include "ops/fp8_gemm.h"

#include <cmath>
#include <cstring>

#include "ops/fp8.h"
#include "ops/matmul.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::ArgCheck;

std::vector<float> fp8_quantise_host(const float* x, int64_t n, Fp8Format fmt, float* scale_inv,
                                     const float* known_amax, float* amax_out) {
  float amax = 0.0f;
  if (known_amax)
    amax = *known_amax;
  else
    for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));  // fmax skips NaN, as the GPU's
  if (amax_out) *amax_out = amax;
  const float scale = fp8_scale_from_amax(amax, fmt);
  *scale_inv = 1.0f / scale;
  std::vector<float> q(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) q[size_t(i)] = fp8_bits_to_float(float_to_fp8_bits(x[i] * scale, fmt), fmt);
  return q;
}

Fp8Operand fp8_operand(Context& ctx, const Tensor& x, Fp8Format format, bool stored, bool transposed,
                       const Tensor& amax, const Tensor& space) {
  ArgCheck chk(ctx, "fp8_operand");
  chk.rank_is(x, "x", 2);
  chk.contiguous(x, "x");
  if (amax.defined()) chk.fp32_scalars(amax, "amax");
  Fp8Operand o;
  o.format = format;
  if (!ctx.is_cuda()) {
    chk.dtype_is(x, "x", {DType::F32});
    o.amax = Tensor::empty({1}, DType::F32, Device::cpu(), "fp8_amax");
    const std::vector<float> q =
        fp8_quantise_host(x.data_as<float>(), x.numel(), format, &o.host_scale_inv,
                          amax.defined() ? amax.data_as<float>() : nullptr, o.amax.data_as<float>());
    o.stored = Tensor::empty(x.shape(), DType::F32, Device::cpu(), "fp8_emulated_operand");
    if (!q.empty()) std::memcpy(o.stored.data(), q.data(), q.size() * sizeof(float));
    return o;
  }
  chk.dtype_is(x, "x", {DType::BF16, DType::F32});
  chk.require(stored || transposed, "asks for neither layout");
  // The amax and the inverse scale in one allocation (kFp8ScalarStride).
  Tensor scalars =
      Tensor::empty({2 * kFp8ScalarStride}, DType::F32, ctx.device(), "fp8_scales", MemCategory::Workspace);
  o.scale_inv = scalars.narrow(0, kFp8ScalarStride, 1);
  if (amax.defined()) {
    o.amax = amax;
  } else {
    o.amax = scalars.narrow(0, 0, 1);
    fp8_amax(ctx, o.amax, x);
  }
  const DType t = fp8_dtype(format);
  const int64_t n = x.numel();
  if (space.defined()) {
    chk.on_device(space, "space");
    chk.require(space.is_contiguous() && detail::aligned16(space.data()) &&
                    int64_t(space.nbytes()) >= (int64_t(stored) + int64_t(transposed)) * n &&
                    (!(stored && transposed) || n % 16 == 0),
                "space " + space.describe() + " cannot hold the layouts of x " + x.describe() +
                    " (contiguous, 16-byte aligned, room for each, 16 | numel for both)");
    if (stored) o.stored = space.reinterpret(0, x.shape(), t);
    if (transposed) o.transposed = space.reinterpret(stored ? n : 0, {x.size(1), x.size(0)}, t);
  } else {
    if (stored) o.stored = Tensor::empty(x.shape(), t, ctx.device(), "fp8_operand", MemCategory::Workspace);
    if (transposed)
      o.transposed = Tensor::empty({x.size(1), x.size(0)}, t, ctx.device(), "fp8_operand_t", MemCategory::Workspace);
  }
  if (transposed)
    fp8_cast_transpose(ctx, o.transposed, o.scale_inv, x, o.amax, stored ? &o.stored : nullptr);
  else
    fp8_cast(ctx, o.stored, o.scale_inv, x, o.amax);
  return o;
}

void matmul_fp8_operands(Context& ctx, Tensor& c, const Fp8Operand& a, const Fp8Operand& b, bool trans_a, bool trans_b,
                         float alpha, float beta, const Tensor* c_in) {
  ArgCheck chk(ctx, "matmul_fp8_operands");
  chk.require(!(a.format == Fp8Format::E5M2 && b.format == Fp8Format::E5M2),
              "A and B are both E5M2; FP8 GEMMs take at most one E5M2 operand");
  if (!ctx.is_cuda()) {
    matmul(ctx, c, a.stored, b.stored, trans_a, trans_b, alpha * a.host_scale_inv * b.host_scale_inv, beta, c_in);
    return;
  }
  const Tensor& ka = trans_a ? a.transposed : a.stored;  // op(A) as (m, k)
  const Tensor& kb = trans_b ? b.stored : b.transposed;  // op(B)ᵀ as (n, k)
  chk.require(ka.defined(), std::string("A was not cast ") + (trans_a ? "transposed" : "as stored"));
  chk.require(kb.defined(), std::string("B was not cast ") + (trans_b ? "as stored" : "transposed"));
  matmul_fp8(ctx, c, ka, kb, a.scale_inv, b.scale_inv, /*fast_accum=*/false, alpha, beta, c_in);
}

void matmul_fp8_of(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                   Fp8Kinds kinds, float alpha, float beta, const Tensor* c_in) {
  // fp8_operand checks each operand, matmul_fp8_operands the pair.
  const Fp8Operand qa = fp8_operand(ctx, a, kinds.a, !trans_a, trans_a);
  const Fp8Operand qb = fp8_operand(ctx, b, kinds.b, trans_b, !trans_b);
  matmul_fp8_operands(ctx, c, qa, qb, trans_a, trans_b, alpha, beta, c_in);
}

}  // namespace pt::ops
