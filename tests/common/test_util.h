#pragma once
// Test helpers: random tensors, relative errors, fp64 finite differences, GPU skipping.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"

namespace pt::test {

// Skips the current test unless a CUDA device is usable (GPU suites call this first).
#define PT_REQUIRE_GPU()                                                   \
  do {                                                                     \
    if (::pt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";  \
  } while (0)

// Host values drawn from N(0, std²), deterministic in seed.
std::vector<double> randn(int64_t n, uint64_t seed, double std = 1.0);
std::vector<double> uniform(int64_t n, uint64_t seed, double lo, double hi);
std::vector<int32_t> random_ids(int64_t n, int32_t vocab, uint64_t seed);

// A contiguous tensor of `dtype` on ctx's device holding `values` (converted).
Tensor make_tensor(Context& ctx, const Shape& shape, DType dtype, const std::vector<double>& values);
Tensor make_ids(Context& ctx, const Shape& shape, const std::vector<int32_t>& ids);
// Fill a tensor with NaN ("poison") so that an unwritten output element fails a comparison.
void poison(Context& ctx, Tensor& t);

// ‖a − b‖₂ / ‖b‖₂ (b is the reference); NaN anywhere gives +inf.
double rel_error(const std::vector<double>& a, const std::vector<double>& ref);
// max_i |a_i − b_i| / (atol + rtol·|b_i|): ≤ 1 means allclose(a, b, rtol, atol).
double allclose_ratio(const std::vector<double>& a, const std::vector<double>& ref, double rtol,
                      double atol);
#define PT_EXPECT_ALLCLOSE(a, ref, rtol, atol) \
  EXPECT_LE(::pt::test::allclose_ratio((a), (ref), (rtol), (atol)), 1.0)

// Central finite differences of a scalar function f(x) in fp64: returns df/dx_i for each i.
std::vector<double> finite_difference(const std::function<double(const std::vector<double>&)>& f,
                                      std::vector<double> x, double h = 1e-6);

// Path of a file in the source tree (tests run from the build tree).
std::string source_path(const std::string& relative);
// A fresh empty directory for one test's files (removed by the OS temp cleaner, not by us).
std::string scratch_dir(const std::string& test_name);

}  // namespace pt::test
