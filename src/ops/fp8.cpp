#include "ops/fp8.h"

#include <climits>

#include "core/fp8.h"
#include "core/gemm_desc.h"
#include "core/profiler.h"
#include "cuda/fp8.h"
#include "cuda/matmul.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::aligned16;
using detail::ArgCheck;

namespace {
// The amax and the casts run on any GPU (the conversion is exact in software below sm_89, so
// the tests hold every GPU to the host conversion); the GEMM needs FP8 tensor cores.
void check_gpu(const ArgCheck& chk, const Context& ctx) {
  chk.require(ctx.is_cuda(), "FP8 runs on the GPU only (the CPU context has no FP8 path)");
}
void check_cast(const ArgCheck& chk, const Context& ctx, const Tensor& out, const Tensor& scale_inv, const Tensor& x,
                const Tensor& amax) {
  check_gpu(chk, ctx);
  chk.dtype_is(x, "x", {DType::F32, DType::BF16});
  chk.contiguous(x, "x");
  chk.dtype_is(out, "out", {DType::F8E4M3, DType::F8E5M2});
  chk.contiguous(out, "out");
  chk.fp32_scalars(scale_inv, "scale_inv");
  chk.fp32_scalars(amax, "amax");
}
OpCost cast_cost(const Tensor& out, const Tensor& x) { return OpCost().read(x).write(out); }
}  // namespace

void fp8_amax(Context& ctx, Tensor& amax, const Tensor& x) {
  ArgCheck chk(ctx, "fp8_amax");
  check_gpu(chk, ctx);
  chk.dtype_is(x, "x", {DType::F32, DType::BF16});
  chk.contiguous(x, "x");
  chk.fp32_scalars(amax, "amax");
  OpScope scope(ctx, "fp8_amax", OpFamily::Elementwise, OpCost().read(x));
  cuda::fp8_amax(ctx.stream(), amax.data_as<float>(), x);
}

void fp8_cast(Context& ctx, Tensor& out, Tensor& scale_inv, const Tensor& x, const Tensor& amax) {
  ArgCheck chk(ctx, "fp8_cast");
  check_cast(chk, ctx, out, scale_inv, x, amax);
  chk.shape_is(out, "out", x.shape());
  OpScope scope(ctx, "fp8_cast", OpFamily::Elementwise, cast_cost(out, x));
  cuda::fp8_cast(ctx.stream(), out, scale_inv.data_as<float>(), x, amax.data_as<float>());
}

void fp8_cast_transpose(Context& ctx, Tensor& out, Tensor& scale_inv, const Tensor& x, const Tensor& amax,
                        Tensor* plain) {
  ArgCheck chk(ctx, "fp8_cast_transpose");
  check_cast(chk, ctx, out, scale_inv, x, amax);
  chk.rank_is(x, "x", 2);
  chk.shape_is(out, "out", {x.size(1), x.size(0)});
  OpCost cost = cast_cost(out, x);
  if (plain) {
    chk.dtype_is(*plain, "plain", {out.dtype()});
    chk.shape_is(*plain, "plain", x.shape());
    chk.contiguous(*plain, "plain");
    cost.write(*plain);
  }
  OpScope scope(ctx, "fp8_cast_transpose", OpFamily::Elementwise, cost);
  cuda::fp8_cast_transpose(ctx.stream(), out, plain, scale_inv.data_as<float>(), x, amax.data_as<float>());
}

void fp8_cast_weight(Context& ctx, Tensor& stored, Tensor& transposed, Tensor& scale_inv, Tensor& amax, const Tensor& w,
                     cudaStream_t stream, bool amax_measured) {
  ArgCheck chk(ctx, "fp8_cast_weight");
  check_gpu(chk, ctx);
  chk.dtype_is(w, "w", {DType::F32});
  chk.rank_is(w, "w", 2);
  chk.contiguous(w, "w");
  chk.dtype_is(stored, "stored", {DType::F8E4M3});
  chk.shape_is(stored, "stored", w.shape());
  chk.contiguous(stored, "stored");
  chk.dtype_is(transposed, "transposed", {DType::F8E4M3});
  chk.shape_is(transposed, "transposed", {w.size(1), w.size(0)});
  chk.contiguous(transposed, "transposed");
  chk.fp32_scalars(scale_inv, "scale_inv");
  chk.fp32_scalars(amax, "amax");
  // w read twice (the amax pass, then the cast), or once when the update measured the amax.
  OpCost cost = OpCost().read(w).write(stored).write(transposed);
  if (!amax_measured) cost.read(w);
  detail::run_on_stream(ctx, stream, "fp8_cast_weight", OpFamily::Elementwise, cost, [&](cudaStream_t s) {
    cuda::fp8_cast_weight(s, stored, transposed, scale_inv.data_as<float>(), amax.data_as<float>(), w, amax_measured);
  });
}

