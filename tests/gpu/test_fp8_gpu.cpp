// The FP8 layer on the GPU (ops/fp8.h) against its CPU references (common/fp8_reference.h):
// amax exactly, every cast's bits, the transposed cast against the transposed plain cast, and
// the FP8 GEMM against fp64 on the dequantised operands the casts produced. Casts run on every
// GPU (below sm_89 through cuda_fp8.h's software conversion); the GEMM tests skip without FP8
// tensor cores, where the refusal is tested instead.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "common/fp8_reference.h"
#include "core/error.h"
#include "gpu/test_ops_gpu_helpers.h"
#include "model/fp8_linear.h"
#include "ops/elementwise.h"
#include "ops/fp8.h"

namespace pt::test {
namespace {

std::vector<uint8_t> bits_of(Context& ctx, const Tensor& t) {
  std::vector<uint8_t> out(static_cast<size_t>(t.numel()));
  copy_bytes(ctx, out.data(), DeviceKind::CPU, t.data(), t.device().kind, out.size());
  return out;
}
float scalar_of(Context& ctx, const Tensor& t) { return static_cast<float>(t.to_host_f64(ctx).at(0)); }
Tensor scalar(Context& ctx) {
  Tensor t = Tensor::empty({1}, DType::F32, ctx.device());
  poison(ctx, t);
  return t;
}
// The values a tensor of dtype holds, as floats.
std::vector<float> stored_floats(const std::vector<double>& v, DType dtype) {
  const auto s = stored(v, dtype);
  return std::vector<float>(s.begin(), s.end());
}
// Values over a wide dynamic range (|x| from 2^-14 to 2^6 times N(0,1)), so that a cast meets
// fp8 subnormals, underflow to zero and every binade; the largest |x| is planted, negative, at
// `at` (the tail of the pack loop, or the grid's last element).
std::vector<double> wide_values(int64_t n, uint64_t seed, int64_t at) {
  auto v = randn(n, seed);
  const auto e = uniform(n, seed + 1, -14.0, 6.0);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] *= std::exp2(std::floor(e[size_t(i)]));
  if (n > 0) v[size_t(at)] = -300.0;
  return v;
}

struct CastCase {
  DType in, out;
  int64_t n;
};
std::string case_name(const CastCase& c) {
  return std::string(dtype_name(c.in)) + "_to_" + dtype_name(c.out) + "_n" + std::to_string(c.n);
}

class GpuFp8Cast : public ::testing::TestWithParam<CastCase> {};

// amax exact; bits of the cast equal the host conversion of x·scale rounded in fp32 first (the
// fp32 rounding of the product matters wherever x·scale falls within half an fp32 ulp of an fp8
// midpoint; the reference rounds the same way, so the test asks for equality, not closeness).
// A scale applied the wrong way round (amax / max) turns nearly everything into zeros and
// subnormals; a missing |·| in amax misses the planted negative maximum; a tail or grid-stride
// bug leaves the plant or poisoned bits.
TEST_P(GpuFp8Cast, AmaxExactAndBitsEqualHostConversion) {
  PT_REQUIRE_GPU();
  const CastCase c = GetParam();
  Context gpu(Device::cuda(0), Precision::BF16);
  const auto values = wide_values(c.n, 7, c.n - 1);
  Tensor x = make_tensor(gpu, {c.n}, c.in, values);
  Tensor amax = scalar(gpu), scale_inv = scalar(gpu);
  Tensor out = make_tensor(gpu, {c.n}, c.out, std::vector<double>(size_t(c.n), 1.0));
  ops::fp8_amax(gpu, amax, x);
  ops::fp8_cast(gpu, out, scale_inv, x, amax);
  const auto host = stored_floats(values, c.in);
  const float want_amax = amax_reference(host);
  EXPECT_EQ(scalar_of(gpu, amax), want_amax);
  const Fp8Format fmt = fp8_format(c.out);
  EXPECT_EQ(bits_of(gpu, out), cast_reference(host, want_amax, fmt));
  EXPECT_EQ(scalar_of(gpu, scale_inv), 1.0f / fp8_scale_from_amax(want_amax, fmt));
  // amax is reset on each call: a smaller tensor afterwards gets its own maximum.
  Tensor small = make_tensor(gpu, {3}, c.in, {0.5, -0.25, 0.125});
  ops::fp8_amax(gpu, amax, small);
  EXPECT_EQ(scalar_of(gpu, amax), 0.5f);
}

std::vector<CastCase> cast_cases() {
  std::vector<CastCase> out;
  for (DType in : {DType::F32, DType::BF16})
    for (DType fp8 : {DType::F8E4M3, DType::F8E5M2})
      for (int64_t n : {int64_t{1}, int64_t{13}, int64_t{8 * 1000 + 5}, int64_t{(1 << 20) + 8}})
        out.push_back({in, fp8, n});
  return out;
}
INSTANTIATE_TEST_SUITE_P(All, GpuFp8Cast, ::testing::ValuesIn(cast_cases()),
                         [](const auto& info) { return case_name(info.param); });

// amax 0 → scale 1: zeros stay zeros and scale_inv is 1. A bound below the true amax saturates
// (satfinite: ±max, never NaN or inf), as the host conversion does.
TEST(GpuFp8CastEdges, ZeroAmaxAndSaturation) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::BF16);
  Tensor zeros = make_tensor(gpu, {24}, DType::BF16, std::vector<double>(24, 0.0));
  Tensor amax = scalar(gpu), scale_inv = scalar(gpu);
  Tensor out = Tensor::empty({24}, DType::F8E4M3, gpu.device());
  ops::fp8_amax(gpu, amax, zeros);
  ops::fp8_cast(gpu, out, scale_inv, zeros, amax);
  EXPECT_EQ(bits_of(gpu, out), std::vector<uint8_t>(24, 0));
  EXPECT_EQ(scalar_of(gpu, scale_inv), 1.0f);
  const std::vector<double> v{1.0, -2.0, 4.0, -8.0, 0.5, 3.0, 1e4, -1e4};
  Tensor x = make_tensor(gpu, {8}, DType::BF16, v);
  Tensor bound = make_tensor(gpu, {1}, DType::F32, {2.0});
  for (DType fp8 : {DType::F8E4M3, DType::F8E5M2}) {
    Tensor o = Tensor::empty({8}, fp8, gpu.device());
    ops::fp8_cast(gpu, o, scale_inv, x, bound);
    EXPECT_EQ(bits_of(gpu, o), cast_reference(stored_floats(v, DType::BF16), 2.0f, fp8_format(fp8)));
  }
}

