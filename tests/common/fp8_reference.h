#pragma once
// CPU references of the FP8 layer (cuda/fp8.h, ops/matmul_fp8.h): the cast with current
// scaling, and the scaled GEMM in fp64 of the dequantised operands.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp8.h"
#include "core/tensor.h"

namespace pt::test {

// The largest |x|: what the amax kernel writes (NaN ignored, as fmaxf does on the device).
inline float amax_reference(const std::vector<float>& x) {
  float m = 0.0f;
  for (float v : x) m = std::fmax(m, std::fabs(v));
  return m;
}

// What the cast stores for x under current scaling from amax: the fp32 product x·scale, rounded
// once in fp32 as the device does, then rounded to fp8. Rounding the exact product directly
// would differ where x·scale lands within half an fp32 ulp of an fp8 midpoint.
inline std::vector<uint8_t> cast_reference(const std::vector<float>& x, float amax, Fp8Format fmt) {
  const float scale = fp8_scale_from_amax(amax, fmt);
  std::vector<uint8_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = float_to_fp8_bits(x[i] * scale, fmt);
  return out;
}

// (rows, cols) row-major → (cols, rows) row-major.
template <typename T>
std::vector<T> transpose_reference(const std::vector<T>& x, int64_t rows, int64_t cols) {
  std::vector<T> out(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(c * rows + r)] = x[size_t(r * cols + c)];
  return out;
}

// C (m, n) = a_scale_inv · b_scale_inv · A (m, k) · B (n, k)ᵀ on the dequantised fp8 values, in
// fp64 (each product of two fp8 values is exact in fp64; the sums round at 2^-53).
inline std::vector<double> fp8_gemm_reference(const std::vector<uint8_t>& a, Fp8Format fa, float a_scale_inv,
                                              const std::vector<uint8_t>& b, Fp8Format fb, float b_scale_inv, int64_t m,
                                              int64_t n, int64_t k) {
  std::vector<double> da(a.size()), db(b.size()), c(size_t(m * n));
  for (size_t i = 0; i < a.size(); ++i) da[i] = fp8_bits_to_float(a[i], fa);
  for (size_t i = 0; i < b.size(); ++i) db[i] = fp8_bits_to_float(b[i], fb);
  const double scale = double(a_scale_inv) * double(b_scale_inv);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += da[size_t(i * k + p)] * db[size_t(j * k + p)];
      c[size_t(i * n + j)] = scale * s;
    }
  return c;
}

// One ops::matmul-shaped problem for ops::matmul_fp8_of: A stored (k, m) when trans_a else
// (m, k); B stored (n, k) when trans_b else (k, n); c0 (m, n) is what beta scales.
struct Fp8MatmulProblem {
  int64_t m, n, k;
  bool trans_a, trans_b;
  std::vector<double> a, b, c0;
  Shape a_shape() const { return trans_a ? Shape{k, m} : Shape{m, k}; }
  Shape b_shape() const { return trans_b ? Shape{n, k} : Shape{k, n}; }
  double op_a(const std::vector<double>& v, int64_t i, int64_t p) const {
    return v[size_t(trans_a ? p * m + i : i * k + p)];
  }
  double op_b(const std::vector<double>& v, int64_t p, int64_t j) const {
    return v[size_t(trans_b ? j * k + p : p * n + j)];
  }
};

// Each element replaced by its dequantised fp8 value under current scaling, computed from the
// definition: scale = fp8_max / amax in fp32, fp8(x · scale) with x · scale rounded in fp32, then
// divided by the scale in fp64.
inline std::vector<double> dequantised_reference(const std::vector<double>& x, Fp8Format fmt) {
  std::vector<float> xf(x.begin(), x.end());
  const float scale = fp8_scale_from_amax(amax_reference(xf), fmt);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = double(fp8_bits_to_float(float_to_fp8_bits(xf[i] * scale, fmt), fmt)) / scale;
  return out;
}

// alpha · op(A) · op(B) + beta · c0 in fp64 on the given operand values (dequantised or exact);
// *mag (optional) gets |alpha| · Σ_p |op(A)_ip · op(B)_pj| + |beta · c0_ij|, the scale of the
// rounding errors.
inline std::vector<double> matmul_reference(const Fp8MatmulProblem& g, const std::vector<double>& a,
                                            const std::vector<double>& b, double alpha, double beta,
                                            std::vector<double>* mag = nullptr) {
  std::vector<double> c(size_t(g.m * g.n));
  if (mag) mag->assign(c.size(), 0.0);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0, sabs = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double t = g.op_a(a, i, p) * g.op_b(b, p, j);
        s += t;
        sabs += std::fabs(t);
      }
      const size_t ij = size_t(i * g.n + j);
      const double c0 = beta != 0.0 ? beta * g.c0[ij] : 0.0;
      c[ij] = alpha * s + c0;
      if (mag) (*mag)[ij] = std::fabs(alpha) * sabs + std::fabs(c0);
    }
  return c;
}

}  // namespace pt::test
