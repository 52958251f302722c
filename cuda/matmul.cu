// GEMM through cuBLAS (not cuBLASLt): cublasGemmStridedBatchedEx covers every case the op
// allows (transposes, row strides, batch strides including 0, bf16 or fp32 operands with fp32
// accumulation, fp32 or bf16 C) in one call. Issue 6 may move hot shapes to cuBLASLt for its
// fused epilogues.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <limits>
#include <memory>

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
// True FP32 unless the run asked for TF32; bf16 operands always accumulate in fp32.
cublasComputeType_t compute_type(const Context& ctx, const ops::GemmDesc& g) {
  return (g.ab_dtype == DType::F32 && ctx.precision() == Precision::TF32) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                          : CUBLAS_COMPUTE_32F;
}

}  // namespace

void matmul(Context& ctx, const ops::GemmDesc& g) {
  const cublasComputeType_t compute = compute_type(ctx, g);
  const cudaDataType_t ab = cuda_type(g.ab_dtype), c = cuda_type(g.c_dtype);
  // Column-major view: the roles of A and B swap, and m/n swap.
  PT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      ctx.cublas(), g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      int(g.n), int(g.m), int(g.k), &g.alpha, g.b, ab, int(g.ldb), g.stride_b, g.a, ab, int(g.lda),
      g.stride_a, &g.beta, g.c, c, int(g.ldc), g.stride_c, int(g.batch), compute,
      CUBLAS_GEMM_DEFAULT));
}

namespace {

// Times `run` (enqueued on ctx's stream) over iters runs after two untimed ones, ms per run.
template <typename Run>
double time_runs(Context& ctx, int iters, Run&& run) {
  for (int i = 0; i < 2; ++i) run();
  cudaEvent_t start, stop;
  PT_CUDA_CHECK(cudaEventCreate(&start));
  PT_CUDA_CHECK(cudaEventCreate(&stop));
  PT_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
  for (int i = 0; i < iters; ++i) run();
  PT_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
  PT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  PT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) / iters;
}

// cuBLASLt descriptors of g in matmul's column-major view (A_lt = B, B_lt = A, C_lt = Cᵀ).
struct LtProblem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtProblem() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

void set_batch(cublasLtMatrixLayout_t l, int64_t batch, int64_t stride) {
  const int count = static_cast<int>(batch);
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                   sizeof(stride)));
}

void describe(const Context& ctx, const ops::GemmDesc& g, LtProblem& p) {
  PT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, compute_type(ctx, g), CUDA_R_32F));
  const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  PT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cudaDataType_t ab = cuda_type(g.ab_dtype), c = cuda_type(g.c_dtype);
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb));
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda));
  PT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, c, g.n, g.m, g.ldc));
  if (g.batch > 1) {
    set_batch(p.a, g.batch, g.stride_b);
    set_batch(p.b, g.batch, g.stride_a);
    set_batch(p.c, g.batch, g.stride_c);
  }
}

}  // namespace

std::vector<double> time_cublaslt_algos(Context& ctx, const ops::GemmDesc& g, int max_algos, int iters) {
  LtProblem p;
  describe(ctx, g, p);
  cublasLtMatmulPreference_t pref = nullptr;
  PT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
      pref_guard(pref, cublasLtMatmulPreferenceDestroy);
  const size_t ws = ctx.workspace_bytes();
  PT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<size_t>(max_algos));
  int n = 0;
  PT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt(), p.op, p.a, p.b, p.c, p.c, pref, max_algos,
                                                 found.data(), &n));
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const cublasLtMatmulAlgo_t* algo = &found[i].algo;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    auto run = [&] {
      if (status == CUBLAS_STATUS_SUCCESS)
        status = cublasLtMatmul(ctx.cublaslt(), p.op, &g.alpha, g.b, p.a, g.a, p.b, &g.beta, g.c, p.c, g.c, p.c,
                                algo, ctx.workspace(), ws, ctx.stream());
    };
    const double t = time_runs(ctx, iters, run);
    ms.push_back(status == CUBLAS_STATUS_SUCCESS ? t : std::numeric_limits<double>::infinity());
  }
  return ms;
}

double time_cublas(Context& ctx, const ops::GemmDesc& g, int iters) {
  return time_runs(ctx, iters, [&] { matmul(ctx, g); });
}

}  // namespace pt::cuda
