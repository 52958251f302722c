// What a multi-architecture binary runs where: the CUDA image a device of each compute capability
// gets from a CMAKE_CUDA_ARCHITECTURES list, the flash-attention kernel family chosen from it, and
// the accelerator table's peaks (MFU) with the fallback from device properties.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/accelerator_specs.h"
#include "core/context.h"
#include "core/cuda_arch.h"
#include "core/error.h"
#include "ops/flash_attention.h"

namespace pt::test {
namespace {

CudaTarget target(const std::string& list, int major, int minor) {
  CudaTarget t;
  t.name = "GPU " + std::to_string(major) + std::to_string(minor);
  t.cc_major = major;
  t.cc_minor = minor;
  t.compiled = list;
  t.sm90a_features = cuda_image_fit(parse_cuda_architectures(list), major, minor).sm90a_features;
  return t;
}

TEST(CudaArch, ParsesCmakeEntries) {
  const auto l = parse_cuda_architectures("80-real;90a-real;100;120-virtual");
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0].major, 8);
  EXPECT_TRUE(l[0].sass && !l[0].ptx && !l[0].arch_specific);
  EXPECT_TRUE(l[1].arch_specific && l[1].major == 9 && l[1].minor == 0 && l[1].sass && !l[1].ptx);
  EXPECT_TRUE(l[2].major == 10 && l[2].minor == 0 && l[2].sass && l[2].ptx);
  EXPECT_TRUE(l[3].major == 12 && !l[3].sass && l[3].ptx);
  for (const char* bad : {"native", "8", "90b", "80-fake", "all"})
    EXPECT_THROW(parse_cuda_architectures(bad), Error) << bad;
  EXPECT_FALSE(compiled_cuda_architectures().empty());
  EXPECT_NO_THROW(parse_cuda_architectures(compiled_cuda_architectures()));
}

TEST(CudaArch, ImageFitPerComputeCapability) {
  struct Case {
    const char* list;
    int major, minor;
    bool runs, sm90a;
  };
  const Case cases[] = {
      // the release preset: SASS for 8.0, 9.0a and 10.0, PTX of 10.0
      {"80-real;90a-real;100", 8, 0, true, false},
      {"80-real;90a-real;100", 8, 6, true, false},
      {"80-real;90a-real;100", 8, 9, true, false},
      {"80-real;90a-real;100", 9, 0, true, true},
      {"80-real;90a-real;100", 10, 0, true, false},
      {"80-real;90a-real;100", 12, 0, true, false},
      {"80-real;90a-real;100", 7, 5, false, false},
      // PTX for compute_80 alone: JIT-compiled on a Hopper, without its sm_90a features
      {"80-virtual", 9, 0, true, false},
      {"80-virtual", 8, 0, true, false},
      {"80-virtual", 7, 5, false, false},
      // an arch-specific image runs on its own version only
      {"90a", 9, 0, true, true},
      {"90a", 10, 0, false, false},
      {"90a", 8, 0, false, false},
      {"90", 9, 0, true, false},
      {"90", 10, 0, true, false},
      {"90-real", 10, 0, false, false},
      {"80-real;90a-real", 10, 0, false, false},
      {"89", 8, 9, true, false},
      {"89-real", 8, 6, false, false},
      {"90-real;90a-virtual", 9, 0, true, false},
      {"80-real;90a-virtual", 9, 0, true, true},
  };
  for (const Case& c : cases) {
    const CudaImageFit fit = cuda_image_fit(parse_cuda_architectures(c.list), c.major, c.minor);
    EXPECT_EQ(fit.runs, c.runs) << c.list << " on " << c.major << "." << c.minor;
    EXPECT_EQ(fit.sm90a_features, c.sm90a) << c.list << " on " << c.major << "." << c.minor;
  }
}

