#pragma once
// What the hardware allows: one table of accelerators (dense peak FLOP/s per precision, memory,
// memory and link bandwidth) for MFU, rooflines and `paratrain plan`, and a fallback computed
// from a CUDA device's own properties, so that no GPU is left without a peak.
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"

namespace pt {

struct AcceleratorSpec {
  std::string preset;              // the name presets are chosen by: "h100-sxm"
  std::string description;         // "NVIDIA H100 SXM5 80 GB"
  int cc_major = 0, cc_minor = 0;  // CUDA compute capability; 0.0 for a non-CUDA accelerator
  double memory_gb = 0;            // device memory, 1e9 bytes
  // Dense (no structured sparsity) peaks in TFLOP/s: plain fp32 FMA, tf32, bf16 and FP8
  // (E4M3/E5M2 operands) tensor cores with fp32 accumulation; fp8 0: no FP8 tensor cores.
  double fp32_tflops = 0, tf32_tflops = 0, bf16_tflops = 0, fp8_tflops = 0;
  double hbm_gbps = 0;   // device-memory bandwidth, 1e9 B/s
  double link_gbps = 0;  // one direction, per device, to its peers in a node (NVLink, ICI or PCIe)
  // The peak of p's tensor-core (or FMA) rate: Precision::FP8 gives the FP8 GEMMs' peak, 0
  // without FP8 tensor cores (see mfu_peaks for what an fp8 run's MFU is measured against).
  double peak_tflops(Precision p) const;
};

// Every known accelerator: src/core/accelerators.tsv (datasheet figures and their conventions),
// compiled in.
const std::vector<AcceleratorSpec>& accelerator_specs();
// By preset name; nullptr when unknown.
const AcceleratorSpec* find_accelerator_spec(std::string_view preset);
// The entry a CUDA device name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB") denotes;
// nullptr when none does.
const AcceleratorSpec* match_accelerator(std::string_view device_name);

// Dense peak in TFLOP/s from an architecture's per-SM tensor/FMA rate × SMs × clock: the
// fallback for a device the table does not know. 0 for an architecture before sm_80, and for FP8
// before sm_89 (no FP8 tensor cores).
double peak_tflops_from_properties(int cc_major, int cc_minor, int sm_count, double clock_ghz, Precision p);

// The peak of the device a run uses, and where the figure came from.
struct DevicePeak {
  std::string device_name;  // the CUDA device's name, "cpu" on the CPU
  double tflops = 0;        // dense peak for the precision; 0 on the CPU (MFU is then NaN)
  double hbm_gbps = 0;      // device-memory bandwidth; 0 on the CPU
  std::string source;       // "table:<preset>", "device-properties", or "none" (CPU)
};
DevicePeak device_peak(const Device& device, Precision p);

// The dense FP8 rate over the bf16 one, on every GPU with FP8 tensor cores (sm_89 to sm_100):
// --peak-tflops's FP8 peak and the fallback from device properties.
constexpr double kFp8PeakPerBf16 = 2.0;

// The peaks a run's MFU is reported against. `tflops` is the run precision's own, except that an
// fp8 run is measured against the bf16 peak: its FP8 GEMMs are only part of the model's FLOPs
// (attention and the LM head stay bf16), and one scale lets fp8 and bf16 runs compare. An fp8
// run also gets `fp8_tflops`, the FP8 peak its GEMMs could reach at most (0 for any other run).
// `override_tflops` > 0 (--peak-tflops) replaces the bf16-scale peak, and the FP8 one is
// kFp8PeakPerBf16 times it.
Precision mfu_scale(Precision p);  // the precision whose peak `tflops` is: bf16 for fp8, else p
struct MfuPeaks {
  DevicePeak peak;
  double fp8_tflops = 0;
};
MfuPeaks mfu_peaks(const Device& device, Precision p, double override_tflops = 0);
// achieved / peak, both FLOP/s or both TFLOP/s; NaN without a peak (peak <= 0).
double mfu_of(double achieved, double peak);

}  // namespace pt
