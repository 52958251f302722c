#pragma once
// CPU references of the FP8 layer (cuda/fp8.h, ops/matmul_fp8.h): the cast with current
// scaling, and the scaled GEMM in fp64 of the dequantised operands.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp8.h"

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

}  // namespace pt::test
