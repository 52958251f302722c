#include "core/device.h"
#include "core/enum_names.h"

#include <cuda_runtime.h>

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
constexpr EnumName<Precision> kPrecisions[] = {
    {Precision::FP32, "fp32"}, {Precision::TF32, "tf32"}, {Precision::BF16, "bf16"}};
}

const char* precision_name(Precision p) { return enum_name(kPrecisions, p); }
Precision precision_from_name(const std::string& name) { return enum_from_name(kPrecisions, name, "--precision"); }

}  // namespace pt
