#include "core/accelerator_specs.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace pt {

namespace {

// Vendor datasheet figures. Tensor-core rates are the dense ones (half the "with sparsity"
// figure the datasheets headline). link_gbps is one direction: NVLink's datasheet figure is both
// directions together (H100 SXM: 900 GB/s, so 450 here); PCIe cards get their slot's x16 rate.
// TPU v5p: Google's figures as the course uses them (C = 4.6e14 FLOP/s in bf16, W_ici = 9e10 B/s
// each way); its fp32 and tf32 are left 0 (unknown: MFU is NaN for them).
struct Entry {
  AcceleratorSpec spec;
  const char* match;  // words a CUDA device name must all contain (any case), or nullptr
};

// Most specific first: match_accelerator takes the first entry whose words all appear.
const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = {
      // preset            description                      cc     mem    fp32  tf32   bf16    hbm   link
      {{"a100-pcie-40gb", "NVIDIA A100 PCIe 40 GB", 8, 0, 40, 19.5, 156, 312, 1555, 32}, "A100 PCIE 40GB"},
      {{"a100-sxm-40gb", "NVIDIA A100 SXM4 40 GB", 8, 0, 40, 19.5, 156, 312, 1555, 300}, "A100 40GB"},
      {{"a100-pcie", "NVIDIA A100 PCIe 80 GB", 8, 0, 80, 19.5, 156, 312, 1935, 32}, "A100 PCIE"},
      {{"a100-sxm", "NVIDIA A100 SXM4 80 GB", 8, 0, 80, 19.5, 156, 312, 2039, 300}, "A100"},
      {{"l40s", "NVIDIA L40S 48 GB", 8, 9, 48, 91.6, 183, 362, 864, 32}, "L40S"},
      {{"h100-pcie", "NVIDIA H100 PCIe 80 GB", 9, 0, 80, 51.2, 378, 756, 2000, 64}, "H100 PCIE"},
      {{"h100-nvl", "NVIDIA H100 NVL 94 GB", 9, 0, 94, 60, 417.5, 835.5, 3900, 300}, "H100 NVL"},
      {{"h100-sxm", "NVIDIA H100 SXM5 80 GB", 9, 0, 80, 66.9, 494.7, 989.4, 3350, 450}, "H100"},
      {{"h200", "NVIDIA H200 SXM 141 GB", 9, 0, 141, 66.9, 494.7, 989.4, 4800, 450}, "H200"},
      {{"gb200", "NVIDIA GB200 (one Blackwell GPU) 186 GB", 10, 0, 186, 80, 1250, 2500, 8000, 900}, "GB200"},
      {{"b200", "NVIDIA B200 (HGX) 180 GB", 10, 0, 180, 75, 1125, 2250, 8000, 900}, "B200"},
      {{"tpu-v5p", "Google TPU v5p chip 95 GB", 0, 0, 95, 0, 0, 460, 2765, 90}, nullptr},
  };
  return table;
}

std::string upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return u;
}

// "A100-PCIE-40GB" and "A100 80GB PCIe" both contain the words A100, PCIE: split the name on
// anything that is not a letter or digit and look for each word of the pattern.
bool name_has_words(const std::string& name_upper, const char* pattern) {
  std::vector<std::string> tokens;
  std::string cur;
  for (char c : name_upper + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += c;
    } else if (!cur.empty()) {
      tokens.push_back(cur);
      cur.clear();
    }
  }
  std::string word;
  for (char c : std::string(pattern) + " ") {
    if (c != ' ') {
      word += c;
      continue;
    }
    if (word.empty()) continue;
    if (std::find(tokens.begin(), tokens.end(), word) == tokens.end()) return false;
    word.clear();
  }
  return true;
}

int device_attribute(cudaDeviceAttr attr, int device) {
  int v = 0;
  PT_CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, device));
  return v;
}

}  // namespace

double AcceleratorSpec::peak_tflops(Precision p) const {
  return p == Precision::FP32 ? fp32_tflops : p == Precision::TF32 ? tf32_tflops : bf16_tflops;
}

const std::vector<AcceleratorSpec>& accelerator_specs() {
  static const std::vector<AcceleratorSpec> specs = [] {
    std::vector<AcceleratorSpec> v;
    for (const Entry& e : entries()) v.push_back(e.spec);
    return v;
  }();
  return specs;
}

const AcceleratorSpec* find_accelerator_spec(std::string_view preset) {
  for (const AcceleratorSpec& s : accelerator_specs())
    if (preset == s.preset) return &s;
  return nullptr;
}

const AcceleratorSpec* match_accelerator(std::string_view device_name) {
  const std::string name = upper(device_name);
  const auto& table = entries();
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].match && name_has_words(name, table[i].match)) return &accelerator_specs()[i];
  return nullptr;
}

double peak_tflops_from_properties(int cc_major, int cc_minor, int sm_count, double clock_ghz, Precision p) {
  // Dense FLOP per clock per SM. fp32: 64 FMA lanes on sm_80, 128 from sm_86 on. bf16 tensor
  // cores with fp32 accumulation: sm_80 1024 FMA, sm_86/89 and the consumer Blackwells (sm_12x)
  // 512, Hopper 2048, datacentre Blackwell (sm_10x, sm_11x) 4096. tf32: half of bf16 on all.
  if (cc_major < 8) return 0.0;
  double fp32 = cc_major == 8 && cc_minor == 0 ? 128 : 256;
  double bf16 = cc_major == 8 ? (cc_minor == 0 ? 2048 : 1024)
                : cc_major == 9 ? 4096
                : cc_major == 10 || cc_major == 11 ? 8192
                                                   : 1024;
  const double per_clock = p == Precision::FP32 ? fp32 : p == Precision::TF32 ? bf16 / 2 : bf16;
  return per_clock * sm_count * clock_ghz * 1e9 / 1e12;
}

DevicePeak device_peak(const Device& device, Precision p) {
  DevicePeak out;
  if (!device.is_cuda()) {
    out.device_name = "cpu";
    out.source = "none";
    return out;
  }
  cudaDeviceProp prop{};
  PT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.index));
  out.device_name = prop.name;
  if (const AcceleratorSpec* s = match_accelerator(prop.name)) {
    out.tflops = s->peak_tflops(p);
    out.hbm_gbps = s->hbm_gbps;
    out.source = std::string("table:") + s->preset;
    return out;
  }
  // kHz; the memory clock counts one edge of a double-data-rate bus.
  const double clock_ghz = device_attribute(cudaDevAttrClockRate, device.index) / 1e6;
  const double mem_clock_ghz = device_attribute(cudaDevAttrMemoryClockRate, device.index) / 1e6;
  const int bus_bits = device_attribute(cudaDevAttrGlobalMemoryBusWidth, device.index);
  out.tflops = peak_tflops_from_properties(prop.major, prop.minor, prop.multiProcessorCount, clock_ghz, p);
  out.hbm_gbps = 2.0 * mem_clock_ghz * bus_bits / 8.0;
  out.source = "device-properties";
  return out;
}

}  // namespace pt
