// The FP8 formats on the host (core/fp8.h), written from the OCP FP8 specification: every code
// decoded and re-encoded, ties, subnormals and saturation against hand-computed bits, a sweep
// of floats against CUDA's own host conversion (cuda_fp8.h), and the CPU references the GPU
// tests compare with (common/fp8_reference.h).
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/fp8_reference.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp8.h"

namespace pt::test {
namespace {

constexpr Fp8Format E4M3 = Fp8Format::E4M3, E5M2 = Fp8Format::E5M2;

TEST(Fp8DType, NamesAndSizes) {
  EXPECT_EQ(dtype_size(DType::F8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::F8E5M2), 1u);
  EXPECT_STREQ(dtype_name(DType::F8E4M3), "fp8e4m3");
  EXPECT_STREQ(dtype_name(DType::F8E5M2), "fp8e5m2");
  EXPECT_EQ(dtype_from_name("fp8e4m3"), DType::F8E4M3);
  EXPECT_EQ(dtype_from_name("fp8e5m2"), DType::F8E5M2);
  EXPECT_EQ(fp8_format(DType::F8E5M2), E5M2);
  EXPECT_THROW(fp8_format(DType::BF16), Error);
}

TEST(Fp8Convert, EveryCodeDecodesAndReencodesToItself) {
  for (Fp8Format fmt : {E4M3, E5M2}) {
    int nans = 0, infs = 0;
    float previous = -1.0f;
    for (int code = 0; code < 256; ++code) {
      const auto bits = static_cast<uint8_t>(code);
      const float v = fp8_bits_to_float(bits, fmt);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_EQ(float_to_fp8_bits(v, fmt), 0x7f);
        continue;
      }
      if (std::isinf(v)) {  // E5M2 only; satfinite maps it to the largest finite value
        ++infs;
        EXPECT_EQ(float_to_fp8_bits(v, fmt), (bits & 0x80) | 0x7b);
        continue;
      }
      EXPECT_EQ(float_to_fp8_bits(v, fmt), bits) << "code " << code << " value " << v;
      EXPECT_EQ(std::signbit(v), code >= 0x80) << code;
      if (code < 0x80) {  // positive codes increase with their value
        EXPECT_GT(v, previous) << code;
        previous = v;
      }
    }
    // E4M3: only S.1111.111 is NaN, no infinities; E5M2: IEEE-like, 3 NaN mantissas per sign.
    EXPECT_EQ(nans, fmt == E4M3 ? 2 : 6);
    EXPECT_EQ(infs, fmt == E4M3 ? 0 : 2);
  }
}

TEST(Fp8Convert, HandComputedValues) {
  // E4M3 = s.eeee.mmm, bias 7.
  EXPECT_EQ(float_to_fp8_bits(1.0f, E4M3), 0x38);            // 0.0111.000
  EXPECT_EQ(float_to_fp8_bits(-2.0f, E4M3), 0xc0);           // 1.1000.000
  EXPECT_EQ(float_to_fp8_bits(240.0f, E4M3), 0x77);          // 1.875·2^7 = 0.1110.111
  EXPECT_EQ(float_to_fp8_bits(256.0f, E4M3), 0x78);          // 0.1111.000 (a finite value in E4M3)
  EXPECT_EQ(float_to_fp8_bits(448.0f, E4M3), 0x7e);          // largest finite: 1.75·2^8
  EXPECT_EQ(float_to_fp8_bits(1.1f, E4M3), 0x39);            // nearest is 1.125
  EXPECT_EQ(float_to_fp8_bits(1.0625f, E4M3), 0x38);         // tie 1 | 1.125 → even mantissa (1)
  EXPECT_EQ(float_to_fp8_bits(1.1875f, E4M3), 0x3a);         // tie 1.125 | 1.25 → even (1.25)
  EXPECT_EQ(float_to_fp8_bits(0x1p-9f, E4M3), 0x01);         // smallest subnormal
  EXPECT_EQ(float_to_fp8_bits(0x1p-10f, E4M3), 0x00);        // half of it: tie → 0 (even)
  EXPECT_EQ(float_to_fp8_bits(-0x1p-10f, E4M3), 0x80);       // underflow keeps the sign
  EXPECT_EQ(float_to_fp8_bits(0x1.8p-10f, E4M3), 0x01);      // above the tie
  EXPECT_EQ(float_to_fp8_bits(0x1.8p-9f, E4M3), 0x02);       // tie 1 | 2 subnormal ulps → 2
  EXPECT_EQ(float_to_fp8_bits(7.5f * 0x1p-9f, E4M3), 0x08);  // tie largest subnormal | 2^-6
  EXPECT_EQ(float_to_fp8_bits(-0.0f, E4M3), 0x80);
  // Saturation: 464 is the tie between 448 and 480 (which would be the NaN code), beyond it and
  // infinity clamp to ±448.
  EXPECT_EQ(float_to_fp8_bits(464.0f, E4M3), 0x7e);
  EXPECT_EQ(float_to_fp8_bits(470.0f, E4M3), 0x7e);
  EXPECT_EQ(float_to_fp8_bits(1e30f, E4M3), 0x7e);
  EXPECT_EQ(float_to_fp8_bits(std::numeric_limits<float>::infinity(), E4M3), 0x7e);
  EXPECT_EQ(float_to_fp8_bits(-std::numeric_limits<float>::infinity(), E4M3), 0xfe);
  EXPECT_EQ(float_to_fp8_bits(std::numeric_limits<float>::quiet_NaN(), E4M3), 0x7f);
  EXPECT_FLOAT_EQ(fp8_bits_to_float(0x7e, E4M3), 448.0f);
  EXPECT_FLOAT_EQ(fp8_bits_to_float(0x08, E4M3), 0x1p-6f);
  // E5M2 = s.eeeee.mm, bias 15.
  EXPECT_EQ(float_to_fp8_bits(1.0f, E5M2), 0x3c);  // 0.01111.00
  EXPECT_EQ(float_to_fp8_bits(1.25f, E5M2), 0x3d);
  EXPECT_EQ(float_to_fp8_bits(1.125f, E5M2), 0x3c);    // tie 1 | 1.25 → even (1)
  EXPECT_EQ(float_to_fp8_bits(1.375f, E5M2), 0x3e);    // tie 1.25 | 1.5 → even (1.5)
  EXPECT_EQ(float_to_fp8_bits(0x1p-16f, E5M2), 0x01);  // smallest subnormal
  EXPECT_EQ(float_to_fp8_bits(0x1p-17f, E5M2), 0x00);  // tie → 0
  EXPECT_EQ(float_to_fp8_bits(57344.0f, E5M2), 0x7b);  // largest finite: 1.75·2^15
  EXPECT_EQ(float_to_fp8_bits(61440.0f, E5M2), 0x7b);  // tie 57344 | inf: satfinite clamps
  EXPECT_EQ(float_to_fp8_bits(-1e30f, E5M2), 0xfb);
  EXPECT_EQ(float_to_fp8_bits(std::numeric_limits<float>::infinity(), E5M2), 0x7b);
  EXPECT_EQ(float_to_fp8_bits(std::numeric_limits<float>::quiet_NaN(), E5M2), 0x7f);
  EXPECT_TRUE(std::isinf(fp8_bits_to_float(0x7c, E5M2)));
  EXPECT_TRUE(std::isnan(fp8_bits_to_float(0x7d, E5M2)));
}

// CUDA's host conversion (the software path of __nv_cvt_float_to_fp8, which sm_80 devices run
// too) agrees with ours on a sweep of every 128th float bit pattern and both neighbours of each:
// ties have trailing zero bits, so every fp8 midpoint in range and the floats beside it are hit.
TEST(Fp8Convert, MatchesCudaHostConversionOnAFloatSweep) {
  for (Fp8Format fmt : {E4M3, E5M2}) {
    const auto interp = fmt == E4M3 ? __NV_E4M3 : __NV_E5M2;
    int64_t mismatches = 0;
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += 128)
      for (int64_t d : {-1, 0, 1}) {
        const auto u = static_cast<uint32_t>(base + static_cast<uint64_t>(d));
        float f;
        std::memcpy(&f, &u, 4);
        const auto want = static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, interp));
        if (float_to_fp8_bits(f, fmt) != want && ++mismatches <= 5)
          ADD_FAILURE() << "float bits 0x" << std::hex << u << ": ours 0x" << int(float_to_fp8_bits(f, fmt))
                        << ", CUDA 0x" << int(want);
      }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(Fp8Scale, CurrentScalingMapsAmaxOntoTheLargestValue) {
  EXPECT_EQ(fp8_scale_from_amax(0.0f, E4M3), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(2.0f, E4M3), 224.0f);
  EXPECT_EQ(fp8_scale_from_amax(3.5f, E5M2), 16384.0f);
  // amax itself lands on the largest value, whatever the fp32 rounding of the division.
  for (float amax : {0.3f, 1.7f, 1e-3f, 12345.0f})
    for (Fp8Format fmt : {E4M3, E5M2})
      EXPECT_EQ(float_to_fp8_bits(amax * fp8_scale_from_amax(amax, fmt), fmt), fmt == E4M3 ? 0x7e : 0x7b) << amax;
}

