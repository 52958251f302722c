#include "ops/fp8_gemm.h"

#include <cmath>
#include <cstring>

#include "ops/fp8.h"
#include "ops/matmul.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::ArgCheck;

namespace {
constexpr int64_t kScalarStride = 4;  // floats between the scalars of cast_operand: 16 bytes

DType dtype_of(Fp8Format f) { return f == Fp8Format::E4M3 ? DType::F8E4M3 : DType::F8E5M2; }

// The host copy of x with every element quantised; *scale_inv set.
Tensor quantised_copy(const Tensor& x, Fp8Format fmt, float* scale_inv) {
  const std::vector<float> q = fp8_quantise_host(x.data_as<float>(), x.numel(), fmt, scale_inv);
  Tensor out = Tensor::empty(x.shape(), DType::F32, Device::cpu(), "fp8_emulated_operand");
  if (!q.empty()) std::memcpy(out.data(), q.data(), q.size() * sizeof(float));
  return out;
}

// The GPU's amax and cast of one operand into the K-major (rows, k) form: a plain cast when x is
// stored so, else a transposing one.
struct CastOperand {
  Tensor fp8, scale_inv;
};
CastOperand cast_operand(Context& ctx, const Tensor& x, bool transpose, Fp8Format fmt, const Tensor& scalars,
                         int64_t slot) {
  const int64_t rows = transpose ? x.size(1) : x.size(0), k = transpose ? x.size(0) : x.size(1);
  CastOperand o{Tensor::empty({rows, k}, dtype_of(fmt), ctx.device(), "fp8_operand", MemCategory::Workspace),
                scalars.narrow(0, kScalarStride * (2 * slot + 1), 1)};
  Tensor amax = scalars.narrow(0, kScalarStride * (2 * slot), 1);
  fp8_amax(ctx, amax, x);
  if (transpose)
    fp8_cast_transpose(ctx, o.fp8, o.scale_inv, x, amax);
  else
    fp8_cast(ctx, o.fp8, o.scale_inv, x, amax);
  return o;
}
}  // namespace

std::vector<float> fp8_quantise_host(const float* x, int64_t n, Fp8Format fmt, float* scale_inv) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));  // fmax skips NaN, as the GPU's
  const float scale = fp8_scale_from_amax(amax, fmt);
  *scale_inv = 1.0f / scale;
  std::vector<float> q(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) q[size_t(i)] = fp8_bits_to_float(float_to_fp8_bits(x[i] * scale, fmt), fmt);
  return q;
}

void matmul_fp8_of(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                   Fp8Kinds kinds, float alpha, float beta, const Tensor* c_in) {
  ArgCheck chk(ctx, "matmul_fp8_of");
  chk.rank_is(a, "A", 2);
  chk.rank_is(b, "B", 2);
  chk.contiguous(a, "A");
  chk.contiguous(b, "B");
  chk.require(!(kinds.a == Fp8Format::E5M2 && kinds.b == Fp8Format::E5M2),
              "A and B are both cast to E5M2; FP8 GEMMs take at most one E5M2 operand");
  if (!ctx.is_cuda()) {
    chk.dtype_is(a, "A", {DType::F32});
    chk.dtype_is(b, "B", {DType::F32});
    float sa = 1.0f, sb = 1.0f;
    const Tensor qa = quantised_copy(a, kinds.a, &sa), qb = quantised_copy(b, kinds.b, &sb);
    matmul(ctx, c, qa, qb, trans_a, trans_b, alpha * sa * sb, beta, c_in);
    return;
  }
  chk.dtype_is(a, "A", {DType::BF16, DType::F32});
  chk.dtype_is(b, "B", {DType::BF16, DType::F32});
  // Two amaxes and two inverse scales in one allocation, each on its own 16-byte boundary: the
  // scale pointers cuBLASLt reads get the alignment of a tensor of their own.
  Tensor scalars = Tensor::empty({4 * kScalarStride}, DType::F32, ctx.device(), "fp8_scales", MemCategory::Workspace);
  const CastOperand qa = cast_operand(ctx, a, trans_a, kinds.a, scalars, 0);   // op(A) as (m, k)
  const CastOperand qb = cast_operand(ctx, b, !trans_b, kinds.b, scalars, 1);  // op(B)ᵀ as (n, k)
  matmul_fp8(ctx, c, qa.fp8, qb.fp8, qa.scale_inv, qb.scale_inv, /*fast_accum=*/false, alpha, beta, c_in);
}

}  // namespace pt::ops
