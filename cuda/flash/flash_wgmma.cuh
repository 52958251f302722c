#pragma once
// Hopper warpgroup MMA (wgmma, sm_90a) for the flash kernels: shared-memory tiles in the
// 128-byte-swizzled layout the tensor cores read directly, their matrix descriptors, and
// m64n64k16 products (bf16 × bf16 → fp32) with A from shared memory or from registers.
//
// A warpgroup (4 consecutive warps, 128 threads) computes a 64-row strip; warp w of the group
// owns rows 16w … 16w+15 and its accumulator fragment has the mma.sync layout (flash_softmax.cuh),
// so one set of element-wise code serves both kernel families, and an accumulator read as bf16
// pairs is the register A operand of the next product (acc_to_a in flash_mma.cuh).
//
// Tile layout ("SW128"): a (rows × D) bf16 tile is stored as D/64 column blocks of (rows × 64);
// each 64-element row is 128 bytes and its 16-byte chunk c sits at chunk c ^ (row % 8). Blocks
// start on 1024-byte boundaries (the swizzle is a function of the address). The same bytes serve
//   - as a K-major operand (rows are M or N, columns are K): Q, K, dO as the A or B of Q·Kᵀ, dO·Vᵀ;
//   - as an MN-major operand (rows are K, columns are N): V in P·V, dO in Pᵀ·dO, Q in dSᵀ·Q, K in dS·K,
// so no tile is ever transposed in memory.
#include <cstdint>
#include <type_traits>

#include "cuda/flash/flash_mma.cuh"

// wgmma, setmaxnreg and the bulk copies are sm_90a instructions: the wgmma kernels' bodies are
// compiled into the sm_90a image of a multi-architecture build alone (and parsed, not compiled,
// in the host pass). Every other image gets a body that traps, so ptxas for sm_80, sm_89, sm_100
// … never sees the instructions; the host never launches one there (ops/flash_dispatch.h
// chooses the kernels from the device's compute capability and the architectures compiled in).
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PT_FLASH_WGMMA_COMPILED 1
#else
#define PT_FLASH_WGMMA_COMPILED 0
#endif

namespace pt::cuda::flash {

constexpr int kSwizzleBlockBytes = 1024;  // 8 rows × 128 bytes: the swizzle pattern's period
// The most dynamic shared memory one block may opt into on Hopper (sm_90): 227 KiB.
constexpr int kMaxBlockSmemBytes = 227 * 1024;

// Bytes of a (rows × kHeadDim) SW128 tile.
template <int kRows, int kHeadDim>
constexpr int sw128_tile_bytes() {
  return kRows * kHeadDim * 2;
}

// Element index of row r's 16-byte chunk `chunk` (8 columns from 8·chunk) in a (kRows × …) SW128
// tile: 64-column block chunk / 8, its chunk swizzled by the row within its 8-row group.
template <int kRows>
__device__ __forceinline__ int sw128_chunk_index(int r, int chunk) {
  return (chunk / 8) * kRows * 64 + r * 64 + (((chunk % 8) ^ (r & 7)) * 8);
}

// Rows [0, kRows) of a (rows, kHeadDim) bf16 matrix (row stride ld elements) into an SW128 tile,
// asynchronously; rows ≥ valid_rows are zero-filled.
template <int kRows, int kHeadDim, int kThreads>
__device__ __forceinline__ void load_tile_sw128(bf16* dst, const bf16* src, int64_t ld, int valid_rows) {
  static_assert(kHeadDim % 64 == 0 && kRows % 8 == 0, "SW128 tiles are 64-column blocks of 8-row groups");
  constexpr int kChunksPerRow = kHeadDim / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "tile chunks do not divide among threads");
#pragma unroll
  for (int c0 = 0; c0 < kChunks; c0 += kThreads) {
    const int c = c0 + static_cast<int>(threadIdx.x);
    const int r = c / kChunksPerRow, chunk = c % kChunksPerRow;
    const bool valid = r < valid_rows;
    bf16* d = dst + sw128_chunk_index<kRows>(r, chunk);
    cp_async_16(d, valid ? src + r * ld + chunk * 8 : src, valid);
  }
}

