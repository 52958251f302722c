#pragma once
// A validated, row-major, (batched) GEMM as both backends (cuda/matmul.h, the CPU's) receive it
// from ops::matmul:
// C[i] = alpha · op(A[i]) · op(B[i]) + beta · C[i] for i < batch (beta · c_in when c_in is set).
#include <cstdint>

#include "core/dtype.h"

namespace pt {

struct GemmDesc {
  int64_t batch, m, n, k;  // op(A) (m, k), op(B) (k, n), C (m, n)
  bool trans_a, trans_b;   // A stored (k, m) / B stored (n, k) when set
  DType ab_dtype, c_dtype;
  float alpha, beta;
  // ld*: row stride of the stored matrix (≥ its column count); stride_*: batch stride in
  // elements (0 broadcasts A or B; never 0 for C when batch > 1).
  const void* a;
  int64_t lda, stride_a;
  const void* b;
  int64_t ldb, stride_b;
  void* c;
  int64_t ldc, stride_c;
  // The C that beta scales, when it is not the output (2-D, C's layout): D = alpha·op(A)·op(B) +
  // beta·c_in into c, c_in left as it is; ops::matmul sets it only apart from c and with beta ≠ 0
  // (nullptr: c itself). cuBLASLt reads it in its epilogue; the cuBLAS call and the CPU copy it
  // into c first.
  const void* c_in = nullptr;
};

// An FP8 GEMM as cuda::matmul_fp8 receives it from ops::matmul_fp8, row-major:
// C (m, n) = alpha · (*a_scale_inv) · (*b_scale_inv) · A (m, k) · B (n, k)ᵀ + beta · C_in, fp32
// accumulation; C_in is c_in (C's type and layout) when set, else C itself.
// Both operands are K-major (rows of length k): the one layout Hopper's FP8 tensor-core GEMMs
// take (cuBLASLt's "TN"); a caller holding a K-by-M operand casts it transposed
// (cuda/fp8.h). a_dtype, b_dtype: F8E4M3|F8E5M2, not both E5M2; c_dtype: F32|BF16.
struct Fp8GemmDesc {
  int64_t m, n, k;
  DType a_dtype, b_dtype, c_dtype;
  const void* a;
  int64_t lda;  // row strides in elements
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  const float* a_scale_inv;  // device, one float each: what cuda::fp8_cast wrote
  const float* b_scale_inv;
  // cuBLASLt's fast accumulation: partial sums stay in the tensor cores' reduced-precision
  // accumulator instead of being promoted to fp32 every few k-steps.
  bool fast_accum;
  float alpha = 1.0f, beta = 0.0f;
  const void* c_in = nullptr;  // read only with beta ≠ 0; nullptr: C itself
};

}  // namespace pt
