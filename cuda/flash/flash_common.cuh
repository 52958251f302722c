#pragma once
// What every flash-attention kernel family shares (mma.sync, wgmma, fp32): the masking
// convention, quad reductions over an accumulator row, and the per-(batch, head) pointers into
// the strided (B, H, T, D) views of FlashParams.
#include "cuda/chained_launch.cuh"
#include "cuda/common.cuh"
#include "cuda/flash/flash_params.h"

namespace pt::cuda {

constexpr float kLog2e = 1.4426950408889634f;
// Masked (key after query) scores get this added: the reference implementation's convention.
constexpr float kMaskedScoreBias = -1e6f;

// Max and sum over the 4 lanes (one quad) that hold the same accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Row `row` of head h of batch b in a (B, H, T, D) view with strides s (D contiguous).
template <typename T>
__device__ __forceinline__ T* head_row(const void* base, const RowStrides& s, int b, int h, int64_t row = 0) {
  return static_cast<T*>(const_cast<void*>(base)) + b * s.batch + h * s.head + row * s.row;
}

// Where a block's own loads (cp.async or plain, not TMA) read one (batch, head): Q from query row
// q_row0, K and V from key row k_row0; T is bf16, or float in the fp32 kernels.
template <typename T>
struct HeadRows {
  const T *q, *k, *v;
  __device__ __forceinline__ HeadRows(const FlashParams& p, int b, int h, int q_row0, int k_row0)
      : q(head_row<const T>(p.q, p.q_s, b, h, q_row0)),
        k(head_row<const T>(p.k, p.k_s, b, h, k_row0)),
        v(head_row<const T>(p.v, p.v_s, b, h, k_row0)) {}
};

// The same for a dQ pass, which also reads dO from query row q_row0 (as Q).
template <typename T>
struct DqHeadRows : HeadRows<T> {
  const T* d_o;
  __device__ __forceinline__ DqHeadRows(const FlashParams& p, int b, int h, int q_row0, int k_row0)
      : HeadRows<T>(p, b, h, q_row0, k_row0), d_o(head_row<const T>(p.dout, p.do_s, b, h, q_row0)) {}
};

// The grid of a flash kernel: ceil(rows / block_rows) tiles of one (batch, head), × H × B.
inline dim3 flash_grid(const FlashParams& p, int64_t rows, int block_rows) {
  return dim3(static_cast<unsigned>(ceil_div(rows, block_rows)), p.heads, p.batch);
}

// The tile, head and batch of this block (flash_block_order: longest tile first within groups of
// p.block_group (batch, head) pairs). The GPU starts blocks in blockIdx order, x fastest: that
// order's position is the block's linear index.
template <bool kLastTileLongest>
__device__ __forceinline__ FlashBlock ordered_block(const FlashParams& p) {
  const unsigned linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  return flash_block_order(linear, gridDim.x, gridDim.y, gridDim.y * gridDim.z, unsigned(p.block_group),
                           kLastTileLongest);
}
__device__ __forceinline__ FlashBlock query_tile_block(const FlashParams& p) { return ordered_block<true>(p); }
__device__ __forceinline__ FlashBlock key_tile_block(const FlashParams& p) { return ordered_block<false>(p); }
// The same as the rows a block works on: [row0, row0 + kRows) of head h of batch b, for
// `const auto [m0, h, b] = query_tile_rows<kBlockM>(p);` at the top of a kernel.
struct TileRows {
  int row0, h, b;
};
template <int kRows>
__device__ __forceinline__ TileRows query_tile_rows(const FlashParams& p) {
  const FlashBlock blk = query_tile_block(p);
  return {blk.tile * kRows, blk.h, blk.b};
}
template <int kRows>
__device__ __forceinline__ TileRows key_tile_rows(const FlashParams& p) {
  const FlashBlock blk = key_tile_block(p);
  return {blk.tile * kRows, blk.h, blk.b};
}
// The query tile of a block taken head by head straight from blockIdx (the head blockIdx.y, the
// batch blockIdx.z; the last tile first), for the warp-specialised kernels, whose instructions
// stay as they were measured: taking their block through flash_block_order made the d = 64
// passes slower, also where the order it gives is this one
// (docs/reports/2026-11-25_flash-block-order_h100.md).
__device__ __forceinline__ int query_tile_head_by_head() { return static_cast<int>(gridDim.x - 1 - blockIdx.x); }

// Launches a flash kernel with smem_bytes of dynamic shared memory (raising the kernel's limit
// first: above 48 KB a kernel must opt in) and checks the launch. Chained (cuda/chained_launch.cuh:
// the kernel begins with begin_chained_kernel()) unless kChained is false.
template <bool kChained = true, typename Kernel, typename... Args>
void launch_flash_kernel(Kernel kernel, dim3 grid, int threads, int smem_bytes, cudaStream_t stream,
                         const Args&... args) {
  PT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  launch_kernel(kChained, kernel, grid, dim3(threads), smem_bytes, stream, args...);
  PT_CUDA_CHECK_LAUNCH();
}

}  // namespace pt::cuda