// Shared memory that cp.async (or any ordinary store) wrote is read by wgmma through the async
// proxy: every writing thread fences after its copies landed, before the barrier.
__device__ __forceinline__ void fence_async_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The tile copy of the wgmma kernels as a functor, for the pipeline helpers of flash_mma.cuh.
template <int kRows, int kHeadDim, int kThreads>
struct Sw128TileCopy {
  static constexpr int kStageElems = kRows * kHeadDim;  // one stage of a double buffer
  __device__ __forceinline__ void operator()(bf16* dst, const bf16* src, int64_t ld, int valid_rows) const {
    load_tile_sw128<kRows, kHeadDim, kThreads>(dst, src, ld, valid_rows);
  }
  // What a copying thread does once its copies landed, before the barrier that hands the tiles to
  // the block: wgmma reads them through the async proxy.
  static __device__ __forceinline__ void publish() { fence_async_proxy(); }
};

// This thread's warpgroup, threadIdx.x / 128, broadcast from lane 0: the compiler then knows the
// value is the same across the warp and keeps what is derived from it (the descriptors of a
// warpgroup's rows) in uniform registers, where the wgmma instructions read them, instead of
// rebuilding them in ordinary registers and moving them over (R2UR) before every product.
__device__ __forceinline__ int warpgroup_index() { return __shfl_sync(0xffffffffu, threadIdx.x / 128, 0); }

// Matrix descriptor: start address, leading and stride byte offsets, 128-byte swizzle.
__device__ __forceinline__ uint64_t sw128_desc(const bf16* start, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  const uint32_t a = smem_addr(start);
  return static_cast<uint64_t>((a & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo_bytes >> 4) << 16) |
         (static_cast<uint64_t>(sbo_bytes >> 4) << 32) | (1ull << 62);
}

// The descriptor of the address `elems` bf16 elements (a multiple of 8: 16 bytes) past desc's:
// the start-address field (address >> 4, bits 0–13) plus elems / 8, one 32-bit add on the low word.
// Every shared-memory address on Hopper is below 2^18 (228 KiB), so the field never carries into
// LBO and the result is sw128_desc of the advanced address, bit for bit. The products below build
// one descriptor per operand with sw128_desc's masks and shifts and reach every k-step and column
// block by this add: ptxas cannot fold the masked form itself, and rebuilt each descriptor of a
// tile's 16 products every loop trip (docs/reports/2026-11-26_flash-descriptors-by-add_h100.md).
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, int elems) {
  const uint32_t lo = static_cast<uint32_t>(desc) + static_cast<uint32_t>(elems) / 8;
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

// K-major operand: rows [row0, row0 + M or N) of a kRows-row tile, k-step kk (columns 16kk …).
// Within a 128-byte row a k-step is a 32-byte offset; the hardware applies the swizzle to the
// resulting addresses. SBO: 8-row groups are 1024 bytes apart; LBO is unused with swizzling.
// k_major_desc: the descriptor of the rows' k-step 0; k_major_step: elements to k-step kk.
__device__ __forceinline__ uint64_t k_major_desc(const bf16* tile, int row0) {
  return sw128_desc(tile + row0 * 64, 16, kSwizzleBlockBytes);
}
template <int kRows>
constexpr int k_major_step(int kk) {
  return (kk / 4) * kRows * 64 + (kk % 4) * 16;
}

// MN-major operand: k-step kk is rows 16kk … 16kk+15 of a kRows-row tile, N = the 64 columns of
// block nb. Each product reads one 64-column block, so the offset between column blocks is never
// used; the 8-row groups along K are 1024 bytes apart (SBO). LBO is set to the same 1024 bytes,
// so the descriptor is right whichever of the two fields the hardware takes for that step.
// mn_major_desc: the descriptor of k-step 0, block 0; mn_major_step: elements to (kk, nb).
__device__ __forceinline__ uint64_t mn_major_desc(const bf16* tile) {
  return sw128_desc(tile, kSwizzleBlockBytes, kSwizzleBlockBytes);
}
template <int kRows>
constexpr int mn_major_step(int kk, int nb) {
  return nb * kRows * 64 + kk * 16 * 64;
}

// The same for an m64n128 product reading column blocks 2·nb2 and 2·nb2 + 1 at once. For an
// MN-major SW128 operand LBO is the step between 64-column blocks along N (kRows · 128 bytes in
// these tiles), SBO the step between 8-row groups along K (CUTLASS's make_gmma_desc: the canonical
// layout ((8, n), (8, k)) : ((1, LBO), (8, SBO)) in 16-byte units). Step: mn_major_step(kk, 2·nb2).
template <int kRows>
__device__ __forceinline__ uint64_t mn_major_n128_desc(const bf16* tile) {
  return sw128_desc(tile, kRows * 128, kSwizzleBlockBytes);
}

// wgmma.fence before the first product of a batch (accumulators or A registers were written by
// ordinary instructions); commit the batch; wait until at most N batches are in flight.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Pins registers at a point in the instruction stream: the compiler may not move reads or writes
// of an accumulator across the asynchronous region between a product's issue and its wait.
// T: float (accumulators, "f" registers) or uint32_t (bf16 pairs of an A operand, "r").
template <typename T, int N>
__device__ __forceinline__ void pin(T (&regs)[N][4]) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint32_t>, "pin: float or uint32_t registers");
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (std::is_same_v<T, float>)
        asm volatile("" : "+f"(regs[i][e])::"memory");
      else
        asm volatile("" : "+r"(regs[i][e])::"memory");
    }
}

