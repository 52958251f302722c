#pragma once
// cuBLAS GEMM behind ops::matmul (plain C++ header).
#include <vector>

#include "core/context.h"
#include "ops/gemm_desc.h"

namespace pt::cuda {

// One cublasGemmStridedBatchedEx on ctx's stream. Row-major C = op(A)·op(B) is computed as the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, which reads the same memory with no copies.
void matmul(Context& ctx, const ops::GemmDesc& g);

// The same GEMM through cuBLASLt: its heuristic's candidate algorithms for g (at most
// max_algos, the heuristic's first choice first), each timed over `iters` runs after two
// untimed ones on ctx's stream; milliseconds per run, +inf for a candidate that failed to run.
// Runs g (writes C); for `paratrain bench gemm`.
std::vector<double> time_cublaslt_algos(Context& ctx, const ops::GemmDesc& g, int max_algos, int iters);
// The cuBLAS path (matmul) timed the same way, ms per run.
double time_cublas(Context& ctx, const ops::GemmDesc& g, int iters);

}  // namespace pt::cuda