struct TransposeCase {
  DType in, out;
  int64_t rows, cols;
};
class GpuFp8CastTranspose : public ::testing::TestWithParam<TransposeCase> {};

// The transposed cast equals the transpose of the plain cast, bit for bit, with the same
// scale_inv, and so does its optional plain output: full 64×64 tiles through the 16-byte path, partial edge tiles,
// shapes whose rows are not 16-byte multiples (element path), and a single element. An index slip in the tile (rows for
// columns, a missed edge) shows as wrong or poisoned bytes.
TEST_P(GpuFp8CastTranspose, EqualsTransposeOfPlainCast) {
  PT_REQUIRE_GPU();
  const TransposeCase c = GetParam();
  Context gpu(Device::cuda(0), Precision::BF16);
  const int64_t n = c.rows * c.cols;
  Tensor x = make_tensor(gpu, {c.rows, c.cols}, c.in, wide_values(n, 11, n / 2));
  Tensor amax = scalar(gpu), s_plain = scalar(gpu), s_t = scalar(gpu);
  Tensor plain = Tensor::empty({c.rows, c.cols}, c.out, gpu.device());
  Tensor t = make_tensor(gpu, {c.cols, c.rows}, c.out, std::vector<double>(size_t(n), 1.0));
  ops::fp8_amax(gpu, amax, x);
  ops::fp8_cast(gpu, plain, s_plain, x, amax);
  ops::fp8_cast_transpose(gpu, t, s_t, x, amax);
  EXPECT_EQ(bits_of(gpu, t), transpose_reference(bits_of(gpu, plain), c.rows, c.cols));
  EXPECT_EQ(scalar_of(gpu, s_t), scalar_of(gpu, s_plain));
  // Both layouts from one read: the plain output equals fp8_cast's, the transposed one is unchanged.
  Tensor both = make_tensor(gpu, {c.rows, c.cols}, c.out, std::vector<double>(size_t(n), 1.0));
  Tensor t2 = make_tensor(gpu, {c.cols, c.rows}, c.out, std::vector<double>(size_t(n), 1.0));
  ops::fp8_cast_transpose(gpu, t2, s_t, x, amax, &both);
  EXPECT_EQ(bits_of(gpu, both), bits_of(gpu, plain));
  EXPECT_EQ(bits_of(gpu, t2), bits_of(gpu, t));
}
std::vector<TransposeCase> transpose_cases() {
  std::vector<TransposeCase> out;
  const std::vector<std::pair<int64_t, int64_t>> shapes{{128, 192}, {197, 77}, {130, 72}, {1, 1}, {256, 8}, {8, 320}};
  for (DType in : {DType::F32, DType::BF16})
    for (DType fp8 : {DType::F8E4M3, DType::F8E5M2})
      for (auto [r, c] : shapes) out.push_back({in, fp8, r, c});
  return out;
}
INSTANTIATE_TEST_SUITE_P(All, GpuFp8CastTranspose, ::testing::ValuesIn(transpose_cases()), [](const auto& info) {
  const auto& c = info.param;
  return std::string(dtype_name(c.in)) + "_to_" + dtype_name(c.out) + "_" + std::to_string(c.rows) + "x" +
         std::to_string(c.cols);
});