#define PT_WGMMA_ACC_OPERANDS(d)                                                                               \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),     \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define PT_WGMMA_ACC_LIST                                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

// d (64 × 64) += A (64 × 16, shared; kTransA: MN-major) · B (16 × 64, shared; kTransB: MN-major).
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_ss(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " PT_WGMMA_ACC_LIST
               ", %32, %33, 1, 1, 1, %34, %35;\n"
               : PT_WGMMA_ACC_OPERANDS(d)
               : "l"(desc_a), "l"(desc_b), "n"(kTransA), "n"(kTransB)
               : "memory");
}

// d (64 × 64) += A (64 × 16, registers: this thread's fragment) · B (16 × 64, shared).
template <int kTransB>
__device__ __forceinline__ void wgmma_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " PT_WGMMA_ACC_LIST
               ", {%32, %33, %34, %35}, %36, 1, 1, 1, %37;\n"
               : PT_WGMMA_ACC_OPERANDS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(kTransB)
               : "memory");
}

// The m64n128k16 product, both operands K-major from shared memory: d (64 × 128) += A · B. One
// instruction instead of two m64n64 ones reads A once. The accumulator is two 64-column ones side
// by side (the fragment layout does not depend on N).
#define PT_WGMMA_ACC128_OPERANDS(d)                                                                                   \
  PT_WGMMA_ACC_OPERANDS(d), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), \
      "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),   \
      "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), \
      "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), \
      "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
#define PT_WGMMA_ACC128_LIST                                                                                  \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "     \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, " \
  "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

__device__ __forceinline__ void wgmma_ss_n128(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " PT_WGMMA_ACC128_LIST
               ", %64, %65, 1, 1, 1, 0, 0;\n"
               : PT_WGMMA_ACC128_OPERANDS(d)
               : "l"(desc_a), "l"(desc_b)
               : "memory");
}

// d (64 × 128) += A (64 × 16, registers) · B (16 × 128, shared, MN-major: mn_major_n128_desc).
__device__ __forceinline__ void wgmma_rs_n128_mn(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " PT_WGMMA_ACC128_LIST
               ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
               : PT_WGMMA_ACC128_OPERANDS(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b)
               : "memory");
}

#undef PT_WGMMA_ACC128_LIST
#undef PT_WGMMA_ACC128_OPERANDS
#undef PT_WGMMA_ACC_LIST
#undef PT_WGMMA_ACC_OPERANDS

// The 64-column block nb of an accumulator (N/8 tiles of 8 columns) as a 64 × 64 accumulator.
template <int N>
__device__ __forceinline__ float (&block64(float (&acc)[N][4], int nb))[8][4] {
  return *reinterpret_cast<float(*)[8][4]>(&acc[8 * nb]);
}