TEST(Fp8Support, NamesTheGpuWithoutFp8TensorCores) {
  EXPECT_EQ(fp8_unsupported_reason(CudaTarget{"NVIDIA H100 80GB HBM3", 9, 0}), "");
  EXPECT_EQ(fp8_unsupported_reason(CudaTarget{"NVIDIA L40S", 8, 9}), "");
  EXPECT_EQ(fp8_unsupported_reason(CudaTarget{"NVIDIA B200", 10, 0}), "");
  const std::string msg = fp8_unsupported_reason(CudaTarget{"NVIDIA A100-SXM4-80GB", 8, 0});
  EXPECT_NE(msg.find("NVIDIA A100-SXM4-80GB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8.0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8.9"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

// The references the GPU tests use: a hand-computed 2×2 GEMM and a cast.
TEST(Fp8Reference, GemmOfDequantisedValues) {
  // A = [[1, 2], [0.5, -3]] (E4M3), B (n, k) = [[1, 1], [2, 0.25]] (E5M2); C = 0.5·4·A·Bᵀ.
  const std::vector<uint8_t> a{float_to_fp8_bits(1, E4M3), float_to_fp8_bits(2, E4M3), float_to_fp8_bits(0.5f, E4M3),
                               float_to_fp8_bits(-3, E4M3)};
  const std::vector<uint8_t> b{float_to_fp8_bits(1, E5M2), float_to_fp8_bits(1, E5M2), float_to_fp8_bits(2, E5M2),
                               float_to_fp8_bits(0.25f, E5M2)};
  const auto c = fp8_gemm_reference(a, E4M3, 0.5f, b, E5M2, 4.0f, 2, 2, 2);
  EXPECT_EQ(c, (std::vector<double>{2 * 3, 2 * 2.5, 2 * -2.5, 2 * 0.25}));
}

TEST(Fp8Reference, CastScalesBeforeRounding) {
  // amax 2 → scale 224: 2 → 448, −1 → −224 (1.75·2^7, exact), 0.01 → 2.24 → 2.25 (nearest E4M3).
  const auto bits = cast_reference({2.0f, -1.0f, 0.01f}, 2.0f, E4M3);
  EXPECT_EQ(bits, (std::vector<uint8_t>{0x7e, 0xf6, float_to_fp8_bits(2.25f, E4M3)}));
  EXPECT_FLOAT_EQ(amax_reference({-3.0f, 2.0f, std::nanf("")}), 3.0f);
  EXPECT_EQ(transpose_reference<int>({1, 2, 3, 4, 5, 6}, 2, 3), (std::vector<int>{1, 4, 2, 5, 3, 6}));
}

}  // namespace
}  // namespace pt::test
