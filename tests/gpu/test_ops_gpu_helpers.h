#pragma once
// Shared by the GPU op tests (test_ops_gpu_<op>.cpp, one file per op family): inputs rounded
// to the storage type (so the CPU reference sees exactly the values the kernel reads), fp64
// CPU references, and tolerance checks. Conventions of every such test: outputs poisoned with
// NaN first; sizes include multiples of 8 (the 16-byte pack path), odd sizes and misaligned
// views (the element-at-a-time fallback); aliasing cases run in place; tolerances kTolF32 /
// kTolBF16 below unless a comment says otherwise.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/test_util.h"

namespace pt::test {

// The values a tensor of `dtype` actually holds after make_tensor(values).
inline std::vector<double> stored(const std::vector<double>& v, DType dtype) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = dtype == DType::BF16  ? double(round_to_bf16(float(v[i])))
             : dtype == DType::F32 ? double(float(v[i]))
                                   : v[i];
  return out;
}

// A GPU tensor of `dtype` and the fp64 CPU tensor holding the same (rounded) values.
struct Pair {
  Tensor gpu, cpu;
};
inline Pair make_twin(Context& gpu, Context& cpu, const Shape& shape, DType dtype, const std::vector<double>& v) {
  return {make_tensor(gpu, shape, dtype, v), make_tensor(cpu, shape, DType::F64, stored(v, dtype))};
}
// Uninitialised GPU output poisoned with NaN, and its fp64 CPU twin.
inline Pair make_output(Context& gpu, Context& cpu, const Shape& shape, DType dtype) {
  Pair p{Tensor::empty(shape, dtype, gpu.device()), Tensor::empty(shape, DType::F64, cpu.device())};
  poison(gpu, p.gpu);
  return p;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Elementwise |got − ref| ≤ rtol·|ref| + atol_frac·max|ref|: relative where values are
// large, absolute (relative to the tensor's scale) where they cancel to near zero.
#define PT_EXPECT_GPU_CLOSE(got_tensor, ref_tensor, ctx_gpu, ctx_cpu, rtol, atol_frac)               \
  do {                                                                                               \
    const auto pt_ref_ = (ref_tensor).to_host_f64(ctx_cpu);                                          \
    const auto pt_got_ = (got_tensor).to_host_f64(ctx_gpu);                                          \
    EXPECT_LE(::pt::test::allclose_ratio(pt_got_, pt_ref_, (rtol),                                   \
                                         (atol_frac)*std::max(::pt::test::max_abs(pt_ref_), 1e-30)), \
              1.0);                                                                                  \
  } while (0)

// Tolerances, by what the kernel stores (inputs are identical on both sides):
//  fp32 storage, fp32 math: a few ulps per reduction step   → rtol 1e-5
//  bf16 storage of the result: one rounding, u = 2^-8 ≈ 4e-3 → rtol 1e-2
constexpr double kTolF32 = 1e-5;
constexpr double kTolBF16 = 1e-2;
inline double tol_for(DType t) { return t == DType::BF16 ? kTolBF16 : kTolF32; }

}  // namespace pt::test