// A weight's casts from its fp32 master values (ops::fp8_cast_weight, what the parameter store
// keeps for FP8 weights) are bit for bit those of its bf16 mirror cast the usual way: the amax,
// the scale, and both layouts. The largest |value| is planted off the bf16 grid (300.7 reads back
// as 300), and most values lie between bf16 neighbours: without the rounding to bf16 first, the
// amax, and so every byte, would differ.
TEST(GpuFp8CastWeight, EqualsTheCastsOfTheBf16Mirror) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::BF16);
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{128, 192}, {197, 77}, {64, 4800}}) {
    const int64_t n = rows * cols;
    auto v = wide_values(n, 5, n - 1);
    v[size_t(n - 1)] = -300.7;
    Tensor w = make_tensor(gpu, {rows, cols}, DType::F32, v);
    Tensor mirror = Tensor::empty({rows, cols}, DType::BF16, gpu.device());
    ops::cast(gpu, mirror, w);
    Tensor amax = scalar(gpu), s = scalar(gpu), amax_w = scalar(gpu), s_w = scalar(gpu);
    Tensor plain = Tensor::empty({rows, cols}, DType::F8E4M3, gpu.device());
    Tensor t = Tensor::empty({cols, rows}, DType::F8E4M3, gpu.device());
    Tensor stored = make_tensor(gpu, {rows, cols}, DType::F8E4M3, std::vector<double>(size_t(n), 1.0));
    Tensor transposed = make_tensor(gpu, {cols, rows}, DType::F8E4M3, std::vector<double>(size_t(n), 1.0));
    ops::fp8_amax(gpu, amax, mirror);
    ops::fp8_cast_transpose(gpu, t, s, mirror, amax, &plain);
    ops::fp8_cast_weight(gpu, stored, transposed, s_w, amax_w, w);
    const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    EXPECT_EQ(scalar_of(gpu, amax_w), 300.0f) << what;
    EXPECT_EQ(scalar_of(gpu, amax_w), scalar_of(gpu, amax)) << what;
    EXPECT_EQ(scalar_of(gpu, s_w), scalar_of(gpu, s)) << what;
    EXPECT_EQ(bits_of(gpu, stored), bits_of(gpu, plain)) << what;
    EXPECT_EQ(bits_of(gpu, transposed), bits_of(gpu, t)) << what;
    // With the amax measured by the update, the cast takes it as it is (no pass of its own): a
    // larger bound than the true max gives the scale of that bound.
    Tensor bound = make_tensor(gpu, {1}, DType::F32, {600.0}), s_b = scalar(gpu);
    Tensor bound_ref = make_tensor(gpu, {1}, DType::F32, {600.0}), s_ref = scalar(gpu);
    ops::fp8_cast_transpose(gpu, t, s_ref, mirror, bound_ref, &plain);
    ops::fp8_cast_weight(gpu, stored, transposed, s_b, bound, w, nullptr, true);
    EXPECT_EQ(scalar_of(gpu, bound), 600.0f) << what;
    EXPECT_EQ(scalar_of(gpu, s_b), scalar_of(gpu, s_ref)) << what;
    EXPECT_NE(scalar_of(gpu, s_b), scalar_of(gpu, s)) << what;
    EXPECT_EQ(bits_of(gpu, stored), bits_of(gpu, plain)) << what;
    EXPECT_EQ(bits_of(gpu, transposed), bits_of(gpu, t)) << what;
  }
}

// Fp8GradCasts::place_in: a batched dy's casts (both layouts of each slice) are written into the
// placed bytes, slice after slice, bit for bit the casts made into new allocations; a slice that
// no longer fits gets its own.
TEST(GpuFp8GradCasts, PlacedCastsTakeTheSpacesBytes) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0), Precision::BF16);
  const int64_t N = 64, F = 48, n = N * F;  // n a multiple of 16
  Tensor dy = make_tensor(gpu, {3, N, F}, DType::BF16, wide_values(3 * n, 7, 11));
  Tensor space = Tensor::empty({2, N, F}, DType::BF16, gpu.device());  // 4n bytes: two slices' layouts
  const char* base = static_cast<const char*>(space.data());
  Fp8GradCasts placed, fresh;
  placed.place_in(space);
  for (int64_t i = 0; i < 3; ++i) {
    const ops::Fp8Operand& a = placed.of(gpu, dy, i, /*both=*/true);
    const ops::Fp8Operand& b = fresh.of(gpu, dy, i, /*both=*/true);
    const char* stored = static_cast<const char*>(a.stored.data());
    const char* transposed = static_cast<const char*>(a.transposed.data());
    if (i < 2) {
      EXPECT_EQ(stored, base + 2 * n * i) << "slice " << i;
      EXPECT_EQ(transposed, base + 2 * n * i + n) << "slice " << i;
    } else {
      EXPECT_TRUE(stored < base || stored >= base + 4 * n) << "slice 2 does not fit, yet sits in the space";
    }
    EXPECT_EQ(scalar_of(gpu, a.scale_inv), scalar_of(gpu, b.scale_inv)) << "slice " << i;
    EXPECT_EQ(bits_of(gpu, a.stored), bits_of(gpu, b.stored)) << "slice " << i;
    EXPECT_EQ(bits_of(gpu, a.transposed), bits_of(gpu, b.transposed)) << "slice " << i;
  }
}

}  // namespace
}  // namespace pt::test
