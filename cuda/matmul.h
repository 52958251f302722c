#pragma once
// cuBLAS GEMM behind ops::matmul (plain C++ header).
#include <vector>

#include "core/context.h"
#include "core/gemm_desc.h"

namespace pt::cuda {

// One cublasGemmStridedBatchedEx on ctx's stream. Row-major C = op(A)·op(B) is computed as the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, which reads the same memory with no copies. The call is
// cuBLAS's or cuBLASLt's as ctx.gemm_select() says (core/context.h); under Autotune the first
// GEMM of each shape is timed (host-synchronising, once per shape and process).
void matmul(Context& ctx, const GemmDesc& g);

// The same GEMM through cuBLASLt: its heuristic's candidate algorithms for g (at most
// max_algos, the heuristic's first choice first), each timed over `iters` runs after two
// untimed ones on ctx's stream; milliseconds per run, +inf for a candidate that failed to run.
// Runs g (writes C); for `paratrain bench gemm`.
std::vector<double> time_cublaslt_algos(Context& ctx, const GemmDesc& g, int max_algos, int iters);
// The plain cuBLAS call, and matmul as ctx selects it, timed the same way, ms per run.
double time_cublas(Context& ctx, const GemmDesc& g, int iters);
double time_matmul(Context& ctx, const GemmDesc& g, int iters);

// The FP8 GEMM of g through cuBLASLt (its heuristic's first choice, chosen once per problem)
// on ctx's stream. Throws, naming the GPU, on one without FP8 tensor cores (below sm_89), and
// when cuBLASLt has no kernel for the problem.
void matmul_fp8(Context& ctx, const Fp8GemmDesc& g);
// matmul_fp8 timed as time_matmul is, ms per run; for `paratrain bench gemm --precision fp8`.
double time_matmul_fp8(Context& ctx, const Fp8GemmDesc& g, int iters);

}  // namespace pt::cuda
