#pragma once
// FP8 with per-tensor current scaling (GPU only): a tensor's amax, its cast to E4M3/E5M2 with
// the scale computed on the device from that amax (plain or transposed), and the scaled FP8 GEMM
// through cuBLASLt. The scale of each cast and its inverse never leave the device: amax → cast →
// matmul_fp8 on one stream needs no host synchronisation.
#include <cuda_runtime_api.h>

#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// amax: fp32 tensor of one element = max |x| over x (fp32|bf16, contiguous; NaN skipped).
void fp8_amax(Context& ctx, Tensor& amax, const Tensor& x);

// out = fp8(x · scale) with scale = fp8_max / amax (448 for E4M3, 57344 for E5M2; 1 for amax 0);
// scale_inv (fp32, one element) = 1 / scale, what matmul_fp8 multiplies back. out F8E4M3 |
// F8E5M2 of x's shape; x fp32|bf16 contiguous; amax from fp8_amax (or any upper bound of |x|).
void fp8_cast(Context& ctx, Tensor& out, Tensor& scale_inv, const Tensor& x, const Tensor& amax);
// The same for a 2-D x (rows, cols) written transposed: out (cols, rows); with `plain` (x's shape,
// out's type) also as x is laid out, from the same read of x.
void fp8_cast_transpose(Context& ctx, Tensor& out, Tensor& scale_inv, const Tensor& x, const Tensor& amax,
                        Tensor* plain = nullptr);

// A weight's E4M3 casts from its fp32 master values w (rows, cols) as the bf16 mirror holds them
// (each rounded to bf16 first; the same bits as fp8_amax and fp8_cast_transpose of the mirror):
// amax, then `stored` (rows, cols) and `transposed` (cols, rows) from one read. On `stream`
// (null: the compute stream; on another the caller orders it with events, and no kernel timer
// sees it). amax_measured: amax holds max |bf16(w)| already (the update measured it), no pass.
void fp8_cast_weight(Context& ctx, Tensor& stored, Tensor& transposed, Tensor& scale_inv, Tensor& amax, const Tensor& w,
                     cudaStream_t stream = nullptr, bool amax_measured = false);

// C (m, n) = a_scale_inv · b_scale_inv · A (m, k) · B (n, k)ᵀ with fp32 accumulation: both
// operands K-major, the layout of Hopper's FP8 tensor cores (a Linear's forward is x · Wᵀ as it
// stands; the other GEMMs of a Linear take transposed casts). A, B 2-D F8E4M3|F8E5M2 (not both
// E5M2: cuBLASLt has no such kernel), unit stride in the last dimension, row strides and k
// multiples of 16 (cuBLASLt's FP8 kernels read 16-byte aligned rows); C fp32|bf16, 2-D, its row
// stride a multiple of 16 bytes. The scales are fp32 tensors of one element (cast's scale_inv).
// fast_accum: cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM. One clear error on a GPU without FP8
// tensor cores (below compute capability 8.9), naming it.
// alpha, beta, c_in: C = alpha · (the above) + beta · c_in, as ops::matmul's epilogue: c_in
// (C's shape, strides and type) when set, else C itself; C is not read with beta = 0.
void matmul_fp8(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
                const Tensor& b_scale_inv, bool fast_accum = false, float alpha = 1.0f, float beta = 0.0f,
                const Tensor* c_in = nullptr);

}  // namespace pt::ops
