#pragma once
// Tensor: a typed, strided view (dtype, shape, strides, device, pointer) over storage that
// the tracking allocator owns, or over memory somebody else owns (ParamStore's flat buffers).
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"

namespace pt {

class Context;
using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(4, 128, 768)"
int64_t shape_numel(const Shape& s);

// Owns one allocation; returns it to the tracking allocator when the last Tensor goes.
class Storage {
 public:
  Storage(size_t bytes, DeviceKind kind, const std::string& name, MemCategory category);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_;
  size_t bytes_;
};

class Tensor {
 public:
  Tensor() = default;

  // New contiguous tensor from the tracking allocator. `name` joins the current allocator
  // scope to tag the allocation; category defaults to the scope's.
  static Tensor empty(const Shape& shape, DType dtype, Device device, const std::string& name = "");
  static Tensor empty(const Shape& shape, DType dtype, Device device, const std::string& name, MemCategory category);
  // Like empty, then zero-filled (on the given context's stream for CUDA tensors).
  static Tensor zeros(const Shape& shape, DType dtype, Context& ctx, const std::string& name = "");
  // Non-owning contiguous view of memory owned elsewhere.
  static Tensor view_of(void* ptr, const Shape& shape, DType dtype, Device device);

  bool defined() const { return defined_; }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int dim() const { return static_cast<int>(shape_.size()); }
  int64_t size(int d) const;  // negative d counts from the end
  int64_t stride(int d) const;
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  std::string describe() const;  // "fp32 (4, 128, 768) cuda:0"

  // Views sharing storage.
  Tensor reshape(const Shape& shape) const;                   // contiguous only; one -1 allowed
  Tensor narrow(int d, int64_t start, int64_t length) const;  // sub-range along dimension d
  Tensor select(int d, int64_t index) const;                  // drop dimension d at index
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset_elems = 0) const;
  // A contiguous (shape, dtype) view of this contiguous tensor's bytes from byte_offset: another
  // type over the same storage, which the view keeps alive (a dead buffer's bytes reused).
  Tensor reinterpret(int64_t byte_offset, const Shape& shape, DType dtype) const;

  // Copies (synchronous with respect to the host when either side is the CPU).
  Tensor to(Device device, Context& ctx) const;
  void copy_from(const Tensor& src, Context& ctx);  // same shape and dtype, both contiguous
  // Whole tensor as fp64 on the host, for tests and checks; any float dtype.
  std::vector<double> to_host_f64(Context& ctx) const;
  std::vector<float> to_host_f32(Context& ctx) const;

 private:
  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::F32;
  Device device_;
  Shape shape_;
  Shape strides_;
  bool defined_ = false;
};

// Shape/type/device preconditions with one clear message each.
void check_shape(const Tensor& t, const Shape& expected, const char* what);
void check_dtype(const Tensor& t, DType expected, const char* what);
void check_contiguous(const Tensor& t, const char* what);
void check_same_device(const Tensor& a, const Tensor& b, const char* what);

}  // namespace pt
