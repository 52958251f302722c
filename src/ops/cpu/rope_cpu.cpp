// CPU rotary embedding over strided (B, H, T, D) views; angles in fp64.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops::cpu {

void rope(Tensor& out, const Tensor& in, double theta, bool inverse) {
  detail::dispatch_cpu_float(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = in.size(0), H = in.size(1), S = in.size(2), D = in.size(3);
    std::vector<double> inv_freq(static_cast<size_t>(D / 2));
    for (int64_t i = 0; i < D / 2; ++i) inv_freq[i] = std::pow(theta, -double(2 * i) / double(D));
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

}  // namespace pt::ops::cpu
