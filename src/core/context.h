#pragma once
// Per-rank execution context: the device, the compute stream, cuBLAS/cuBLASLt handles and
// workspace, the precision mode, and the optional kernel timer. Every op takes one.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/flash_choice.h"

namespace pt {

class KernelTimer;

// Which library call runs a GEMM on the GPU (cuda/matmul.cu). Autotune: each new shape of at
// least 2^30 FLOP is timed once through cuBLAS and cuBLASLt's heuristic candidates and the
// fastest is kept, smaller ones run cuBLAS (`--gemm autotune`, the default); Cublas: cublasGemmStridedBatchedEx always
// (`--gemm cublas`); Lt: cuBLASLt's first heuristic choice, untimed (tests reach the cuBLASLt path with it).
enum class GemmSelect { Autotune, Cublas, Lt };
GemmSelect gemm_select_from_name(const std::string& name);  // "autotune" | "cublas" | "lt"
// The weight-gradient type by name (--grad-dtype): "fp32" | "bf16"; throws naming the flag.
DType grad_dtype_from_name(const std::string& name);
// The residual stream's type by name (--residual-dtype): "fp32" | "bf16"; throws naming the flag.
DType residual_dtype_from_name(const std::string& name);

class Context {
 public:
  Context(Device device, Precision precision = Precision::FP32);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }
  Precision precision() const { return precision_; }
  void set_precision(Precision p);
  // Element type of activations that feed GEMMs: bf16 in bf16 mode on the GPU, else fp32.
  DType act_dtype() const;
  // Element type of the weight gradients backward writes and the optimizer reads
  // (`--grad-dtype`): fp32, or bf16 in bf16 mode on the GPU (the GEMMs write them directly, the
  // collectives move them as they are; master weights and optimizer state stay fp32). Read when
  // a model's ParamStore is finalized: set it before building the model.
  DType grad_dtype() const { return grad_dtype_; }
  void set_grad_dtype(DType d);  // throws for bf16 outside bf16 mode on the GPU
  // Element type of a Transformer's residual stream, the activations between blocks
  // (`--residual-dtype`): fp32 (as PyTorch autocast keeps it), or bf16 in bf16 mode on the GPU (as
  // llm.c keeps it: the residual adds are the output projection's and w2's GEMM epilogues in bf16,
  // RMSNorm reads bf16; the residual gradient stays fp32). Read when a model is built.
  DType residual_dtype() const { return residual_dtype_; }
  void set_residual_dtype(DType d);  // throws for bf16 outside bf16 mode on the GPU
  // Whether the Linear layers the model's FP8 table names run their GEMMs with FP8 operands
  // (ops/fp8_gemm.h). Precision::FP8 sets it, and refuses the CPU and GPUs without FP8 tensor
  // cores; tests set it on an fp32 CPU context to run the emulation the GPU is checked against.
  bool fp8_linear() const { return fp8_linear_; }
  void set_fp8_linear(bool on) { fp8_linear_ = on; }
  // Whether FP8 operands reuse what is known of them (model/fp8_linear.h): a weight's casts kept
  // through a step, an amax kept from forward for backward or written by the kernel that made the
  // tensor. Off, every cast measures its amax and casts afresh: tests check the reuse against it.
  bool fp8_reuse() const { return fp8_reuse_; }
  void set_fp8_reuse(bool on) { fp8_reuse_ = on; }

  cudaStream_t stream() const { return stream_; }  // compute stream (nullptr on the CPU)
  // Every stream's priority, from one query of the device's range (lower numbers run first;
  // all 0 on the CPU). The compute stream runs one above the device's lowest, so that work a
  // side stream runs at the lowest takes only what the compute stream leaves free.
  struct StreamPriorities {
    int lowest = 0;   // the deferred update's side stream (optim/deferred_update.h)
    int compute = 0;  // the compute stream, and side streams that interleave with it
    int highest = 0;  // the communicators' streams: collectives scheduled before compute
  };
  const StreamPriorities& stream_priorities() const { return priorities_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  void* workspace() const { return workspace_; }  // cuBLASLt workspace
  size_t workspace_bytes() const { return workspace_bytes_; }

  void synchronize() const;  // wait for the compute stream (no-op on the CPU)

  // Streaming multiprocessors of the device (0 on the CPU).
  int sm_count() const { return sm_count_; }
  // GEMMs issued from now on target (sm_count − n) SMs, leaving n to kernels running beside
  // them (NCCL's, during an overlapped backward); 0 gives GEMMs every SM again. cuBLAS picks
  // persistent kernels sized to the SMs it targets: sized for all of them, a GEMM's blocks
  // queue behind a collective's (or the collective's behind the GEMM's) and the two serialise.
  void reserve_sms(int n);
  int reserved_sms() const { return reserved_sms_; }
  // SMs kept from GEMMs while an optimizer update runs under the forward (`--update-sms`):
  // DeferredUpdateOptimizer reserves them (reserve_sms) from its launch until the forward has
  // waited for its last chunk, so the update streams on SMs of its own beside the GEMMs. 0: none.
  int update_sms() const { return update_sms_; }
  void set_update_sms(int n);  // n >= 0, a GPU for n > 0, and fewer than its SMs

  GemmSelect gemm_select() const { return gemm_select_; }
  void set_gemm_select(GemmSelect s) { gemm_select_ = s; }

  // The GPU (name, compute capability, whether the image it runs has sm_90a features); empty on
  // the CPU. The constructor refuses a GPU that no compiled image runs on.
  const CudaTarget& target() const { return target_; }
  // Flash-attention kernel family and wgmma tiles (`--flash-kernels`, `--wgmma-tiles`). Throws
  // for an explicit wgmma request this GPU or binary cannot run.
  const FlashChoice& flash() const { return flash_; }
  void set_flash(const FlashChoice& c);

  // Kernel-time breakdown; null unless a benchmark turns it on (see core/profiler.h).
  KernelTimer* timer() const { return timer_; }
  void set_timer(KernelTimer* t) { timer_ = t; }

 private:
  Device device_;
  Precision precision_;
  bool fp8_linear_ = false;
  bool fp8_reuse_ = true;
  DType storage_dtype(DType d, const char* what) const;  // set_grad_dtype's and set_residual_dtype's checks
  DType grad_dtype_ = DType::F32;
  DType residual_dtype_ = DType::F32;
  cudaStream_t stream_ = nullptr;
  StreamPriorities priorities_;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  KernelTimer* timer_ = nullptr;
  int sm_count_ = 0, reserved_sms_ = 0, update_sms_ = 0;
  GemmSelect gemm_select_ = GemmSelect::Autotune;
  CudaTarget target_;
  FlashChoice flash_;
};

// Copy bytes between any two places (host↔device, device↔device) on the context's stream;
// blocks the host only when the host side is involved.
void copy_bytes(Context& ctx, void* dst, DeviceKind dst_kind, const void* src, DeviceKind src_kind, size_t bytes);
void fill_zero(Context& ctx, void* dst, DeviceKind kind, size_t bytes);

}  // namespace pt
