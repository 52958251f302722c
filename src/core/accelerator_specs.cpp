#include "core/accelerator_specs.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "paratrain/accelerators_tsv.h"  // kAcceleratorsTsv: src/core/accelerators.tsv

namespace pt {

namespace {

struct Entry {
  AcceleratorSpec spec;
  std::string match;  // words a CUDA device name must all contain (any case); "" never matches
};

// src/core/accelerators.tsv, compiled in (CMakeLists.txt generates the header): one row per
// accelerator, tab-separated, '#' lines are comments.
std::vector<Entry> parse_table(const std::string& text) {
  std::vector<Entry> out;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    size_t a = 0;
    while (true) {
      const size_t b = line.find('\t', a);
      f.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
      if (b == std::string::npos) break;
      a = b + 1;
    }
    PT_CHECK(f.size() == 11, "accelerators.tsv line " + std::to_string(line_no) + ": expected 11 fields");
    Entry e;
    e.spec.preset = f[0];
    e.spec.description = f[1];
    const double cc = std::stod(f[2]);
    e.spec.cc_major = static_cast<int>(cc);
    e.spec.cc_minor = static_cast<int>(std::lround((cc - e.spec.cc_major) * 10));
    e.spec.memory_gb = std::stod(f[3]);
    e.spec.fp32_tflops = std::stod(f[4]);
    e.spec.tf32_tflops = std::stod(f[5]);
    e.spec.bf16_tflops = std::stod(f[6]);
    e.spec.fp8_tflops = std::stod(f[7]);
    e.spec.hbm_gbps = std::stod(f[8]);
    e.spec.link_gbps = std::stod(f[9]);
    e.match = f[10] == "-" ? "" : f[10];
    out.push_back(std::move(e));
  }
  return out;
}

// Most specific first: match_accelerator takes the first entry whose words all appear.
const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = parse_table(kAcceleratorsTsv);
  return table;
}

std::string upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return u;
}

// "A100-PCIE-40GB" and "A100 80GB PCIe" both contain the words A100, PCIE: split the name on
// anything that is not a letter or digit and look for each word of the pattern.
bool name_has_words(const std::string& name_upper, const std::string& pattern) {
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
  for (char c : pattern + " ") {
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
  switch (p) {
    case Precision::FP32: return fp32_tflops;
    case Precision::TF32: return tf32_tflops;
    case Precision::BF16: return bf16_tflops;
    case Precision::FP8: return fp8_tflops;
  }
  return 0.0;
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
    if (!table[i].match.empty() && name_has_words(name, table[i].match)) return &accelerator_specs()[i];
  return nullptr;
}

double peak_tflops_from_properties(int cc_major, int cc_minor, int sm_count, double clock_ghz, Precision p) {
  // Dense FLOP per clock per SM. fp32: 64 FMA lanes on sm_80, 128 from sm_86 on. bf16 tensor
  // cores with fp32 accumulation: sm_80 1024 FMA, sm_86/89 and the consumer Blackwells (sm_12x)
  // 512, Hopper 2048, datacentre Blackwell (sm_10x, sm_11x) 4096. tf32: half of bf16 on all; FP8
  // twice bf16 from sm_89 (Ada) on, none before.
  if (cc_major < 8) return 0.0;
  if (p == Precision::FP8 && cc_major * 10 + cc_minor < 89) return 0.0;
  double fp32 = cc_major == 8 && cc_minor == 0 ? 128 : 256;
  double bf16 = cc_major == 8                      ? (cc_minor == 0 ? 2048 : 1024)
                : cc_major == 9                    ? 4096
                : cc_major == 10 || cc_major == 11 ? 8192
                                                   : 1024;
  const double per_clock = p == Precision::FP32   ? fp32
                           : p == Precision::TF32 ? bf16 / 2
                           : p == Precision::FP8  ? bf16 * kFp8PeakPerBf16
                                                  : bf16;
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
    out.source = "table:" + s->preset;
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

Precision mfu_scale(Precision p) { return p == Precision::FP8 ? Precision::BF16 : p; }

MfuPeaks mfu_peaks(const Device& device, Precision p, double override_tflops) {
  MfuPeaks out;
  if (override_tflops > 0) {
    out.peak = DevicePeak{"", override_tflops, 0, "--peak-tflops"};
    if (p == Precision::FP8) out.fp8_tflops = kFp8PeakPerBf16 * override_tflops;
    return out;
  }
  out.peak = device_peak(device, mfu_scale(p));
  if (p == Precision::FP8) out.fp8_tflops = device_peak(device, Precision::FP8).tflops;
  return out;
}

double mfu_of(double achieved, double peak) {
  return peak > 0 ? achieved / peak : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace pt
