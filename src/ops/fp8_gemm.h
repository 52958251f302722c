#pragma once
// ops::matmul with FP8 operands: the GEMM of a Linear taken as ops::matmul takes it (bf16
// operands, row-major, op(A)·op(B)), each operand scaled by its current amax and cast to E4M3 or
// E5M2 in the K-major form Hopper's FP8 GEMM reads, then one scaled FP8 GEMM with fp32
// accumulation and ops::matmul's epilogue (alpha, beta, c_in).
#include <vector>

#include "core/context.h"
#include "core/fp8.h"
#include "core/tensor.h"

namespace pt::ops {

// The format each operand is cast to: A (the left operand as ops::matmul takes it), B.
struct Fp8Kinds {
  Fp8Format a = Fp8Format::E4M3, b = Fp8Format::E4M3;
};

// c = alpha · op(A) · op(B) + beta · (c_in or c), the operands in FP8 with per-tensor current
// scaling: scale = fp8_max / amax (fp32), operand = fp8(x · scale), the product multiplied back by
// both inverse scales. A, B 2-D and contiguous; C 2-D with unit stride in its last dimension.
// GPU: A, B bf16 (or fp32); C bf16 or fp32; op(A) is cast as (m, k) and op(B) as (n, k) (a plain
// or a transposing cast, as the transposes ask) into tracked buffers, so k must be a multiple of
// 16 (matmul_fp8's rules). CPU (fp32 or fp64): the same quantisation through the host
// conversions, dequantised and multiplied in the context's type — the oracle the GPU path and
// the models' FP8 mode are tested against; fp8 runs are a GPU mode, this is for tests.
void matmul_fp8_of(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                   Fp8Kinds kinds, float alpha = 1.0f, float beta = 0.0f, const Tensor* c_in = nullptr);

// One operand cast once for every GEMM that reads it (a gradient dy feeds dX = dy·W and
// dW = dyᵀ·x; one amax and one read of dy serve both). GPU: `stored` is fp8(x·scale) as x is laid
// out (rows, cols) and `transposed` the same (cols, rows), each present when asked for;
// scale_inv (1) fp32 on the device. CPU: `stored` holds the fp8 values as fp32 (the emulation)
// whatever is asked, and host_scale_inv the inverse scale. amax (1, fp32, on x's device): the
// amax the scale came from, which a later cast of the same values may take instead of its own.
// FP8 scalars (amaxes, inverse scales) kept in one allocation sit this many floats apart, each on
// its own 16-byte boundary: cuBLASLt refuses a scale pointer that is not
// (CUBLAS_STATUS_NOT_SUPPORTED at the matmul).
constexpr int64_t kFp8ScalarStride = 4;
struct Fp8Operand {
  Tensor stored, transposed, scale_inv, amax;
  float host_scale_inv = 1.0f;
  Fp8Format format = Fp8Format::E4M3;
};
// x 2-D contiguous (GPU: bf16|fp32; CPU: fp32); stored/transposed: which layouts the GEMMs need.
// amax (optional, fp32 (1) on x's device): max |x| known already — written by the kernel that
// wrote x, or an earlier operand's `amax` for the same values — so no pass measures it again.
// space (optional, GPU): the bytes the layouts are written into instead of new allocations, as
// stored first, then transposed (contiguous, 16-byte aligned, room for both, x.numel() a multiple
// of 16 when both); the operand keeps it alive.
Fp8Operand fp8_operand(Context& ctx, const Tensor& x, Fp8Format format, bool stored, bool transposed,
                       const Tensor& amax = Tensor(), const Tensor& space = Tensor());
// matmul_fp8_of on operands already cast: op(A) reads a.stored (trans_a false) or a.transposed,
// op(B) b.transposed (trans_b false) or b.stored, whichever is K-major; that layout must exist.
void matmul_fp8_operands(Context& ctx, Tensor& c, const Fp8Operand& a, const Fp8Operand& b, bool trans_a, bool trans_b,
                         float alpha = 1.0f, float beta = 0.0f, const Tensor* c_in = nullptr);

// The CPU emulation's quantisation of n host values, as the GPU's amax and cast compute it:
// returns the fp8 values fp8(x · scale) (unscaled, as floats) and sets *scale_inv = 1 / scale.
// known_amax: max |x| given (as fp8_operand's amax), else measured; *amax_out receives the one used.
std::vector<float> fp8_quantise_host(const float* x, int64_t n, Fp8Format fmt, float* scale_inv,
                                     const float* known_amax = nullptr, float* amax_out = nullptr);

}  // namespace pt::ops