// acc (64 × N) += A (64 × K, K-major shared tile at desc_a's rows) · B (K × N, K-major shared
// tile rows = N): the S = Q·Kᵀ shape. Issues K/16 × N/kInstrN products; the caller commits and waits.
// kInstrN: the instruction's N, 64 or 128 (m64n128k16 reads A once per 128 columns: faster in the
// warp-specialised backward, not in the forward's S = Q·Kᵀ, which keeps 64;
// docs/reports/2026-11-25_flash-warp-specialised_h100.md).
template <int K, int N, int kARows, int kBRows, int kInstrN = 64>
__device__ __forceinline__ void wgmma_k_major(float (&acc)[N / 8][4], const bf16* a_tile, int a_row0,
                                              const bf16* b_tile, int b_row0) {
  static_assert(kInstrN == 64 || (kInstrN == 128 && N % 128 == 0), "m64n64 or, where N allows, m64n128 products");
  const uint64_t a0 = k_major_desc(a_tile, a_row0), b0 = k_major_desc(b_tile, b_row0);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const uint64_t a = desc_advance(a0, k_major_step<kARows>(kk));
#pragma unroll
    for (int nb = 0; nb < N / kInstrN; ++nb) {
      const uint64_t b = desc_advance(b0, nb * kInstrN * 64 + k_major_step<kBRows>(kk));
      if constexpr (kInstrN == 128)
        wgmma_ss_n128(*reinterpret_cast<float(*)[16][4]>(&acc[16 * nb]), a, b);
      else
        wgmma_ss<0, 0>(block64<N / 8>(acc, nb), a, b);
    }
  }
}

// acc (64 × N) += A (64 × K, registers: acc_to_a fragments) · B (K × N, MN-major shared tile,
// rows = K): the P·V shape. N is the head dimension (64-column blocks of the tile). kInstrN: the
// instruction's N, 64 or (N a multiple of 128) 128, which reads each A fragment once per 128
// columns instead of once per 64.
template <int K, int N, int kBRows, int kInstrN = 64>
__device__ __forceinline__ void wgmma_regs_mn_major(float (&acc)[N / 8][4], const uint32_t (&a)[K / 16][4],
                                                    const bf16* b_tile) {
  static_assert(kInstrN == 64 || (kInstrN == 128 && N % 128 == 0), "m64n64 or, where N allows, m64n128 products");
  const uint64_t b0 = kInstrN == 128 ? mn_major_n128_desc<kBRows>(b_tile) : mn_major_desc(b_tile);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
#pragma unroll
    for (int nb = 0; nb < N / kInstrN; ++nb) {
      const uint64_t b = desc_advance(b0, mn_major_step<kBRows>(kk, nb * (kInstrN / 64)));
      if constexpr (kInstrN == 128)
        wgmma_rs_n128_mn(*reinterpret_cast<float(*)[16][4]>(&acc[16 * nb]), a[kk], b);
      else
        wgmma_rs<1>(block64<N / 8>(acc, nb), a[kk], b);
    }
  }
}

// The instruction N of the register-A products (P·V, dS·K, dSᵀ·Q, Pᵀ·dO) at head dimension
// kHeadDim: 128 where it divides (d 128), else 64.
template <int kHeadDim>
inline constexpr int kRegsProductN = kHeadDim % 128 == 0 ? 128 : 64;

// The same product issued and waited for, as the last P·V (or dS·K) of a loop: the registers of
// A and acc pinned before the fence and acc after the wait, so that no read or write of them moves
// across the asynchronous product.
template <int K, int N, int kBRows, int kInstrN = 64>
__device__ __forceinline__ void wgmma_regs_mn_major_waited(float (&acc)[N / 8][4], uint32_t (&a)[K / 16][4],
                                                           const bf16* b_tile) {
  pin(a);
  pin(acc);
  wgmma_fence();
  wgmma_regs_mn_major<K, N, kBRows, kInstrN>(acc, a, b_tile);
  wgmma_commit();
  wgmma_wait<0>();
  pin(acc);
}

// acc (64 × N) += A (64 × K, MN-major shared tile: rows a_row0 … are K, its single 64-column
// block is M) · B (K × N, MN-major shared tile: rows b_row0 … are K, columns from 64-column block
// b_block0): the dQ = dS·K shape with dSᵀ staged in shared memory, whose rows are keys.
template <int K, int N, int kARows, int kBRows>
__device__ __forceinline__ void wgmma_mn_major(float (&acc)[N / 8][4], const bf16* a_tile, int a_row0,
                                               const bf16* b_tile, int b_row0, int b_block0) {
  const uint64_t a0 = mn_major_desc(a_tile + a_row0 * 64), b0 = mn_major_desc(b_tile + b_row0 * 64);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int nb = 0; nb < N / 64; ++nb)
      wgmma_ss<1, 1>(block64<N / 8>(acc, nb), desc_advance(a0, mn_major_step<kARows>(kk, 0)),
                     desc_advance(b0, mn_major_step<kBRows>(kk, b_block0 + nb)));
}

