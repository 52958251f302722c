#include "core/context.h"
#include "core/enum_names.h"

#include <cstring>
#include <string>

#include "core/allocator.h"
#include "core/context_memory.h"
#include "core/cuda_arch.h"
#include "core/error.h"
#include "core/fp8.h"

namespace pt {

namespace {
constexpr EnumName<GemmSelect> kGemmSelects[] = {
    {GemmSelect::Autotune, "autotune"}, {GemmSelect::Cublas, "cublas"}, {GemmSelect::Lt, "lt"}};
}

GemmSelect gemm_select_from_name(const std::string& name) { return enum_from_name(kGemmSelects, name, "--gemm"); }

namespace {
// The storage types a run may choose for its weight gradients and its residual stream.
constexpr EnumName<DType> kStorageDtypes[] = {{DType::F32, "fp32"}, {DType::BF16, "bf16"}};
}  // namespace
DType grad_dtype_from_name(const std::string& name) { return enum_from_name(kStorageDtypes, name, "--grad-dtype"); }
DType residual_dtype_from_name(const std::string& name) {
  return enum_from_name(kStorageDtypes, name, "--residual-dtype");
}

std::string wgmma_unavailable_message(const CudaTarget& t) {
  return "the wgmma flash kernels need an sm_90a image on a compute-capability-9.0 GPU; " + t.name +
         " has compute capability " + std::to_string(t.cc_major) + "." + std::to_string(t.cc_minor) +
         " and this binary holds CUDA architectures " + t.compiled +
         " (use --flash-kernels auto or mma, or build with 90a in CMAKE_CUDA_ARCHITECTURES)";
}

Context::Context(Device device, Precision precision)
    : device_(device), precision_(precision), fp8_linear_(precision == Precision::FP8) {
  PT_CHECK(!(fp8_linear_ && !device_.is_cuda()),
           "--precision fp8 needs a GPU with FP8 tensor cores (compute capability 8.9 or newer); this run is on the "
           "CPU");
  if (!device_.is_cuda()) return;
  PT_CUDA_CHECK(cudaSetDevice(device_.index));
  cudaDeviceProp prop{};
  PT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_.index));
  target_.name = prop.name;
  target_.cc_major = prop.major;
  target_.cc_minor = prop.minor;
  target_.compiled = compiled_cuda_architectures();
  const CudaImageFit fit = cuda_image_fit(parse_cuda_architectures(target_.compiled), prop.major, prop.minor);
  PT_CHECK(fit.runs, "this paratrain was built for CUDA architectures " + target_.compiled +
                         ", none of which runs on " + device_.str() + " (" + target_.name + ", compute capability " +
                         std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                         "): rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(prop.major) +
                         std::to_string(prop.minor) + " added (README: Building)");
  target_.sm90a_features = fit.sm90a_features;
  PT_CHECK(!fp8_linear_ || fp8_unsupported_reason(target_).empty(),
           "--precision fp8 on " + device_.str() + ": " + fp8_unsupported_reason(target_));
  // Lower numbers run first: `least` is the lowest priority (0), `greatest` the highest (−5 on Hopper).
  int least = 0, greatest = 0;
  PT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  priorities_ = {least, least > greatest ? least - 1 : least, greatest};
  PT_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priorities_.compute));
  PT_CUBLAS_CHECK(cublasCreate(&cublas_));
  PT_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  PT_CUBLAS_CHECK(cublasLtCreate(&cublaslt_));
  workspace_bytes_ = kCublasWorkspaceBytes;
  workspace_ = TrackingAllocator::instance().allocate(workspace_bytes_, DeviceKind::CUDA, "cublas_workspace",
                                                      MemCategory::Workspace);
  PT_CUBLAS_CHECK(cublasSetWorkspace(cublas_, workspace_, workspace_bytes_));
  set_precision(precision_);
  PT_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_.index));
}

void Context::set_flash(const FlashChoice& c) {
  PT_CHECK(!(is_cuda() && c.kernels == FlashKernels::Wgmma && !target_.sm90a_features),
           wgmma_unavailable_message(target_));
  flash_ = c;
}

void Context::set_update_sms(int n) {
  // The command lines refuse a negative N first, with their numeric rules (cli/option_rules.cpp).
  PT_CHECK(n >= 0, "--update-sms must be >= 0, got " + std::to_string(n));
  PT_CHECK(n == 0 || device_.is_cuda(), "--update-sms needs a GPU (this run is on the CPU)");
  PT_CHECK(n < sm_count_ || n == 0, "--update-sms " + std::to_string(n) + " leaves none of the device's " +
                                        std::to_string(sm_count_) + " SMs to GEMMs");
  update_sms_ = n;
}

void Context::reserve_sms(int n) {
  PT_CHECK(n >= 0, "reserve_sms: a negative SM count (" + std::to_string(n) + ")");
  if (!device_.is_cuda() || n == reserved_sms_) return;
  PT_CHECK(n < sm_count_, "reserving " + std::to_string(n) + " of the device's " + std::to_string(sm_count_) +
                              " SMs leaves none for GEMMs");
  PT_CUBLAS_CHECK(cublasSetSmCountTarget(cublas_, n == 0 ? 0 : sm_count_ - n));
  reserved_sms_ = n;
}

Context::~Context() {
  if (!device_.is_cuda()) return;
  // Destructors must not throw: report nothing, free what we can.
  cudaStreamSynchronize(stream_);
  TrackingAllocator::instance().release(workspace_);
  cublasLtDestroy(cublaslt_);
  cublasDestroy(cublas_);
  cudaStreamDestroy(stream_);
}

void Context::set_precision(Precision p) {
  precision_ = p;
  if (!device_.is_cuda()) return;
  // fp32 is true FP32: default math never uses TF32 unless asked (as torch with allow_tf32=False).
  cublasMath_t mode = p == Precision::TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  PT_CUBLAS_CHECK(cublasSetMathMode(cublas_, mode));
}

// d as a type that bf16 mixed precision may lower (the weight gradients, the residual stream):
// fp32, or bf16 in bf16 mode on a GPU; `what` names it in the messages.
DType Context::storage_dtype(DType d, const char* what) const {
  PT_CHECK(d == DType::F32 || d == DType::BF16, std::string(what) + ": fp32 or bf16, not " + dtype_name(d));
  PT_CHECK(d == DType::F32 || (is_cuda() && is_bf16_mixed(precision_)),
           std::string(what) + " in bf16 needs bf16 mixed precision on a GPU (--precision bf16)");
  return d;
}

void Context::set_grad_dtype(DType d) { grad_dtype_ = storage_dtype(d, "the weight-gradient type"); }
void Context::set_residual_dtype(DType d) { residual_dtype_ = storage_dtype(d, "the residual stream's type"); }

DType Context::act_dtype() const { return (is_bf16_mixed(precision_) && device_.is_cuda()) ? DType::BF16 : DType::F32; }

void Context::synchronize() const {
  if (device_.is_cuda()) PT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void copy_bytes(Context& ctx, void* dst, DeviceKind dst_kind, const void* src, DeviceKind src_kind, size_t bytes) {
  if (bytes == 0) return;
  if (dst_kind == DeviceKind::CPU && src_kind == DeviceKind::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  PT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx.stream()));
  if (dst_kind == DeviceKind::CPU || src_kind == DeviceKind::CPU) PT_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
}

void fill_zero(Context& ctx, void* dst, DeviceKind kind, size_t bytes) {
  if (bytes == 0) return;
  if (kind == DeviceKind::CPU)
    std::memset(dst, 0, bytes);
  else
    PT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, ctx.stream()));
}

}  // namespace pt
