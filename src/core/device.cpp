#include "core/device.h"
#include "core/enum_names.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "core/error.h"

namespace pt {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error so later checks start clean
    return 0;
  }
  return n;
}

namespace {

// A cgroup's memory limit file ("max" or a byte count); +inf when absent or unlimited.
double cgroup_limit(const char* path) {
  std::ifstream f(path);
  double bytes = 0;
  return f >> bytes && bytes > 0 ? bytes : HUGE_VAL;
}

double host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  double bytes = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : HUGE_VAL;
  bytes = std::min(
      {bytes, cgroup_limit("/sys/fs/cgroup/memory.max"), cgroup_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes")});
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit lim {};
    if (::getrlimit(resource, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
      bytes = std::min(bytes, static_cast<double>(lim.rlim_cur));
  }
  return bytes;
}

}  // namespace

double memory_capacity_bytes(const Device& d) {
  if (d.is_cpu()) return host_memory_bytes();
  cudaDeviceProp prop{};
  PT_CUDA_CHECK(cudaGetDeviceProperties(&prop, d.index));
  return static_cast<double>(prop.totalGlobalMem);
}

namespace {
constexpr EnumName<Precision> kPrecisions[] = {
    {Precision::FP32, "fp32"}, {Precision::TF32, "tf32"}, {Precision::BF16, "bf16"}, {Precision::FP8, "fp8"}};
}

const char* precision_name(Precision p) { return enum_name(kPrecisions, p); }
Precision precision_from_name(const std::string& name) { return enum_from_name(kPrecisions, name, "--precision"); }

}  // namespace pt