// This warp's 16 rows of dSᵀ (bf16 A fragments of the dK product: rows are keys, columns the
// kCols queries) into the (kRows × kCols) SW128 tile sdS at row row0, so that the tensor cores read
// dS = (dSᵀ)ᵀ back as an MN-major A operand (wgmma_mn_major; one 64-column block per 64 queries).
// Rows of keys past the end are written as zeros: their P can overflow (S = 0 against a
// zero-filled K row, minus a very negative L), and inf · 0 in dS·K would be NaN.
template <int kRows, int kCols>
__device__ __forceinline__ void store_ds_rows(bf16* sdS, const uint32_t (&ds)[kCols / 16][4], int row0, bool lo_valid,
                                              bool hi_valid) {
  static_assert(kCols % 64 == 0, "dSᵀ rows are whole 64-column SW128 blocks");
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint32_t* words = reinterpret_cast<uint32_t*>(sdS);
#pragma unroll
  for (int kk = 0; kk < kCols / 16; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e) {  // acc_to_a: e = 0, 1 columns 16kk + 2t (rows g, g+8); e = 2, 3 + 8
      const int hi = e & 1, r = row0 + g + 8 * hi, chunk = 2 * kk + (e >> 1);  // 16-byte chunk of the row
      const int elem = sw128_chunk_index<kRows>(r, chunk) + 2 * t;
      words[elem / 2] = (hi ? hi_valid : lo_valid) ? ds[kk][e] : 0u;
    }
}

// Fragment order, the layout p.dq_accum keeps each 64-query tile in: float4 e of column tile j of
// the warpgroup's thread f at float4 index j·128 + f, so consecutive threads touch consecutive 16
// bytes. This thread's index for column tile j (flash_dq_from_accum_kernel undoes it).
__device__ __forceinline__ int fragment_order_float4(int j) { return j * 128 + static_cast<int>(threadIdx.x % 128); }

// Barrier kId (1 … 15; 0 is __syncthreads) among kThreads threads, e.g. one warpgroup's 128. The
// id is an immediate: a run-time id makes the compiler reserve all 16 of the block's barriers.
template <int kId, int kThreads>
__device__ __forceinline__ void named_barrier_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kThreads) : "memory");
}
// Arrive at barrier kId without waiting: counts toward the kThreads its bar.sync side waits for.
template <int kId, int kThreads>
__device__ __forceinline__ void named_barrier_arrive() {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(kId), "n"(kThreads) : "memory");
}

// global[0, 4) += v as fp32, each element atomically in L2, nothing returned (sm_90's vector
// reduction; dst 16-byte aligned).
__device__ __forceinline__ void red_add_v4(float* dst, const float (&v)[4]) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
               : "memory");
}

// Bulk asynchronous reduction (the tensor-memory accelerator's copy engine): global[0, bytes) +=
// shared[0, bytes) as fp32, each element atomically in L2. Both addresses 16-byte aligned, bytes
// a multiple of 16; one thread issues it, after the writers' fence_async_proxy and a barrier.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const float* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(smem_addr(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N committed bulk groups still read their shared source (it may be rewritten).
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Until at most N committed bulk groups are in flight at all (their writes done).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// The block's dynamic shared memory rounded up to the swizzle period (launch with 1 KiB extra).
__device__ __forceinline__ unsigned char* sw128_smem_base(unsigned char* raw) {
  const uint32_t a = smem_addr(raw);
  return raw + ((kSwizzleBlockBytes - (a % kSwizzleBlockBytes)) % kSwizzleBlockBytes);
}
// The same for the kernel's own dynamic shared memory, declared here once for every wgmma kernel.
__device__ __forceinline__ unsigned char* sw128_smem() {
  extern __shared__ unsigned char smem_raw[];
  return sw128_smem_base(smem_raw);
}

}  // namespace pt::cuda::flash
