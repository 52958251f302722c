#pragma once
// Where a tensor lives and which precision mode a run uses.
#include <cstdint>
#include <string>

namespace pt {

enum class DeviceKind : uint8_t { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;  // CUDA ordinal; 0 for the CPU

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceKind::CUDA, i}; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cuda() ? "cuda:" + std::to_string(index) : "cpu"; }
};

// Number of CUDA devices this process can use; 0 when there is no driver or no GPU
// (never throws: the CPU path must work on machines without CUDA).
int cuda_device_count();

// The most memory this process can hold on `d`, in bytes: a GPU's total memory, or for the CPU
// the host's physical memory lowered by a cgroup memory limit (a Slurm job's) and by
// RLIMIT_AS/RLIMIT_DATA. What a model needs is checked against it before anything is built.
double memory_capacity_bytes(const Device& d);

// Precision of a run (PyTorch terms): fp32 = true FP32 GEMMs (TF32 off); tf32 = FP32 storage
// with TF32 tensor-core GEMMs; bf16 = mixed: FP32 master weights, gradients and optimizer
// state, BF16 GEMM operands with FP32 accumulation, norms/softmax/loss in FP32; fp8 = bf16 with
// the GEMMs of the Linear layers the model's table names taking scaled E4M3/E5M2 operands (a GPU
// mode: compute capability 8.9 or newer).
enum class Precision : uint8_t { FP32, TF32, BF16, FP8 };
// Mixed precision with bf16 activations and GEMM operands: bf16, and fp8 around its FP8 GEMMs.
inline bool is_bf16_mixed(Precision p) { return p == Precision::BF16 || p == Precision::FP8; }
const char* precision_name(Precision p);
Precision precision_from_name(const std::string& name);  // throws on unknown

}  // namespace pt
