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
  // Dense (no structured sparsity) peaks in TFLOP/s: plain fp32 FMA, tf32 and bf16 tensor cores
  // with fp32 accumulation.
  double fp32_tflops = 0, tf32_tflops = 0, bf16_tflops = 0;
  double hbm_gbps = 0;   // device-memory bandwidth, 1e9 B/s
  double link_gbps = 0;  // one direction, per device, to its peers in a node (NVLink, ICI or PCIe)
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
// fallback for a device the table does not know. 0 for an architecture before sm_80.
double peak_tflops_from_properties(int cc_major, int cc_minor, int sm_count, double clock_ghz, Precision p);

// The peak of the device a run uses, and where the figure came from.
struct DevicePeak {
  std::string device_name;  // the CUDA device's name, "cpu" on the CPU
  double tflops = 0;        // dense peak for the precision; 0 on the CPU (MFU is then NaN)
  double hbm_gbps = 0;      // device-memory bandwidth; 0 on the CPU
  std::string source;       // "table:<preset>", "device-properties", or "none" (CPU)
};
DevicePeak device_peak(const Device& device, Precision p);

}  // namespace pt