TEST(FlashKernelChoice, AutoIsWgmmaOnlyOnHopperWithA90aImage) {
  const std::string release = "80-real;90a-real;100";
  const FlashKernels mma = FlashKernels::MmaSync, wgmma = FlashKernels::Wgmma;
  for (int64_t d : {16, 32, 64, 80, 128}) {
    const bool covered = d == 64 || d == 128;
    EXPECT_EQ(ops::choose_flash_kernels(FlashKernels::Auto, target(release, 8, 0), d), mma) << d;
    EXPECT_EQ(ops::choose_flash_kernels(FlashKernels::Auto, target(release, 8, 9), d), mma) << d;
    EXPECT_EQ(ops::choose_flash_kernels(FlashKernels::Auto, target(release, 9, 0), d), covered ? wgmma : mma) << d;
    EXPECT_EQ(ops::choose_flash_kernels(FlashKernels::Auto, target(release, 10, 0), d), mma) << d;
    EXPECT_EQ(ops::choose_flash_kernels(FlashKernels::Auto, target("80-virtual", 9, 0), d), mma) << d;
    EXPECT_EQ(ops::choose_flash_kernels(FlashKernels::Auto, target("90", 9, 0), d), mma) << d;
    EXPECT_EQ(ops::choose_flash_kernels(mma, target(release, 9, 0), d), mma) << d;
  }
  EXPECT_EQ(ops::choose_flash_kernels(wgmma, target(release, 9, 0), 128), wgmma);
}

TEST(FlashKernelChoice, ExplicitWgmmaWhereItCannotRunIsOneClearError) {
  for (auto [major, minor] : {std::pair{8, 0}, {8, 9}, {10, 0}}) {
    const CudaTarget t = target("80-real;90a-real;100", major, minor);
    try {
      ops::choose_flash_kernels(FlashKernels::Wgmma, t, 64);
      ADD_FAILURE() << "wgmma accepted on " << major << "." << minor;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(t.name), std::string::npos) << what;
      EXPECT_NE(what.find("compute capability " + std::to_string(major) + "." + std::to_string(minor)),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("80-real;90a-real;100"), std::string::npos) << what;
    }
  }
  try {
    ops::choose_flash_kernels(FlashKernels::Wgmma, target("80-virtual", 9, 0), 64);
    ADD_FAILURE() << "wgmma accepted from an 80-virtual image";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("80-virtual"), std::string::npos) << e.what();
  }
  try {
    ops::choose_flash_kernels(FlashKernels::Wgmma, target("90a", 9, 0), 80);
    ADD_FAILURE() << "wgmma accepted head dimension 80";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64 and 128"), std::string::npos) << e.what();
  }
  Context cpu(Device::cpu());  // the CPU runs its own kernels: any choice is accepted there
  EXPECT_NO_THROW(cpu.set_flash({FlashKernels::Wgmma, std::nullopt}));
}

TEST(AcceleratorSpecs, DeviceNamesMatchTheirEntries) {
  const std::pair<const char*, const char*> names[] = {{"NVIDIA H100 80GB HBM3", "h100-sxm"},
                                                       {"NVIDIA H100 PCIe", "h100-pcie"},
                                                       {"NVIDIA H100 NVL", "h100-nvl"},
                                                       {"NVIDIA H200", "h200"},
                                                       {"NVIDIA A100-SXM4-80GB", "a100-sxm"},
                                                       {"NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"},
                                                       {"NVIDIA A100 80GB PCIe", "a100-pcie"},
                                                       {"NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"},
                                                       {"NVIDIA L40S", "l40s"},
                                                       {"NVIDIA B200", "b200"},
                                                       {"NVIDIA GB200", "gb200"}};
  for (auto [name, preset] : names) {
    const AcceleratorSpec* s = match_accelerator(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->preset, preset) << name;
    EXPECT_EQ(find_accelerator_spec(preset), s);
  }
  EXPECT_EQ(match_accelerator("NVIDIA GeForce RTX 4090"), nullptr);
  EXPECT_EQ(find_accelerator_spec("h300"), nullptr);
  for (const AcceleratorSpec& s : accelerator_specs()) {
    EXPECT_GT(s.bf16_tflops, 0) << s.preset;
    EXPECT_GT(s.memory_gb, 0) << s.preset;
    EXPECT_GT(s.hbm_gbps, 0) << s.preset;
    if (s.cc_major > 0) EXPECT_NEAR(s.tf32_tflops * 2 / s.bf16_tflops, 1.0, 0.02) << s.preset;  // tf32 ≈ bf16 / 2
  }
}

