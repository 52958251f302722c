#include "core/cuda_arch.h"

#include <cctype>

#include "core/error.h"
#include "paratrain/build_config.h"  // PARATRAIN_CUDA_ARCHITECTURES: the list as CMake resolved it

namespace pt {

std::vector<CudaArchEntry> parse_cuda_architectures(std::string_view list) {
  std::vector<CudaArchEntry> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t end = std::min(list.find(';', pos), list.size());
    const std::string word(list.substr(pos, end - pos));
    pos = end + 1;
    if (word.empty()) continue;
    size_t i = 0;
    while (i < word.size() && std::isdigit(static_cast<unsigned char>(word[i]))) ++i;
    PT_CHECK(i >= 2 && i <= 3, "CUDA architecture '" + word + "': expected a number such as 80, 90a, 100-real");
    const int number = std::stoi(word.substr(0, i));
    CudaArchEntry e;
    e.major = number / 10;
    e.minor = number % 10;
    if (i < word.size() && (word[i] == 'a' || word[i] == 'f')) {
      e.arch_specific = true;  // "f" (family-specific, CUDA 12.9+) is at least as narrow for our purposes
      ++i;
    }
    const std::string suffix = word.substr(i);
    PT_CHECK(suffix.empty() || suffix == "-real" || suffix == "-virtual",
             "CUDA architecture '" + word + "': unknown suffix '" + suffix + "' (expected -real or -virtual)");
    e.sass = suffix != "-virtual";
    e.ptx = suffix != "-real";
    out.push_back(e);
  }
  return out;
}

const std::string& compiled_cuda_architectures() {
  static const std::string list = PARATRAIN_CUDA_ARCHITECTURES;
  return list;
}

CudaImageFit cuda_image_fit(const std::vector<CudaArchEntry>& list, int cc_major, int cc_minor) {
  // The CUDA runtime prefers SASS built for the device's own version, then compatible SASS,
  // then PTX it JIT-compiles. An arch-specific image (90a) runs on exactly its own version.
  CudaImageFit fit;
  const int device = cc_major * 10 + cc_minor;
  bool exact_sass_90a = false, other_sass = false, ptx_90a = false, other_ptx = false;
  for (const CudaArchEntry& e : list) {
    const int v = e.major * 10 + e.minor;
    const bool sass_ok = e.sass && (e.arch_specific ? v == device : e.major == cc_major && e.minor <= cc_minor);
    const bool ptx_ok = e.ptx && (e.arch_specific ? v == device : v <= device);
    const bool is_90a = e.arch_specific && v == 90;
    if (sass_ok) (is_90a ? exact_sass_90a : other_sass) = true;
    if (ptx_ok) (is_90a ? ptx_90a : other_ptx) = true;
  }
  fit.runs = exact_sass_90a || other_sass || ptx_90a || other_ptx;
  // A 90a image is the exact match on 9.0, preferred over plain sm_90 SASS and over PTX.
  fit.sm90a_features = exact_sass_90a || (ptx_90a && !other_sass);
  return fit;
}

}  // namespace pt
