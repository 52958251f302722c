#pragma once
// The Hopper copy pipeline of the warp-specialised flash kernels (FlashAttention-3's design):
// tensor-memory-accelerator (TMA) loads of whole tiles, described by a CUtensorMap and issued by
// one producer thread; shared-memory mbarriers that hand each stage from the producer to the math
// warpgroups (full: the bytes landed) and back (empty: every math thread is done reading it);
// setmaxnreg, which moves registers from the producer warpgroup to the math warpgroups.
//
// TMA writes a (rows × 64) bf16 box with CU_TENSOR_MAP_SWIZZLE_128B into exactly the SW128 layout
// of flash_wgmma.cuh (16-byte chunk c of row r at chunk c ^ (r % 8), 1024-byte aligned), so the
// wgmma descriptors read TMA tiles as they read cp.async ones. Rows past the tensor's end are
// zero-filled by the hardware, and the transaction count is always the whole box.
//
// sm_90a instructions: use them only inside PT_FLASH_WGMMA_COMPILED bodies.
#include <cuda.h>

#include <cstdint>

#include "cuda/flash/flash_wgmma.cuh"

namespace pt::cuda::flash {

// One (B, H, T, D) bf16 view as a TMA map whose boxes are (box rows × 64 columns). The three
// outer dimensions are ordered by stride in the map (ascending, as the hardware walks memory);
// row_dim, head_dim and batch_dim say where T, H and B went (1, 2 or 3).
struct TmaRows {  // CUtensorMap carries the 64-byte alignment TMA needs
  CUtensorMap map;
  int row_dim = 1, head_dim = 2, batch_dim = 3;
};

// The map of a (B, H, rows, D) bf16 view at base with element strides s, read in boxes of
// box_rows × 64 (host; flash_tma.cu). Throws when the driver refuses the view.
TmaRows flash_tma_rows(const void* base, const RowStrides& s, int batch, int heads, int rows, int head_dim,
                       int box_rows);

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) before anyone uses them.
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The producer's arrival: this phase completes when `bytes` more have landed through TMA.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Until the phase of parity `parity` has completed (phase k of a barrier has parity k % 2).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile("{\n"
               ".reg .pred done;\n"
               "WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT;\n"
               "}\n" ::"r"(smem_addr(bar)),
               "r"(parity)
               : "memory");
}

// Box at (column c0, row, head, batch) of map into shared dst; completes bytes on bar.
__device__ __forceinline__ void tma_load_box(void* dst, const TmaRows& m, uint64_t* bar, int c0, int row, int h,
                                             int b) {
  auto coord = [&](int dim) { return dim == m.row_dim ? row : dim == m.head_dim ? h : b; };
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(&m.map)), "r"(c0), "r"(coord(1)), "r"(coord(2)), "r"(coord(3)), "r"(smem_addr(bar))
      : "memory");
}

// Box at (column c0, row, head, batch) of map from shared src, an SW128 box as the loads write
// them; rows past the tensor's end are not written. A bulk-group copy: tma_store_wait_read.
__device__ __forceinline__ void tma_store_box(const void* src, const TmaRows& m, int c0, int row, int h, int b) {
  auto coord = [&](int dim) { return dim == m.row_dim ? row : dim == m.head_dim ? h : b; };
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(
                   reinterpret_cast<uint64_t>(&m.map)),
               "r"(c0), "r"(coord(1)), "r"(coord(2)), "r"(coord(3)), "r"(smem_addr(src))
               : "memory");
}
// This thread's bulk copies so far as one group, then until every group has read its shared
// source (the writes to global memory go on without the thread).
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// Rows [row, row + kRows) of head h of batch b, all kHeadDim columns, into an SW128 tile: one
// box per 64-column block.
template <int kRows, int kHeadDim>
__device__ __forceinline__ void tma_load_tile(bf16* dst, const TmaRows& m, uint64_t* bar, int row, int h, int b) {
#pragma unroll
  for (int cb = 0; cb < kHeadDim / 64; ++cb) tma_load_box(dst + cb * kRows * 64, m, bar, cb * 64, row, h, b);
}

