#pragma once
// Parameters of the flash-attention kernels and their host launchers. Plain C++ (no device
// code) so that ops/flash_attention.cpp, which checks the tensors, can fill and launch them.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/flash_choice.h"

namespace pt::cuda {

// The head dimensions the kernels are instantiated for, and which of them the wgmma kernels
// cover. Every launcher, check and message derives from this list: adding a head dimension is
// one entry here (plus tile traits where a kernel family's static checks ask for them).
struct FlashHeadDim {
  int d;
  bool wgmma;
};
inline constexpr FlashHeadDim kFlashHeadDims[] = {{16, false}, {32, false}, {64, true}, {80, false}, {128, true}};
inline constexpr int kNumFlashHeadDims = sizeof(kFlashHeadDims) / sizeof(kFlashHeadDims[0]);

constexpr bool flash_covers_head_dim(int64_t d, bool wgmma_only = false) {
  for (const FlashHeadDim& e : kFlashHeadDims)
    if (e.d == d && (e.wgmma || !wgmma_only)) return true;
  return false;
}

// The compile-time switch every launcher uses: calls
//   launch(std::integral_constant<int, D>{}, std::bool_constant<kCausal>{})
// for the entry of kFlashHeadDims equal to head_dim (kWgmmaOnly: among the wgmma ones only) and
// the causal flag; returns false (nothing called) when no entry matches. Only the entries it can
// call are instantiated.
namespace flash_switch_detail {
template <bool kWgmmaOnly, int I, class Launch>
bool try_entry(int head_dim, bool causal, Launch& launch) {
  constexpr FlashHeadDim e = kFlashHeadDims[I];
  if constexpr (kWgmmaOnly && !e.wgmma) {
    return false;
  } else {
    if (head_dim != e.d) return false;
    if (causal)
      launch(std::integral_constant<int, e.d>{}, std::true_type{});
    else
      launch(std::integral_constant<int, e.d>{}, std::false_type{});
    return true;
  }
}
template <bool kWgmmaOnly, class Launch, int... I>
bool switch_entries(int head_dim, bool causal, Launch& launch, std::integer_sequence<int, I...>) {
  return (try_entry<kWgmmaOnly, I>(head_dim, causal, launch) || ...);
}
}  // namespace flash_switch_detail

template <bool kWgmmaOnly = false, class Launch>
bool flash_head_dim_switch(int head_dim, bool causal, Launch&& launch) {
  return flash_switch_detail::switch_entries<kWgmmaOnly>(head_dim, causal, launch,
                                                         std::make_integer_sequence<int, kNumFlashHeadDims>{});
}

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
  // With tiles.dq_fixed_point it holds int32 instead (cuda/flash/flash_dq_fixed.cuh), and two more
  // int32 arrays follow it in the same workspace (flash_dq_workspace_numel): each query row's
  // bound exponent (B, H, Tq) and each head's two bounds (B, H, 2), written by the delta kernel.
  float* dq_accum = nullptr;
  int* dq_row_exp = nullptr;     // (B, H, Tq); tiles.dq_fixed_point only
  int* dq_head_bound = nullptr;  // (B, H, 2): max |K| and max Σ V² over the head, fp32 bits
  RowStrides do_s, dq_s, dk_s, dv_s;
  // Optional, bf16 kernels: (max(Tq, Tk), D/2) pairs of fp32 (cos, sin), RoPE's angle of each
  // column pair at each position (ops::rope_table). When set, dQ and dK are stored rotated back
  // (the inverse RoPE of their positions), which the model would otherwise run as its own pass.
  const float* rope_cos_sin = nullptr;

  int batch = 0, heads = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  float scale = 1.0f;  // 1/sqrt(D)
  bool causal = false;
  FlashKernels kernels = FlashKernels::Auto;
  WgmmaTiles tiles;
  // (batch, head) pairs per group of the blocks' tile-major order (flash_block_order):
  // flash_block_group's choice; 1 is the plain head-by-head order.
  int block_group = 1;
};

// flash_head_dim_switch over the wgmma entries, for p's head dimension and causal flag; any other
// head dimension is refused with one message. For the wgmma launchers.
template <class Launch>
void flash_wgmma_switch(const FlashParams& p, Launch&& launch) {
  PT_CHECK(flash_head_dim_switch<true>(p.head_dim, p.causal, launch),
           "flash attention: no wgmma kernel for head dimension " + std::to_string(p.head_dim));
}

#if defined(__CUDACC__)
#define PT_FLASH_HOST_DEVICE __host__ __device__
#else
#define PT_FLASH_HOST_DEVICE
#endif

