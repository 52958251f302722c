// CPU elementwise ops: one loop each, in the storage type (fp32 or fp64).
#include <cmath>

#include "core/error.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops::cpu {

using detail::dispatch_cpu_float;

namespace {

// Element i of a float tensor of any storage type, as double (cast's source side).
double load_any(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32: return t.data_as<const float>()[i];
    case DType::F64: return t.data_as<const double>()[i];
    case DType::BF16: return bf16_bits_to_float(t.data_as<const uint16_t>()[i]);
    case DType::F16: return half_bits_to_float(t.data_as<const uint16_t>()[i]);
    default: PT_FAIL(std::string("cast: ") + dtype_name(t.dtype()) + " is not a float type");
  }
}
void store_any(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::F32: t.data_as<float>()[i] = static_cast<float>(v); return;
    case DType::F64: t.data_as<double>()[i] = v; return;
    case DType::BF16: t.data_as<uint16_t>()[i] = float_to_bf16_bits(static_cast<float>(v)); return;
    case DType::F16: t.data_as<uint16_t>()[i] = float_to_half_bits(static_cast<float>(v)); return;
    default: PT_FAIL(std::string("cast: ") + dtype_name(t.dtype()) + " is not a float type");
  }
}

template <typename T>
T sigmoid(T a) {
  return T(1) / (T(1) + std::exp(-a));
}

// out[i] = f(in[i]...) for every element, in out's storage type (the inputs' too). An input may
// be out itself: element i is read before it is written.
template <typename F, typename... In>
void map_elements(Tensor& out, F f, const In&... in) {
  dispatch_cpu_float(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_as<T>();
    auto run = [&](const auto*... p) {
      for (int64_t i = 0, n = out.numel(); i < n; ++i) o[i] = f(p[i]...);
    };
    run(in.template data_as<const T>()...);
  });
}

}  // namespace

void cast(Tensor& dst, const Tensor& src, float scale) {
  // Through double: exact for every source type, then one rounding to the destination (a
  // fp64 → bf16 cast rounds twice, through fp32, as torch does). A scale multiplies in the
  // arithmetic type of the GPU kernels: fp32, or fp64 when either side is fp64.
  const int64_t n = src.numel();
  if (scale == 1.0f) {
    for (int64_t i = 0; i < n; ++i) store_any(dst, i, load_any(src, i));
  } else if (src.dtype() == DType::F64 || dst.dtype() == DType::F64) {
    for (int64_t i = 0; i < n; ++i) store_any(dst, i, load_any(src, i) * static_cast<double>(scale));
  } else {
    for (int64_t i = 0; i < n; ++i)
      store_any(dst, i, static_cast<double>(static_cast<float>(load_any(src, i)) * scale));
  }
}

void add(Tensor& out, const Tensor& a, const Tensor& b) {
  map_elements(
      out, [](auto x, auto y) { return x + y; }, a, b);
}

void add_inplace(Tensor& x, const Tensor& y, float alpha) {
  map_elements(
      x, [alpha](auto a, auto b) { return a + decltype(a)(alpha) * b; }, x, y);
}

void scale_inplace(Tensor& x, float alpha) {
  map_elements(
      x, [alpha](auto a) { return a * decltype(a)(alpha); }, x);
}

void add_bias(Tensor& y, const Tensor& bias) {
  dispatch_cpu_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = y.size(0), cols = y.size(1);
    T* py = y.data_as<T>();
    const T* pb = bias.data_as<const T>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) py[r * cols + c] += pb[c];
  });
}

void bias_backward(Tensor& dbias, const Tensor& dy) {
  dispatch_cpu_float(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = dy.size(0), cols = dy.size(1);
    T* pdb = dbias.data_as<T>();
    const T* pdy = dy.data_as<const T>();
    for (int64_t c = 0; c < cols; ++c) {
      T sum = 0;
      for (int64_t r = 0; r < rows; ++r) sum += pdy[r * cols + c];
      pdb[c] += sum;
    }
  });
}

void relu_forward(Tensor& y, const Tensor& x) {
  map_elements(
      y, [](auto v) { return v > decltype(v)(0) ? v : decltype(v)(0); }, x);
}

void relu_backward(Tensor& dx, const Tensor& dy, const Tensor& y) {
  map_elements(
      dx, [](auto d, auto v) { return v > decltype(v)(0) ? d : decltype(d)(0); }, dy, y);
}

void swiglu_forward(Tensor& g, const Tensor& h1, const Tensor& h3, float* g_amax) {
  map_elements(
      g, [](auto a, auto b) { return a * sigmoid(a) * b; }, h1, h3);
  if (g_amax) *g_amax = detail::host_amax(g);
}

void swiglu_backward(Tensor& dh1, Tensor& dh3, const Tensor& dg, const Tensor& h1, const Tensor& h3, Tensor* g,
                     float* dh_amax) {
  if (g) swiglu_forward(*g, h1, h3, nullptr);  // g aliases none of the inputs (checked): before or after is the same
  dispatch_cpu_float(dg.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T *pd1 = dh1.data_as<T>(), *pd3 = dh3.data_as<T>();
    const T *pdg = dg.data_as<const T>(), *p1 = h1.data_as<const T>(), *p3 = h3.data_as<const T>();
    for (int64_t i = 0, n = dg.numel(); i < n; ++i) {
      // silu'(a) = σ(a)·(1 + a·(1 − σ(a))). Read every input before writing: dh1/dh3 may
      // alias dg (never h1/h3, which the caller still needs).
      const T a = p1[i], b = p3[i], d = pdg[i], s = sigmoid(a);
      pd1[i] = d * b * s * (T(1) + a * (T(1) - s));
      pd3[i] = d * a * s;
    }
  });
  if (dh_amax) {
    dh_amax[0] = detail::host_amax(dh1);
    dh_amax[1] = detail::host_amax(dh3);
  }
}

}  // namespace pt::ops::cpu
