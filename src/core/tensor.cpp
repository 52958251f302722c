#include "core/tensor.h"

#include <cuda_runtime_api.h>

#include <sstream>
#include <utility>

#include "core/context.h"
#include "core/error.h"
#include "core/fp8.h"

namespace pt {

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << "(";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << (s.size() == 1 ? ",)" : ")");
  return o.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

static Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= shape[i];
  }
  return st;
}

Storage::Storage(size_t bytes, DeviceKind kind, const std::string& name, MemCategory category)
    : ptr_(TrackingAllocator::instance().allocate(bytes, kind, name, category)), bytes_(bytes) {}
Storage::~Storage() { TrackingAllocator::instance().release(ptr_); }

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, const std::string& name) {
  return empty(shape, dtype, device, name, TrackingAllocator::current_category());
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, const std::string& name, MemCategory category) {
  // The size in bytes must fit: an absurd shape (from hostile options) is refused here instead
  // of wrapping around to a small allocation.
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape) {
    PT_CHECK(d >= 0, "negative dimension in shape " + shape_str(shape));
    PT_CHECK(!__builtin_mul_overflow(bytes, d, &bytes),
             "tensor '" + name + "' of shape " + shape_str(shape) + " is too large to allocate (its size overflows)");
  }
  auto storage = std::make_shared<Storage>(static_cast<size_t>(bytes), device.kind, name, category);
  Tensor t = view_of(storage->ptr(), shape, dtype, device);
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Context& ctx, const std::string& name) {
  Tensor t = empty(shape, dtype, ctx.device(), name);
  fill_zero(ctx, t.data(), t.device().kind, t.nbytes());
  return t;
}

Tensor Tensor::view_of(void* ptr, const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.data_ = ptr;
  t.dtype_ = dtype;
  t.device_ = device;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.defined_ = true;
  return t;
}

int64_t Tensor::size(int d) const {
  if (d < 0) d += dim();
  PT_CHECK(d >= 0 && d < dim(), "dimension " + std::to_string(d) + " out of range for " + describe());
  return shape_[d];
}

int64_t Tensor::stride(int d) const {
  if (d < 0) d += dim();
  PT_CHECK(d >= 0 && d < dim(), "dimension " + std::to_string(d) + " out of range for " + describe());
  return strides_[d];
}

bool Tensor::is_contiguous() const {
  int64_t acc = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != acc) return false;
    acc *= shape_[i];
  }
  return true;
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + " " + shape_str(shape_) + " " + device_.str();
}

Tensor Tensor::reshape(const Shape& shape) const {
  PT_CHECK(is_contiguous(), "reshape of a non-contiguous tensor " + describe());
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      PT_CHECK(infer < 0, "reshape with more than one -1");
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    PT_CHECK(known > 0 && numel() % known == 0, "cannot reshape " + describe() + " to " + shape_str(shape));
    s[infer] = numel() / known;
  }
  PT_CHECK(shape_numel(s) == numel(), "cannot reshape " + describe() + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = s;
  t.strides_ = contiguous_strides(s);
  return t;
}

Tensor Tensor::narrow(int d, int64_t start, int64_t length) const {
  if (d < 0) d += dim();
  PT_CHECK(d >= 0 && d < dim() && start >= 0 && length >= 0 && start + length <= shape_[d],
           "narrow(" + std::to_string(d) + ", " + std::to_string(start) + ", " + std::to_string(length) +
               ") out of range for " + describe());
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + start * strides_[d] * static_cast<int64_t>(dtype_size(dtype_));
  t.shape_[d] = length;
  return t;
}

Tensor Tensor::reinterpret(int64_t byte_offset, const Shape& shape, DType dtype) const {
  const int64_t bytes = shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype));
  PT_CHECK(is_contiguous() && byte_offset >= 0 && byte_offset + bytes <= static_cast<int64_t>(nbytes()),
           "reinterpret: " + std::to_string(bytes) + " bytes at " + std::to_string(byte_offset) + " do not fit in " +
               describe() + (is_contiguous() ? "" : " (not contiguous)"));
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + byte_offset;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::select(int d, int64_t index) const {
  if (d < 0) d += dim();
  Tensor t = narrow(d, index, 1);
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset_elems) const {
  PT_CHECK(shape.size() == strides.size(), "as_strided: shape and strides differ in length");
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + offset_elems * static_cast<int64_t>(dtype_size(dtype_));
  t.shape_ = shape;
  t.strides_ = strides;
  return t;
}

Tensor Tensor::to(Device device, Context& ctx) const {
  check_contiguous(*this, "Tensor::to");
  Tensor t = empty(shape_, dtype_, device, "copy");
  copy_bytes(ctx, t.data(), device.kind, data_, device_.kind, nbytes());
  return t;
}

void Tensor::copy_from(const Tensor& src, Context& ctx) {
  PT_CHECK(src.shape() == shape_ && src.dtype() == dtype_, "copy_from: " + src.describe() + " into " + describe());
  check_contiguous(*this, "copy_from destination");
  check_contiguous(src, "copy_from source");
  copy_bytes(ctx, data_, device_.kind, src.data(), src.device().kind, nbytes());
}

std::vector<double> Tensor::to_host_f64(Context& ctx) const {
  check_contiguous(*this, "to_host_f64");
  std::vector<char> raw(nbytes());
  copy_bytes(ctx, raw.data(), DeviceKind::CPU, data_, device_.kind, nbytes());
  std::vector<double> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (dtype_) {
      case DType::F32: out[i] = reinterpret_cast<const float*>(raw.data())[i]; break;
      case DType::F64: out[i] = reinterpret_cast<const double*>(raw.data())[i]; break;
      case DType::BF16: out[i] = bf16_bits_to_float(reinterpret_cast<const uint16_t*>(raw.data())[i]); break;
      case DType::F16: out[i] = half_bits_to_float(reinterpret_cast<const uint16_t*>(raw.data())[i]); break;
      case DType::I32: out[i] = reinterpret_cast<const int32_t*>(raw.data())[i]; break;
      case DType::I64: out[i] = static_cast<double>(reinterpret_cast<const int64_t*>(raw.data())[i]); break;
      case DType::U16: out[i] = reinterpret_cast<const uint16_t*>(raw.data())[i]; break;
      case DType::U32: out[i] = reinterpret_cast<const uint32_t*>(raw.data())[i]; break;
      case DType::F8E4M3:
      case DType::F8E5M2:
        out[i] = fp8_bits_to_float(reinterpret_cast<const uint8_t*>(raw.data())[i], fp8_format(dtype_));
        break;
    }
  }
  return out;
}

std::vector<float> Tensor::to_host_f32(Context& ctx) const {
  std::vector<double> d = to_host_f64(ctx);
  return std::vector<float>(d.begin(), d.end());
}

void check_shape(const Tensor& t, const Shape& expected, const char* what) {
  PT_CHECK(t.shape() == expected,
           std::string(what) + ": expected shape " + shape_str(expected) + ", got " + shape_str(t.shape()));
}
void check_dtype(const Tensor& t, DType expected, const char* what) {
  PT_CHECK(t.dtype() == expected,
           std::string(what) + ": expected " + dtype_name(expected) + ", got " + dtype_name(t.dtype()));
}
void check_contiguous(const Tensor& t, const char* what) {
  PT_CHECK(t.is_contiguous(), std::string(what) + ": tensor must be contiguous, got " + t.describe());
}
void check_same_device(const Tensor& a, const Tensor& b, const char* what) {
  PT_CHECK(a.device() == b.device(),
           std::string(what) + ": tensors on " + a.device().str() + " and " + b.device().str());
}

}  // namespace pt
