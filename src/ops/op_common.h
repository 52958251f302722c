#pragma once
// Internal to the op implementations: argument checks that fail with one clear message
// naming the op and the argument, and the CPU dtype dispatch. Not part of the op interface.
#include <cmath>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "core/context.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/tensor.h"

namespace pt::ops::detail {

// Checks the arguments of one op call; every failure reads "<op>: <what is wrong>".
class ArgCheck {
 public:
  ArgCheck(const Context& ctx, const char* op) : ctx_(ctx), op_(op) {}

  [[noreturn]] void fail(const std::string& msg) const { PT_FAIL(std::string(op_) + ": " + msg); }
  void require(bool cond, const std::string& msg) const {
    if (!cond) fail(msg);
  }

  // Defined and on the context's device.
  void on_device(const Tensor& t, const char* name) const {
    require(t.defined(), std::string(name) + " is an undefined tensor");
    require(t.device() == ctx_.device(),
            std::string(name) + " is on " + t.device().str() + " but the context runs on " + ctx_.device().str());
  }
  // A float storage type this device computes with: fp32|fp64 on the CPU, fp32|bf16 on the GPU.
  void float_storage(const Tensor& t, const char* name) const {
    on_device(t, name);
    if (ctx_.is_cuda())
      require(t.dtype() == DType::F32 || t.dtype() == DType::BF16,
              std::string(name) + " is " + dtype_name(t.dtype()) + "; on the GPU this op takes fp32 or bf16");
    else
      require(t.dtype() == DType::F32 || t.dtype() == DType::F64,
              std::string(name) + " is " + dtype_name(t.dtype()) +
                  "; on the CPU this op takes fp32 or fp64 (bf16 is GPU-only)");
  }
  // Float storage, contiguous, the shape of `ref`; on the CPU also its dtype (elementwise
  // and row-wise operands).
  void like(const Tensor& t, const char* name, const Tensor& ref, const char* ref_name) const {
    float_storage(t, name);
    contiguous(t, name);
    require(t.shape() == ref.shape(), std::string(name) + " has shape " + shape_str(t.shape()) + " but " + ref_name +
                                          " has " + shape_str(ref.shape()));
    if (!ctx_.is_cuda()) same_dtype(t, name, ref, ref_name);
  }
  void dtype_is(const Tensor& t, const char* name, std::initializer_list<DType> allowed) const {
    on_device(t, name);
    std::string list;
    for (DType d : allowed) {
      if (t.dtype() == d) return;
      list += (list.empty() ? "" : " or ") + std::string(dtype_name(d));
    }
    fail(std::string(name) + " is " + dtype_name(t.dtype()) + ", expected " + list);
  }
  void same_dtype(const Tensor& t, const char* name, const Tensor& ref, const char* ref_name) const {
    require(t.dtype() == ref.dtype(), std::string(name) + " is " + dtype_name(t.dtype()) + " but " + ref_name + " is " +
                                          dtype_name(ref.dtype()) + " (they must match)");
  }
  // The CPU computes every op in one type: there the dtypes must match.
  void cpu_same_dtype(const Tensor& t, const char* name, const Tensor& ref, const char* ref_name) const {
    if (!ctx_.is_cuda()) same_dtype(t, name, ref, ref_name);
  }
  void shape_is(const Tensor& t, const char* name, const Shape& expected) const {
    require(t.shape() == expected,
            std::string(name) + " has shape " + shape_str(t.shape()) + ", expected " + shape_str(expected));
  }
  void rank_is(const Tensor& t, const char* name, int dims) const {
    require(t.dim() == dims,
            std::string(name) + " must be " + std::to_string(dims) + "-D, got " + shape_str(t.shape()));
  }
  void contiguous(const Tensor& t, const char* name) const {
    require(t.is_contiguous(), std::string(name) + " must be contiguous, got shape " + shape_str(t.shape()) +
                                   " with strides " + shape_str(t.strides()));
  }
  // fp32 scalars on the device, `count` of them, contiguous: an FP8 amax or scale (ops/fp8.h),
  // or the amax an op writes beside its output for the FP8 cast that reads it next.
  void fp32_scalars(const Tensor& t, const char* name, int64_t count = 1) const {
    dtype_is(t, name, {DType::F32});
    contiguous(t, name);
    require(t.numel() == count, std::string(name) + " must hold " + std::to_string(count) + " element" +
                                    (count == 1 ? "" : "s") + ", got shape " + shape_str(t.shape()));
  }
  // An op's optional amax output (fp32_scalars), as the pointer its kernel writes: null if none.
  float* amax_output(Tensor* amax, const char* name, int64_t count = 1) const {
    if (!amax) return nullptr;
    fp32_scalars(*amax, name, count);
    return amax->data_as<float>();
  }
  // The usual row-wise op argument: contiguous (rows, cols).
  void matrix(const Tensor& t, const char* name) const {
    rank_is(t, name, 2);
    contiguous(t, name);
  }

 private:
  const Context& ctx_;
  const char* op_;
};

// Calls f(float{}) or f(double{}) for a CPU float dtype (validated by ArgCheck::float_storage).
template <typename F>
void dispatch_cpu_float(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); return;
    case DType::F64: f(double{}); return;
    default: PT_FAIL(std::string("CPU op called with unsupported dtype ") + dtype_name(t));
  }
}

// Whether p starts on a 16-byte boundary (the FP8 GEMMs' operands and casts must).
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// The CPU ops' amax outputs: max |t| over a CPU float tensor as stored, rounded to fp32
// (std::fmax skips NaN, as the GPU's fmaxf).
inline float host_amax(const Tensor& t) {
  double m = 0.0;
  dispatch_cpu_float(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data_as<const T>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) m = std::fmax(m, double(std::fabs(p[i])));
  });
  return static_cast<float>(m);
}

// A GPU op that may run beside the compute stream: gpu(s) on `stream` (null: the compute stream).
// Timed only on the compute stream: work overlapped on another stream is no phase's kernel time
// (its events would also count the time it waits beside the phase's kernels).
template <typename Gpu>
void run_on_stream(Context& ctx, cudaStream_t stream, const char* name, OpFamily family, const OpCost& cost, Gpu gpu) {
  if (stream && stream != ctx.stream()) {
    NvtxRange range(std::string(name) + " (overlapped)");
    gpu(stream);
    return;
  }
  OpScope scope(ctx, name, family, cost);
  gpu(ctx.stream());
}

}  // namespace pt::ops::detail

// The device dispatch of an op: its CUDA launcher on the context's stream, or its CPU reference,
// both named `fn` (pt::cuda::fn(stream, args...) and pt::ops::cpu::fn(args...)).
#define PT_OP_DISPATCH(ctx, fn, ...)               \
  do {                                             \
    if ((ctx).is_cuda())                           \
      ::pt::cuda::fn((ctx).stream(), __VA_ARGS__); \
    else                                           \
      ::pt::ops::cpu::fn(__VA_ARGS__);             \
  } while (0)
