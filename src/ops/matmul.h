#pragma once
// GEMM: C = alpha · op(A) · op(B) + beta · C on row-major (optionally batched) tensors.
// CPU through BLAS (sgemm/dgemm); CUDA through cuBLAS/cuBLASLt.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// A, B, C are 2-D (M×K, K×N, M×N after the transposes) or 3-D with a leading batch
// dimension of equal size (a batch stride of 0 broadcasts that operand). The last
// dimension must have stride 1; the row stride may be larger (sub-matrix views), so
// per-head slices of a (B, T, H, D) tensor are legal operands without copies.
// A 2-D A or B with a 3-D C is broadcast over the batch (as a batch stride of 0).
// Types: A and B share one dtype: fp32 or fp64 (CPU), fp32 or bf16 (CUDA). C may be
// fp32 or that dtype on the GPU, and is that dtype on the CPU. Accumulation is in fp32
// (fp64 for fp64). Under Precision::TF32 an fp32 GEMM on the GPU uses TF32 tensor cores;
// under FP32 it never does. With beta = 0, C is not read (it may hold NaN).
// c_in (2-D, C's shape, strides and dtype): the C that beta scales, when it is not the output —
// c = alpha·op(A)·op(B) + beta·c_in, c_in untouched (a residual add into a new buffer without
// copying the residual first; cuBLASLt reads it in its epilogue, other paths copy it into c).
void matmul(Context& ctx, Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, float alpha = 1.0f,
            float beta = 0.0f, const Tensor* c_in = nullptr);

}  // namespace pt::ops
