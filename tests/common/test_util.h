#pragma once
// Test helpers: random tensors, relative errors, fp64 finite differences, GPU skipping.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"

#include "model/transformer.h"

namespace pt {
// gtest prints a DType test parameter by its name ("bf16"), not as a 1-byte object (found by ADL).
inline void PrintTo(DType d, std::ostream* os) { *os << dtype_name(d); }
}  // namespace pt

namespace pt::test {

// Skips the current test unless a CUDA device is usable (GPU suites call this first).
#define PT_REQUIRE_GPU()                                                  \
  do {                                                                    \
    if (::pt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
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
double allclose_ratio(const std::vector<double>& a, const std::vector<double>& ref, double rtol, double atol);
#define PT_EXPECT_ALLCLOSE(a, ref, rtol, atol) EXPECT_LE(::pt::test::allclose_ratio((a), (ref), (rtol), (atol)), 1.0)

// Central finite differences of a scalar function f(x) in fp64: returns df/dx_i for each i.
std::vector<double> finite_difference(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
                                      double h = 1e-6);

// A .npy file written the way numpy does (format 1.0 or 2.0, header padded to 64 bytes), with
// any header dictionary text, so tests can also produce every malformed variant.
void write_npy_raw(const std::string& path, const std::string& dict, const std::string& payload, int major = 1);
template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
// A well-formed 1-D .npy of `v` with numpy dtype string `descr` ("<u2", "<i4", "<i8").
template <typename T>
void write_npy(const std::string& path, const std::vector<T>& v, const char* descr, int major = 1) {
  write_npy_raw(
      path,
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(v.size()) + ",), }",
      bytes_of(v), major);
}

// Runs the paratrain CLI ($PARATRAIN_BINARY: the build's binary unless the environment says
// otherwise) with `args` (shell words); returns its exit code and stdout+stderr.
struct CliResult {
  int rc = -1;
  std::string output;
};
std::string paratrain_binary();
CliResult run_paratrain(const std::string& args);
// The same under `$PARATRAIN_MPIEXEC -n ranks` (CPU ranks over MPI; tests/CMakeLists.txt).
CliResult run_paratrain_mpi(int ranks, const std::string& args);

// The message of the pt::Error that fn throws, or "" when it throws none.
std::string error_of(const std::function<void()>& fn);

// A small Transformer for tests: every dimension named, the rest TransformerConfig's defaults.
TransformerConfig test_transformer(int64_t vocab, int64_t context, int64_t d_model, int64_t layers, int64_t heads,
                                   int64_t d_ff, AttentionImpl attention = AttentionImpl::Naive);

// Path of a file in the source tree (tests run from the build tree).
std::string source_path(const std::string& relative);
// A fresh empty directory for one test's files (removed by the OS temp cleaner, not by us).
std::string scratch_dir(const std::string& test_name);

}  // namespace pt::test

// Expects `stmt` to throw a pt::Error whose message holds every one of the strings that follow.
#define EXPECT_ERROR_HAS(stmt, ...)                                                           \
  do {                                                                                        \
    const std::string msg_ = ::pt::test::error_of([&] { stmt; });                             \
    EXPECT_FALSE(msg_.empty()) << "no error from " #stmt;                                     \
    for (const char* part_ : {__VA_ARGS__})                                                   \
      EXPECT_NE(msg_.find(part_), std::string::npos) << "'" << part_ << "' not in: " << msg_; \
  } while (0)
