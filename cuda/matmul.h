#pragma once
// cuBLAS GEMM behind ops::matmul (plain C++ header).
#include "core/context.h"
#include "ops/gemm_desc.h"

namespace pt::cuda {

// One cublasGemmStridedBatchedEx on ctx's stream. Row-major C = op(A)·op(B) is computed as the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, which reads the same memory with no copies.
void matmul(Context& ctx, const ops::GemmDesc& g);

}  // namespace pt::cuda
