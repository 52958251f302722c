#pragma once
// Benchmark inputs: deterministic random values, cheap enough for 10⁸ elements, put into a
// tensor of any storage type on the context's device. Timings never run on zeros: they lower
// the power draw and flatter the clocks.
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"

namespace pt::bench {

// n unit-variance values (uniform on ±√3) from a 64-bit LCG seeded by `seed`.
std::vector<double> bench_values(int64_t n, uint64_t seed);
// A tensor of `shape` and `dtype` on ctx's device (fp32, fp64 or bf16) holding `values`.
Tensor filled(Context& ctx, const Shape& shape, DType dtype, const std::vector<double>& values, const char* name);
// A host tensor of `times` copies of a contiguous host tensor's rows (dim 0), one after another:
// (R, …) → (times · R, …). Any dtype.
Tensor repeat_rows(const Tensor& host, int64_t times);

}  // namespace pt::bench