// The tile, head and batch that the block at linear position `linear` (the order the GPU starts
// blocks in) of a (tiles, heads, batch) grid takes. The grid is read tile-major within groups of
// `group` (batch, head) pairs: position r of a group takes work rank r / pairs, so every pair's
// longest tile starts before any pair's second longest. Under a causal mask a query tile's work
// grows with its index (forward and dQ passes: last_tile_longest, the last tile first) and a key
// tile's shrinks with it (dK/dV passes: the first). Read head by head (group 1), a grid of a few
// waves ended with the long tiles of its last heads starting late (XL: B 4 × H 25 × 8 tiles at
// T 512, 1.5 waves); longest first leaves the short tiles for the tail. Group 1 where a head's
// consecutive tiles, running together, share their K and V reads better (flash_block_group).
struct FlashBlock {
  int tile, h, b;
};
PT_FLASH_HOST_DEVICE inline FlashBlock flash_block_order(unsigned linear, unsigned tiles, unsigned heads,
                                                         unsigned pairs, unsigned group, bool last_tile_longest) {
  const unsigned first = linear / (group * tiles) * group;  // the group's first pair
  const unsigned in_group = pairs - first < group ? pairs - first : group;
  const unsigned r = linear - first * tiles, rank = r / in_group, pair = first + r % in_group;
  return {static_cast<int>(last_tile_longest ? tiles - 1 - rank : rank), static_cast<int>(pair % heads),
          static_cast<int>(pair / heads)};
}

// The group of flash_block_order: every (batch, head) pair up to kLongestFirstMaxRows rows (the
// longer of Tq and Tk), one pair (head by head) beyond: grids of a few waves gain from taking the
// longest tiles first; on long rows the blocks running together would belong to every head and
// share fewer K and V reads in L2 (docs/reports/2026-11-25_flash-block-order_h100.md).
constexpr int64_t kLongestFirstMaxRows = 2048;
inline int flash_block_group(int64_t pairs, int64_t rows) {
  return rows <= kLongestFirstMaxRows && pairs > 0 ? static_cast<int>(pairs < INT32_MAX ? pairs : INT32_MAX) : 1;
}

// Query rows per tile of p.dq_accum, and its size in floats.
constexpr int kDqAccumTileRows = 64;
inline int64_t flash_dq_accum_numel(int64_t batch, int64_t heads, int64_t seqlen_q, int64_t head_dim) {
  const int64_t tiles = (seqlen_q + kDqAccumTileRows - 1) / kDqAccumTileRows;
  return batch * heads * tiles * kDqAccumTileRows * head_dim;
}
// The whole dQ accumulation workspace of p's call in 4-byte words, the one place its layout is
// decided: the buffer, then with fixed point the row exponents (B, H, Tq) and the head bounds
// (B, H, 2) (FlashParams::dq_row_exp, dq_head_bound). Zeroed as one.
inline int64_t flash_dq_workspace_numel(const FlashParams& p) {
  const int64_t bh = static_cast<int64_t>(p.batch) * p.heads;
  return flash_dq_accum_numel(p.batch, p.heads, p.seqlen_q, p.head_dim) +
         (p.tiles.dq_fixed_point ? bh * (p.seqlen_q + 2) : 0);
}
// Points p's dQ accumulation pointers into `words`, a workspace of flash_dq_workspace_numel(p).
inline void flash_point_dq_workspace(FlashParams& p, float* words) {
  p.dq_accum = words;
  if (!p.tiles.dq_fixed_point) return;
  p.dq_row_exp = reinterpret_cast<int*>(words + flash_dq_accum_numel(p.batch, p.heads, p.seqlen_q, p.head_dim));
  p.dq_head_bound = p.dq_row_exp + static_cast<int64_t>(p.batch) * p.heads * p.seqlen_q;
}

// Tensor-core kernels for bf16 (fp32 accumulation), the family in p.kernels: MmaSync or Wgmma,
// already resolved by the caller (ops::choose_flash_kernels; never Auto here).
void flash_fwd_bf16(const FlashParams& p, cudaStream_t stream);
void flash_bwd_bf16(const FlashParams& p, cudaStream_t stream);
// The wgmma kernels alone (p.head_dim among the wgmma entries of kFlashHeadDims). The backward
// launches dK/dV and dQ and expects p.delta already computed.
void flash_fwd_wgmma(const FlashParams& p, cudaStream_t stream);
// The warp-specialised forward (TMA producer, mbarrier stages; flash_fwd_ws.cu), which
// flash_fwd_wgmma runs when p.tiles.fwd_warp_specialized.
void flash_fwd_wgmma_ws(const FlashParams& p, cudaStream_t stream);
// The warp-specialised backward passes (flash_bwd_ws.cu), which flash_bwd_wgmma runs when
// p.tiles.dkdv_warp_specialized / dq_warp_specialized.
void flash_bwd_dkdv_wgmma_ws(const FlashParams& p, cudaStream_t stream);
void flash_bwd_dq_wgmma_ws(const FlashParams& p, cudaStream_t stream);
void flash_bwd_wgmma(const FlashParams& p, cudaStream_t stream);
// CUDA-core kernels for fp32 inputs (FFMA, fp32 throughout: the tight-tolerance path).
void flash_fwd_fp32(const FlashParams& p, cudaStream_t stream);
void flash_bwd_fp32(const FlashParams& p, cudaStream_t stream);

}  // namespace pt::cuda