// A ring of kStages shared-memory stages that one producer fills and the math warpgroups drain in
// the order of a tile stream: tile t uses stage t % kStages, and its k-th use (k = t / kStages) is
// phase k of both of the stage's barriers. Declared __shared__, set up by init_block.
template <int kStages>
struct StageRing {
  uint64_t full[kStages];   // the stage's bytes have landed (and its producer arrivals are in)
  uint64_t empty[kStages];  // every math thread is done reading it

  static __device__ __forceinline__ int stage(int t) { return t % kStages; }
  // Every thread of the block: thread 0 initialises the ring and `resident` (one arrival: the tiles
  // the block loads once) and makes them visible to the async proxy; then the block waits for it.
  __device__ __forceinline__ void init_block(uint64_t* resident, uint32_t producer_arrivals, uint32_t math_arrivals) {
    if (threadIdx.x == 0) {
      mbar_init(resident, 1);
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        mbar_init(&full[s], producer_arrivals);
        mbar_init(&empty[s], math_arrivals);
      }
      fence_mbar_init();
    }
    __syncthreads();
  }
  // Producer: wait until tile t may overwrite its stage (tile t − kStages released it).
  __device__ __forceinline__ void acquire(int t) {
    if (t >= kStages) mbar_wait(&empty[t % kStages], (t / kStages - 1) & 1);
  }
  __device__ __forceinline__ uint64_t* landed(int t) { return &full[t % kStages]; }  // tile t's TMA barrier
  // Math: wait until tile t has landed; release its stage once every read of it is done.
  __device__ __forceinline__ void wait(int t) { mbar_wait(&full[t % kStages], (t / kStages) & 1); }
  __device__ __forceinline__ void release(int t) { mbar_arrive(&empty[t % kStages]); }
};

// The end of a turn of the overlapped loops (forward, dQ pass): wait for the register-A product of
// tile t (acc += frag · B, issued beside the next tile's scores), keep acc and frag pinned until
// it is done (frag's registers must stay untouched while it reads them), and give tile t's stage
// back to the producer.
template <int kStages, int N, int K>
__device__ __forceinline__ void retire_product(StageRing<kStages>& ring, int t, float (&acc)[N][4],
                                               uint32_t (&frag)[K][4]) {
  wgmma_wait<0>();
  pin(acc);
  pin(frag);
  ring.release(t);
}

// The producer loop of the passes that stream key tiles (the forward, the dQ pass): K and V of
// tiles 0 … n_blocks−1 (kBlockN rows from j·kBlockN) into their ring stages, kStageElems apart.
template <int kBlockN, int kHeadDim, int kStages>
__device__ __forceinline__ void produce_kv_tiles(StageRing<kStages>& ring, bf16* sK, bf16* sV, const TmaRows& k,
                                                 const TmaRows& v, int n_blocks, int h, int b) {
  constexpr int kStageElems = kBlockN * kHeadDim;
  for (int j = 0; j < n_blocks; ++j) {
    ring.acquire(j);
    mbar_arrive_expect_tx(ring.landed(j), 2 * kStageElems * 2);
    tma_load_tile<kBlockN, kHeadDim>(sK + ring.stage(j) * kStageElems, k, ring.landed(j), j * kBlockN, h, b);
    tma_load_tile<kBlockN, kHeadDim>(sV + ring.stage(j) * kStageElems, v, ring.landed(j), j * kBlockN, h, b);
  }
}

// The registers setmaxnreg can share out in a block of `threads` launched with
// __launch_bounds__(threads, 1): each thread starts with 64 K / threads rounded down to a multiple
// of 8 (168 at 384 threads, 128 at 512), and setmaxnreg.inc takes only what the block's own warps
// gave back with setmaxnreg.dec, not the rest of the SM. Asking for more leaves the warpgroups
// that raise their count waiting forever (a 32-register producer beside two 240-register math
// warpgroups at 384 threads did: 1024 registers short). Per-warpgroup counts × 128 must fit.
constexpr int setmaxnreg_budget(int threads) { return 65536 / threads / 8 * 8 * threads; }

// Register budget per thread of the calling warpgroup (all 128 threads execute it).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace pt::cuda::flash
