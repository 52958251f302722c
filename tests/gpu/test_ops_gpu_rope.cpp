// Rotary embedding on the GPU against the fp64 CPU reference (conventions: test_ops_gpu_helpers.h).
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/test_ops_gpu_helpers.h"
#include "ops/rope.h"

namespace pt::test {
namespace {

// ---- rope ---------------------------------------------------------------------------------

class GpuRope : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};  // (type, D)

TEST_P(GpuRope, InPlaceOnFusedQkvAndInverse) {
  PT_REQUIRE_GPU();
  const auto [dt, D] = GetParam();
  Context gpu(Device::cuda(0)), cpu(Device::cpu());
  // 9 heads (18 for q and k): full groups of 8 and a partial one. D 64 and 128 take the packed
  // kernel, D 6 the general one.
  const int64_t B = 2, T = 50, H = 9, C = H * D;
  Pair qkv = make_twin(gpu, cpu, {B, T, 3, H, D}, dt, randn(B * T * 3 * C, 25));
  auto view = [&](Tensor& t, int64_t which) { return t.as_strided({B, H, T, D}, {T * 3 * C, D, 3 * C, 1}, which * C); };
  // The model's call: q's and k's heads as one (B, 2H, T, D) view on the GPU; the CPU rotates
  // q and k one at a time.
  Tensor qk = qkv.gpu.as_strided({B, 2 * H, T, D}, {T * 3 * C, D, 3 * C, 1}, 0);
  ops::rope(gpu, qk, qk, 10000.0, false);
  for (int64_t which : {0, 1}) {
    Tensor vc = view(qkv.cpu, which);
    ops::rope(cpu, vc, vc, 10000.0, false);
  }
  // GPU angles are fp32 (t·inv_freq, as PyTorch's tables): at t < 50 the angle is off by
  // up to ~50·2·2^-24 ≈ 6e-6 rad, so an output may move by ~1e-5·|x| — hence the absolute
  // tolerance 3e-5·max|x| in fp32 (bf16 storage rounding dominates in bf16).
  const double angle_atol = dt == DType::BF16 ? 1e-2 : 3e-5;
  PT_EXPECT_GPU_CLOSE(qkv.gpu, qkv.cpu, gpu, cpu, tol_for(dt), angle_atol);
  // Inverse into a separate contiguous output recovers the input.
  Tensor q = view(qkv.gpu, 0);
  Tensor back = Tensor::empty({B, H, T, D}, dt, gpu.device());
  poison(gpu, back);
  ops::rope(gpu, back, q, 10000.0, true);
  Tensor qc = view(qkv.cpu, 0), back_c = Tensor::empty({B, H, T, D}, DType::F64, cpu.device());
  ops::rope(cpu, back_c, qc, 10000.0, true);
  PT_EXPECT_GPU_CLOSE(back, back_c, gpu, cpu, tol_for(dt), angle_atol);
}

// The angle table (ops::rope_table) holds rope()'s angles bit for bit: rotating the pair (1, 0)
// leaves (cos, sin) exactly (x0·c − x1·s = c, x0·s + x1·c = s in fp32), in the packed kernel (D 64,
// 128) and the general one (D 6, and a misaligned view).
TEST(GpuRope, AngleTableHoldsTheKernelsAnglesBitForBit) {
  PT_REQUIRE_GPU();
  Context gpu(Device::cuda(0));
  for (const int64_t D : {6, 64, 128}) {
    for (const int64_t offset : {0, 2}) {
      SCOPED_TRACE("D " + std::to_string(D) + " offset " + std::to_string(offset));
      const int64_t T = 700, H = 3;
      std::vector<double> ones(static_cast<size_t>(H * T * D + offset), 0.0);
      for (size_t i = offset; i < ones.size(); i += 2) ones[i] = 1.0;
      Tensor buf = make_tensor(gpu, {H * T * D + offset}, DType::F32, ones);
      Tensor x = buf.as_strided({1, H, T, D}, {H * T * D, T * D, D, 1}, offset);
      ops::rope(gpu, x, x, 10000.0, false);
      const ops::RopeTable table = ops::rope_table(gpu, T, D, 10000.0);
      const std::vector<double> rotated = buf.to_host_f64(gpu), angles = table.cos_sin.to_host_f64(gpu);
      ASSERT_EQ(angles.size(), static_cast<size_t>(T * D));
      int64_t differ = 0;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T * D; ++i) differ += rotated[offset + h * T * D + i] != angles[i];
      EXPECT_EQ(differ, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TypesAndHeadDims, GpuRope,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(int64_t(64), int64_t(128), int64_t(6))));

}  // namespace
}  // namespace pt::test
