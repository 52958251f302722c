// GEMM through cuBLAS (not cuBLASLt): cublasGemmStridedBatchedEx covers every case the op
// allows (transposes, row strides, batch strides including 0, bf16 or fp32 operands with fp32
// accumulation, fp32 or bf16 C) in one call. Issue 6 may move hot shapes to cuBLASLt for its
// fused epilogues.
#include <cublas_v2.h>

#include "cuda/matmul.h"
#include "core/error.h"

namespace pt::cuda {

namespace {
cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    default: PT_FAIL(std::string("matmul on the GPU does not take ") + dtype_name(t));
  }
}
}  // namespace

void matmul(Context& ctx, const ops::GemmDesc& g) {
  // True FP32 unless the run asked for TF32; bf16 operands always accumulate in fp32.
  const cublasComputeType_t compute =
      (g.ab_dtype == DType::F32 && ctx.precision() == Precision::TF32)
          ? CUBLAS_COMPUTE_32F_FAST_TF32
          : CUBLAS_COMPUTE_32F;
  const cudaDataType_t ab = cuda_type(g.ab_dtype), c = cuda_type(g.c_dtype);
  // Column-major view: the roles of A and B swap, and m/n swap.
  PT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      ctx.cublas(), g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      int(g.n), int(g.m), int(g.k), &g.alpha, g.b, ab, int(g.ldb), g.stride_b, g.a, ab, int(g.lda),
      g.stride_a, &g.beta, g.c, c, int(g.ldc), g.stride_c, int(g.batch), compute,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace pt::cuda
