#pragma once
// Parameters of the flash-attention kernels and their host launchers. Plain C++ (no device
// code) so that ops/flash_attention.cpp, which checks the tensors, can fill and launch them.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace pt::cuda {

// Element strides of one (B, H, T, D) view; the D stride is 1.
struct RowStrides {
  int64_t batch = 0, head = 0, row = 0;
};

struct FlashParams {
  // Forward inputs/outputs. Element type: bf16 or fp32 (the launcher named by the dtype).
  const void* q = nullptr;  // (B, H, Tq, D)
  const void* k = nullptr;  // (B, H, Tk, D)
  const void* v = nullptr;  // (B, H, Tk, D)
  void* o = nullptr;        // (B, H, Tq, D)
  float* lse = nullptr;     // (B, H, Tq) contiguous, natural log of the scaled scores' sum
  RowStrides q_s, k_s, v_s, o_s;

  // Backward only.
  const void* dout = nullptr;  // (B, H, Tq, D)
  void* dq = nullptr;          // (B, H, Tq, D)
  void* dk = nullptr;          // (B, H, Tk, D)
  void* dv = nullptr;          // (B, H, Tk, D)
  float* delta = nullptr;      // (B, H, Tq) contiguous workspace: rowsum(dO ∘ O)
  RowStrides do_s, dq_s, dk_s, dv_s;

  int batch = 0, heads = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  float scale = 1.0f;  // 1/sqrt(D)
  bool causal = false;
};

// Tensor-core kernels (mma.sync m16n8k16, bf16 operands, fp32 accumulation).
void flash_fwd_bf16(const FlashParams& p, cudaStream_t stream);
void flash_bwd_bf16(const FlashParams& p, cudaStream_t stream);
// CUDA-core kernels for fp32 inputs (FFMA, fp32 throughout: the tight-tolerance path).
void flash_fwd_fp32(const FlashParams& p, cudaStream_t stream);
void flash_bwd_fp32(const FlashParams& p, cudaStream_t stream);

}  // namespace pt::cuda
