// CPU rotary embedding over strided (B, H, T, D) views; angles in fp64.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops::cpu {

namespace {
// Pair i's inverse frequency for head dimension D, theta^(-2i/D), in fp64: the angle at
// position t is t times it (rope and the angle table alike).
std::vector<double> inverse_frequencies(int64_t D, double theta) {
  std::vector<double> f(static_cast<size_t>(D / 2));
  for (int64_t i = 0; i < D / 2; ++i) f[i] = std::pow(theta, -double(2 * i) / double(D));
  return f;
}
}  // namespace

void rope(Tensor& out, const Tensor& in, double theta, bool inverse) {
  detail::dispatch_cpu_float(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = in.size(0), H = in.size(1), S = in.size(2), D = in.size(3);
    const std::vector<double> inv_freq = inverse_frequencies(D, theta);
    const T* src = in.data_as<const T>();
    T* dst = out.data_as<T>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < S; ++t) {
          const T* x = src + b * in.stride(0) + h * in.stride(1) + t * in.stride(2);
          T* y = dst + b * out.stride(0) + h * out.stride(1) + t * out.stride(2);
          for (int64_t i = 0; i < D / 2; ++i) {
            const double angle = double(t) * inv_freq[i];
            const T c = T(std::cos(angle)), s = T(inverse ? -std::sin(angle) : std::sin(angle));
            const T x0 = x[2 * i], x1 = x[2 * i + 1];  // both read first: y may alias x
            y[2 * i] = x0 * c - x1 * s;
            y[2 * i + 1] = x0 * s + x1 * c;
          }
        }
  });
}

void rope_table(Tensor& table, double theta) {
  const int64_t positions = table.size(0), half = table.size(1);
  const std::vector<double> inv_freq = inverse_frequencies(2 * half, theta);
  float* cs = table.data_as<float>();
  for (int64_t t = 0; t < positions; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(t) * inv_freq[i];
      cs[2 * (t * half + i)] = float(std::cos(angle));
      cs[2 * (t * half + i) + 1] = float(std::sin(angle));
    }
}

}  // namespace pt::ops::cpu
