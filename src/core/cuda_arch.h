#pragma once
// The CUDA architectures this binary was compiled for, and what they mean for a device: whether
// any image runs on it at all, and whether the image it runs has Hopper's sm_90a features
// (wgmma, setmaxnreg, bulk copies), which the flash-attention kernel choice depends on.
#include <string>
#include <string_view>
#include <vector>

namespace pt {

// One entry of a CMAKE_CUDA_ARCHITECTURES list: "80" (SASS and PTX), "80-real" (SASS),
// "80-virtual" (PTX), "90a" (the arch-specific feature set; runs on 9.0 only).
struct CudaArchEntry {
  int major = 0, minor = 0;
  bool arch_specific = false;  // the "a" suffix
  bool sass = false, ptx = false;
};
// Throws on a malformed entry ("native" must have been resolved by CMake; see CMakeLists.txt).
std::vector<CudaArchEntry> parse_cuda_architectures(std::string_view list);

// The list this binary was compiled with, as CMake resolved it ("80-real;90a-real;100").
const std::string& compiled_cuda_architectures();

// What a device of compute capability major.minor gets from a list of images.
struct CudaImageFit {
  bool runs = false;            // some image runs: SASS of the same major and a minor ≤ the device's,
                                // or PTX of a version ≤ the device's (JIT); "a" entries only on their own version
  bool sm90a_features = false;  // the image it runs is an sm_90a one (only on compute capability 9.0)
};
CudaImageFit cuda_image_fit(const std::vector<CudaArchEntry>& list, int cc_major, int cc_minor);

}  // namespace pt
