// CPU GEMM: one CBLAS call per batch entry, row-major with the views' row strides.
#include <cblas.h>

#include "ops/cpu/cpu_ops.h"

namespace pt::ops::cpu {

namespace {

void gemm(const GemmDesc& g, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, int(g.m),
              int(g.n), int(g.k), g.alpha, a, int(g.lda), b, int(g.ldb), g.beta, c, int(g.ldc));
}
void gemm(const GemmDesc& g, const double* a, const double* b, double* c) {
  cblas_dgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, int(g.m),
              int(g.n), int(g.k), double(g.alpha), a, int(g.lda), b, int(g.ldb), double(g.beta), c, int(g.ldc));
}

template <typename T>
void batched(const GemmDesc& g) {
  for (int64_t i = 0; i < g.batch; ++i)
    gemm(g, static_cast<const T*>(g.a) + i * g.stride_a, static_cast<const T*>(g.b) + i * g.stride_b,
         static_cast<T*>(g.c) + i * g.stride_c);
}

}  // namespace

void matmul(const GemmDesc& g) {
  if (g.ab_dtype == DType::F64)
    batched<double>(g);
  else
    batched<float>(g);
}

}  // namespace pt::ops::cpu
