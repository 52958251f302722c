// CPU embedding gather and scatter-add (ids validated by the public op).
#include <cstring>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops::cpu {

void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& weight) {
  const int64_t n = ids.numel(), dim = weight.size(1);
  const int32_t* id = ids.data_as<const int32_t>();
  const size_t row_bytes = static_cast<size_t>(dim) * dtype_size(weight.dtype());
  const char* w = static_cast<const char*>(weight.data());
  char* o = static_cast<char*>(out.data());
  for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * row_bytes, w + id[i] * row_bytes, row_bytes);
}

void embedding_backward(Tensor& dweight, const Tensor& dout, const Tensor& ids) {
  detail::dispatch_cpu_float(dweight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = ids.numel(), dim = dweight.size(1);
    const int32_t* id = ids.data_as<const int32_t>();
    const T* d = dout.data_as<const T>();
    T* dw = dweight.data_as<T>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < dim; ++c) dw[id[i] * dim + c] += d[i * dim + c];
  });
}

}  // namespace pt::ops::cpu
