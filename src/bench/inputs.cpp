#include "bench/inputs.h"

#include <cstring>

#include "core/allocator.h"
#include "core/error.h"

namespace pt::bench {

std::vector<double> bench_values(int64_t n, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (static_cast<double>(s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0) * 1.7320508075688772;
  }
  return v;
}

Tensor filled(Context& ctx, const Shape& shape, DType dtype, const std::vector<double>& values, const char* name) {
  Tensor host = Tensor::empty(shape, dtype, Device::cpu(), name, MemCategory::Other);
  const size_t n = values.size();
  switch (dtype) {
    case DType::F32:
      for (size_t i = 0; i < n; ++i) host.data_as<float>()[i] = static_cast<float>(values[i]);
      break;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) host.data_as<double>()[i] = values[i];
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) host.data_as<uint16_t>()[i] = float_to_bf16_bits(static_cast<float>(values[i]));
      break;
    default: PT_FAIL(std::string("bench inputs: unsupported dtype ") + dtype_name(dtype));
  }
  if (!ctx.is_cuda()) return host;
  Tensor dev = Tensor::empty(shape, dtype, ctx.device(), name, MemCategory::Activations);
  dev.copy_from(host, ctx);
  return dev;
}

Tensor repeat_rows(const Tensor& host, int64_t times) {
  PT_CHECK(host.device().is_cpu() && host.is_contiguous() && host.dim() >= 1 && times >= 1,
           "repeat_rows: a contiguous host tensor with rows, and a count of at least 1");
  Shape shape = host.shape();
  shape[0] *= times;
  Tensor out = Tensor::empty(shape, host.dtype(), Device::cpu(), "repeated_rows", MemCategory::Other);
  const size_t bytes = host.nbytes();
  for (int64_t k = 0; k < times; ++k)
    std::memcpy(static_cast<char*>(out.data()) + static_cast<size_t>(k) * bytes, host.data(), bytes);
  return out;
}

}  // namespace pt::bench