// FP8 peaks: the datasheets' dense figures for GPUs with FP8 tensor cores (twice bf16 on each),
// 0 for those without; the fallback gives twice bf16 from sm_89 on and 0 before. MFU's peaks put
// an fp8 run on the bf16 scale with the FP8 peak beside it.
TEST(AcceleratorSpecs, Fp8PeaksAndTheMfuScale) {
  auto fp8 = [](const char* name) {
    const AcceleratorSpec* s = match_accelerator(name);
    return s ? s->peak_tflops(Precision::FP8) : -1.0;
  };
  EXPECT_DOUBLE_EQ(fp8("NVIDIA H100 80GB HBM3"), 1978.9);
  EXPECT_DOUBLE_EQ(fp8("NVIDIA H200"), 1978.9);
  EXPECT_DOUBLE_EQ(fp8("NVIDIA H100 PCIe"), 1513);
  EXPECT_DOUBLE_EQ(fp8("NVIDIA L40S"), 733);
  EXPECT_DOUBLE_EQ(fp8("NVIDIA B200"), 4500);
  EXPECT_DOUBLE_EQ(fp8("NVIDIA A100-SXM4-80GB"), 0.0);  // no FP8 tensor cores
  for (const AcceleratorSpec& s : accelerator_specs()) {
    if (s.cc_major * 10 + s.cc_minor >= 89)
      EXPECT_NEAR(s.fp8_tflops / s.bf16_tflops, 2.0, 0.04) << s.preset;
    else
      EXPECT_EQ(s.fp8_tflops, 0.0) << s.preset;
  }
  const AcceleratorSpec* h100 = find_accelerator_spec("h100-sxm");
  ASSERT_NE(h100, nullptr);
  EXPECT_NEAR(peak_tflops_from_properties(9, 0, 132, 1.83, Precision::FP8) / h100->fp8_tflops, 1.0, 0.02);
  EXPECT_EQ(peak_tflops_from_properties(8, 6, 84, 1.7, Precision::FP8), 0.0);
  EXPECT_EQ(mfu_scale(Precision::FP8), Precision::BF16);
  EXPECT_EQ(mfu_scale(Precision::TF32), Precision::TF32);
  const MfuPeaks given = mfu_peaks(Device::cpu(), Precision::FP8, 500);
  EXPECT_EQ(given.peak.tflops, 500);
  EXPECT_EQ(given.fp8_tflops, 1000);
  EXPECT_EQ(given.peak.source, "--peak-tflops");
  EXPECT_EQ(mfu_peaks(Device::cpu(), Precision::BF16, 500).fp8_tflops, 0.0);
  EXPECT_EQ(mfu_peaks(Device::cpu(), Precision::FP8).fp8_tflops, 0.0);
  EXPECT_TRUE(std::isnan(mfu_of(1.0, 0.0)));
}

// The fallback's per-SM rates reproduce the datasheets from SM count × the clock each datasheet
// figure assumes (Hopper's quote fp32 at the maximum boost, tensor rates at a lower one).
TEST(AcceleratorSpecs, PropertyFallbackReproducesTheTable) {
  struct Case {
    const char* preset;
    int major, minor, sms;
    double fp32_ghz, tensor_ghz;
  };
  for (const Case& c : {Case{"a100-sxm", 8, 0, 108, 1.41, 1.41}, Case{"l40s", 8, 9, 142, 2.52, 2.52},
                        Case{"h100-sxm", 9, 0, 132, 1.98, 1.83}, Case{"h100-pcie", 9, 0, 114, 1.755, 1.62}}) {
    const AcceleratorSpec* s = find_accelerator_spec(c.preset);
    ASSERT_NE(s, nullptr);
    for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16}) {
      const double ghz = p == Precision::FP32 ? c.fp32_ghz : c.tensor_ghz;
      EXPECT_NEAR(peak_tflops_from_properties(c.major, c.minor, c.sms, ghz, p) / s->peak_tflops(p), 1.0, 0.02)
          << c.preset << " " << precision_name(p);
    }
  }
  EXPECT_EQ(peak_tflops_from_properties(7, 5, 40, 1.5, Precision::BF16), 0.0);
  const DevicePeak cpu = device_peak(Device::cpu(), Precision::FP32);
  EXPECT_EQ(cpu.source, "none");
  EXPECT_EQ(cpu.tflops, 0.0);
}

}  // namespace
}  // namespace pt::test