namespace {
// A 2-D operand with unit stride in its last dimension; its row stride.
int64_t row_stride(const ArgCheck& chk, const Tensor& t, const char* name) {
  chk.rank_is(t, name, 2);
  chk.require(
      t.stride(1) == 1 || t.size(1) <= 1,
      std::string(name) + " must have unit stride in its last dimension, got strides " + shape_str(t.strides()));
  return std::max<int64_t>(t.stride(0), t.size(1));
}
}  // namespace

void matmul_fp8(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
                const Tensor& b_scale_inv, bool fast_accum, float alpha, float beta, const Tensor* c_in) {
  ArgCheck chk(ctx, "matmul_fp8");
  check_gpu(chk, ctx);
  const std::string why = fp8_unsupported_reason(ctx.target());
  chk.require(why.empty(), why);
  chk.dtype_is(a, "A", {DType::F8E4M3, DType::F8E5M2});
  chk.dtype_is(b, "B", {DType::F8E4M3, DType::F8E5M2});
  chk.require(!(a.dtype() == DType::F8E5M2 && b.dtype() == DType::F8E5M2),
              "A and B are both fp8e5m2; cuBLASLt's FP8 GEMMs take at most one E5M2 operand");
  chk.dtype_is(c, "C", {DType::F32, DType::BF16});
  chk.fp32_scalars(a_scale_inv, "a_scale_inv");
  chk.fp32_scalars(b_scale_inv, "b_scale_inv");
  const int64_t lda = row_stride(chk, a, "A"), ldb = row_stride(chk, b, "B"), ldc = row_stride(chk, c, "C");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  const std::string shapes =
      " (A " + shape_str(a.shape()) + ", B " + shape_str(b.shape()) + "ᵀ, C " + shape_str(c.shape()) + ")";
  chk.require(b.size(1) == k, "A and B must both be K-major with the same k: A is (m, k), B is (n, k)" + shapes);
  chk.require(c.size(0) == m && c.size(1) == n, "C must be " + std::to_string(m) + "×" + std::to_string(n) + shapes);
  chk.require(k > 0 && k % 16 == 0 && lda % 16 == 0 && ldb % 16 == 0,
              "k and the row strides of A and B must be positive multiples of 16 (cuBLASLt's FP8 kernels read "
              "16-byte aligned rows)" +
                  shapes);
  chk.require(ldc * int64_t(dtype_size(c.dtype())) % 16 == 0, "C's row stride must be a multiple of 16 bytes" + shapes);
  chk.require(aligned16(a.data()) && aligned16(b.data()) && aligned16(c.data()),
              "A, B and C must start on 16-byte boundaries" + shapes);
  for (int64_t v : {m, n, k, lda, ldb, ldc}) chk.require(v <= INT_MAX, "dimension beyond 2^31" + shapes);
  const bool reads_c_in = c_in && beta != 0.0f;
  if (reads_c_in) {
    chk.require(c_in->dtype() == c.dtype() && c_in->shape() == c.shape() && c_in->strides() == c.strides(),
                "c_in must have C's type, shape and strides" + shapes);
    chk.require(aligned16(c_in->data()), "c_in must start on a 16-byte boundary" + shapes);
  }
  if (m == 0 || n == 0) return;
  OpCost cost;
  cost.flops = cost.fp8_flops = 2.0 * double(m) * double(n) * double(k);
  // One byte an operand element; C in its own type, read too when accumulated into.
  cost.bytes = double(m * k + n * k) + double(m * n) * double(dtype_size(c.dtype())) * (beta != 0.0f ? 2.0 : 1.0);
  OpScope scope(ctx, "matmul_fp8", OpFamily::Matmul, cost);
  // clang-format off
  const Fp8GemmDesc g{m, n, k, a.dtype(), b.dtype(), c.dtype(), a.data(), lda, b.data(), ldb, c.data(), ldc,
                      a_scale_inv.data_as<float>(), b_scale_inv.data_as<float>(), fast_accum, alpha, beta,
                      reads_c_in ? c_in->data() : nullptr};
  // clang-format on
  cuda::matmul_fp8(ctx, g);
}

}  // namespace pt::ops
