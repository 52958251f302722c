#pragma once
// Parameters of the flash-attention kernels and their host launchers. Plain C++ (no device
// code) so that ops/flash_attention.cpp, which checks the tensors, can fill and launch them.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace pt::cuda {

// Which bf16 kernels run: Hopper warpgroup MMA (wgmma, head dims 64 and 128) or the mma.sync
// FlashAttention-2 kernels (every head dim). Auto: wgmma where it covers the head dimension.
enum class FlashKernels : uint8_t { Auto, MmaSync, Wgmma };

// Tile shapes of the wgmma kernels (compiled variants; see flash_fwd_wgmma.cu, flash_bwd_wgmma.cu):
// forward warpgroups per block (64 query rows each) × keys per step; warpgroups per block of the
// dK/dV pass (64 keys each) and of the dQ pass (64 queries each). dq_accumulate: no dQ pass; the
// dK/dV pass also adds each tile's dS·K into an fp32 dQ buffer (FlashAttention-2's single pass,
// with FlashAttention-3's bulk reductions; dq_warpgroups is then unused).
struct WgmmaTiles {
  int fwd_warpgroups = 2, fwd_block_n = 64, dkdv_warpgroups = 2, dq_warpgroups = 2;
  bool dq_accumulate = false;
};

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
  // tiles.dq_accumulate only: (B, H, ceil(Tq / 64), 64 · D) fp32 workspace, zeroed by the
  // launcher; each 64-query tile in the wgmma accumulator's fragment order (flash_bwd_wgmma.cu).
  float* dq_accum = nullptr;
  RowStrides do_s, dq_s, dk_s, dv_s;

  int batch = 0, heads = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  float scale = 1.0f;  // 1/sqrt(D)
  bool causal = false;
  FlashKernels kernels = FlashKernels::Auto;
  WgmmaTiles tiles;
};

// Query rows per tile of p.dq_accum, and its size in floats.
constexpr int kDqAccumTileRows = 64;
inline int64_t flash_dq_accum_numel(int64_t batch, int64_t heads, int64_t seqlen_q, int64_t head_dim) {
  const int64_t tiles = (seqlen_q + kDqAccumTileRows - 1) / kDqAccumTileRows;
  return batch * heads * tiles * kDqAccumTileRows * head_dim;
}

// Tensor-core kernels for bf16 (fp32 accumulation), the family chosen by p.kernels.
void flash_fwd_bf16(const FlashParams& p, cudaStream_t stream);
void flash_bwd_bf16(const FlashParams& p, cudaStream_t stream);
// The wgmma kernels alone; false (nothing launched) when they do not cover p.head_dim. The
// backward launches dK/dV and dQ and expects p.delta already computed.
bool flash_fwd_wgmma(const FlashParams& p, cudaStream_t stream);
bool flash_bwd_wgmma(const FlashParams& p, cudaStream_t stream);
// CUDA-core kernels for fp32 inputs (FFMA, fp32 throughout: the tight-tolerance path).
void flash_fwd_fp32(const FlashParams& p, cudaStream_t stream);
void flash_bwd_fp32(const FlashParams& p, cudaStream_t stream);

}  // namespace pt::cuda
