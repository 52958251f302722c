#pragma once
// Warp-level building blocks of the tensor-core flash kernels: asynchronous tile copies
// (cp.async, 16-byte chunks, zero-filled tails), ldmatrix fragment loads, and the
// mma.sync m16n8k16 (bf16 × bf16 → fp32) products a warp runs on a 16-row strip.
//
// Fragment layouts (PTX ISA, "mma.m16n8k16"), lane = 4·g + t (g = lane/4, t = lane%4):
//   A 16×16 (row-major): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B 16×8  (k × n):     b0 = B[2t..2t+1][g],  b1 = B[2t+8..2t+9][g]
//   C 16×8  (fp32):      c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
// So an accumulator tile read as bf16 pairs is already the A fragment of the next product
// (P·V, dS·K): no shared-memory round trip for P or dS.
//
// Shared-memory tiles hold rows of D bf16 padded by 8 elements (16 bytes): a row stride of
// D/8 + 1 (odd) 16-byte chunks puts the 8 rows an ldmatrix phase reads in 8 different bank
// groups for every D, so neither ldmatrix nor the cp.async stores conflict.
#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/flash/flash_common.cuh"
#include "cuda/flash/flash_params.h"

namespace pt::cuda::flash {

using bf16 = __nv_bfloat16;

template <int kHeadDim>
constexpr int smem_ld() {
  return kHeadDim + 8;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared, asynchronous; when !valid nothing is read and zeros are written.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
}
// 4 bytes (one fp32) global → shared, zero-filled when !valid.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats → one register of bf16 pairs, the lower column in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// 2^x on the special-function unit; 2^-inf = +0, which the masking relies on.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Rows [0, kRows) of a (rows, kHeadDim) bf16 matrix at `src` (row stride `ld` elements) into a
// padded shared tile; rows ≥ valid_rows are zero-filled, so tail tiles need no special case
// in the products (only in the masks). The last round of chunks is partial when they do not
// divide among the threads (d = 80).
template <int kRows, int kHeadDim, int kThreads>
__device__ __forceinline__ void load_tile_async(bf16* dst, const bf16* src, int64_t ld, int valid_rows) {
  constexpr int kChunksPerRow = kHeadDim / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
#pragma unroll
  for (int c0 = 0; c0 < kChunks; c0 += kThreads) {
    const int c = c0 + static_cast<int>(threadIdx.x);
    if (kChunks % kThreads == 0 || c < kChunks) {
      const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const bool valid = r < valid_rows;
      cp_async_16(dst + r * smem_ld<kHeadDim>() + col, valid ? src + r * ld + col : src, valid);
    }
  }
}

// The tile copy of the mma.sync kernels as a functor, for the pipeline helpers below.
template <int kRows, int kHeadDim, int kThreads>
struct PaddedTileCopy {
  static constexpr int kStageElems = kRows * smem_ld<kHeadDim>();  // one stage of a double buffer
  __device__ __forceinline__ void operator()(bf16* dst, const bf16* src, int64_t ld, int valid_rows) const {
    load_tile_async<kRows, kHeadDim, kThreads>(dst, src, ld, valid_rows);
  }
  // What a copying thread does once its copies landed, before the barrier that hands the tiles to
  // the block: nothing, ldmatrix reads them through the generic proxy.
  static __device__ __forceinline__ void publish() {}
};

// One turn of a two-stage cp.async pipeline: start the copies of the next tile (fetch_next,
// when there is one) and wait for the current tile's, committed one turn earlier. The caller
// then orders the copies with a block barrier (and, for tiles the tensor cores read through the
// async proxy, fence.proxy.async first).
template <class FetchNext>
__device__ __forceinline__ void pipeline_turn(bool has_next, FetchNext&& fetch_next) {
  if (has_next) {
    fetch_next();
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
}

// The key tiles a query tile [m0, m0 + kBlockM) visits: [0, n_blocks); those in [0, n_full)
// lie wholly below the diagonal of every one of its rows and inside the keys (no mask).
template <int kBlockM, int kBlockN, bool kCausal>
struct KeyTiles {
  int n_blocks, n_full;
  __device__ __forceinline__ KeyTiles(int m0, int tk) {
    const int n_end = kCausal ? min(tk, m0 + kBlockM) : tk;
    n_blocks = (n_end + kBlockN - 1) / kBlockN;
    n_full = kCausal ? min((m0 + 1) / kBlockN, tk / kBlockN) : tk / kBlockN;
  }
};

// The query tiles the key tile [n0, n0 + kBlockN) meets in the dK/dV pass: [m_begin, m_blocks)
// (causal: queries before n0 see none of its keys). unmasked(i): tile i lies wholly after the key
// tile's last key and inside the queries, so its scores need no mask.
template <int kBlockM, int kBlockN, bool kCausal>
struct QueryTiles {
  int m_begin, m_blocks, n0, tq;
  __device__ __forceinline__ QueryTiles(int key0, int seqlen_q)
      : m_begin(kCausal ? key0 / kBlockM : 0), m_blocks((seqlen_q + kBlockM - 1) / kBlockM), n0(key0), tq(seqlen_q) {}
  __device__ __forceinline__ bool unmasked(int i) const {
    return (!kCausal || i * kBlockM >= n0 + kBlockN - 1) && (i + 1) * kBlockM <= tq;
  }
};

// The four bf16 tiles a backward pass begins its shared memory (from `base`) with: the two the block
// loads once, a and b ((kOnceRows, kRowElems) each), then the two it streams through kStages
// stages, ring_a and ring_b ((kStages, kRingRows, kRowElems) each): K, V then Q, dO in the dK/dV
// pass, Q, dO then K, V in the dQ pass. kRowElems: smem_ld's padded rows, or D for SW128 tiles
// (base: sw128_smem_base). Returns the byte after them.
template <int kOnceRows, int kRingRows, int kStages, int kRowElems>
__device__ __forceinline__ unsigned char* carve_bwd_tiles(unsigned char* base, bf16*& a, bf16*& b, bf16*& ring_a,
                                                          bf16*& ring_b) {
  a = reinterpret_cast<bf16*>(base);
  b = a + kOnceRows * kRowElems;
  ring_a = b + kOnceRows * kRowElems;
  ring_b = ring_a + kStages * kRingRows * kRowElems;
  return reinterpret_cast<unsigned char*>(ring_b + kStages * kRingRows * kRowElems);
}

// kRows fp32 values (lse or delta of a query tile) into shared memory, zero past valid_rows.
template <int kRows, int kThreads>
__device__ __forceinline__ void load_vec_async(float* dst, const float* src, int valid_rows) {
#pragma unroll
  for (int r0 = 0; r0 < kRows; r0 += kThreads) {
    const int r = r0 + static_cast<int>(threadIdx.x);
    if (kRows % kThreads == 0 || r < kRows) cp_async_4(dst + r, r < valid_rows ? src + r : src, r < valid_rows);
  }
}

// The key/value side of a query-tile block [m0, m0 + kBlockM) (forward and dQ passes of both
// families): its head's rows (HeadRows, or DqHeadRows in the dQ pass), the key tiles it visits
// (KeyTiles) and the two stages of sK and sV they stream through, with the family's tile copy
// (Copy::kStageElems apart). Both lengths are read first and fetch reads seqlen_k afresh: the
// order of these reads steers ptxas's scheduling of the kernels' opening, so it stays this one.
template <int kBlockM, int kBlockN, bool kCausal, class Copy, class Rows = HeadRows<bf16>>
struct KeyValueStream {
  const FlashParams& p;
  const int tq, tk;
  const Rows rows;
  const KeyTiles<kBlockM, kBlockN, kCausal> tiles;
  bf16 *sK, *sV;
  int m0;
  __device__ __forceinline__ KeyValueStream(const FlashParams& p, int b, int h, int m0, bf16* sK, bf16* sV)
      : p(p), tq(p.seqlen_q), tk(p.seqlen_k), rows(p, b, h, m0, 0), tiles(m0, tk), sK(sK), sV(sV), m0(m0) {}
  // Key and value tile j (kBlockN keys from j·kBlockN, zero rows past the last key) into stage s.
  __device__ __forceinline__ void fetch(int j, int s) const {
    const int n = j * kBlockN;
    const Copy copy;
    copy(sK + s * Copy::kStageElems, rows.k + n * p.k_s.row, p.k_s.row, p.seqlen_k - n);
    copy(sV + s * Copy::kStageElems, rows.v + n * p.v_s.row, p.v_s.row, p.seqlen_k - n);
  }
  // The block's first copies, one commit group: its query rows, loaded once through QCopy (Q into
  // sQ, and dO into sdO in the dQ pass), then key/value tile 0 into stage 0.
  template <class QCopy>
  __device__ __forceinline__ void start(QCopy copy_q, bf16* sQ) const {
    copy_q(sQ, rows.q, p.q_s.row, tq - m0);
    fetch(0, 0);
    cp_async_commit();
  }
  template <class QCopy>
  __device__ __forceinline__ void start(QCopy copy_q, bf16* sQ, bf16* sdO) const {
    copy_q(sQ, rows.q, p.q_s.row, tq - m0);
    copy_q(sdO, rows.d_o, p.do_s.row, tq - m0);
    fetch(0, 0);
    cp_async_commit();
  }
  // Tile j's turn of the pipeline: starts tile j + 1's copies into the other stage, waits for tile
  // j's and hands them to the block (Copy::publish, barrier); returns tile j's K and V.
  struct Stage {
    const bf16 *k, *v;
  };
  __device__ __forceinline__ Stage turn(int j) const {
    const int s = j & 1;
    pipeline_turn(j + 1 < tiles.n_blocks, [&] { fetch(j + 1, s ^ 1); });
    Copy::publish();
    __syncthreads();
    return {sK + s * Copy::kStageElems, sV + s * Copy::kStageElems};
  }
};

// The query side of a dK/dV block [n0, n0 + kBlockN) (the mma.sync and wgmma passes): its head's
// rows, the query tiles it meets (QueryTiles), and the two stages of sQ, sdO (the family's tile
// copy, Copy::kStageElems apart), sL and sDelta (kBlockM apart) they stream through. Members are
// initialised in the order the kernels' opening reads them (as in KeyValueStream).
template <int kBlockM, int kBlockN, bool kCausal, int kThreads, class Copy>
struct DkDvQueries {
  const FlashParams& p;
  const int tq, tk;
  const int64_t bh;  // b · H + h
  const HeadRows<bf16> rows;
  const bf16* d_o;
  const float *lse, *delta;
  const QueryTiles<kBlockM, kBlockN, kCausal> tiles;
  bf16 *sQ, *sdO;
  float *sL, *sDelta;
  __device__ __forceinline__ DkDvQueries(const FlashParams& p, int b, int h, int n0, bf16* sQ, bf16* sdO, float* sL,
                                         float* sDelta)
      : p(p),
        tq(p.seqlen_q),
        tk(p.seqlen_k),
        bh(static_cast<int64_t>(b) * p.heads + h),
        rows(p, b, h, 0, n0),
        d_o(head_row<const bf16>(p.dout, p.do_s, b, h)),
        lse(p.lse + bh * tq),
        delta(p.delta + bh * tq),
        tiles(n0, tq),
        sQ(sQ),
        sdO(sdO),
        sL(sL),
        sDelta(sDelta) {}
  // Query tile i (kBlockM rows from i·kBlockM, zero past the last) into stage s.
  __device__ __forceinline__ void fetch(int i, int s) const {
    const int m0 = i * kBlockM;
    const Copy copy;
    copy(sQ + s * Copy::kStageElems, rows.q + m0 * p.q_s.row, p.q_s.row, tq - m0);
    copy(sdO + s * Copy::kStageElems, d_o + m0 * p.do_s.row, p.do_s.row, tq - m0);
    load_vec_async<kBlockM, kThreads>(sL + s * kBlockM, lse + m0, tq - m0);
    load_vec_async<kBlockM, kThreads>(sDelta + s * kBlockM, delta + m0, tq - m0);
  }
  // The block's first copies, one commit group: its K and V rows, loaded once through KVCopy, then
  // query tile m_begin into stage 0.
  template <class KVCopy>
  __device__ __forceinline__ void start(KVCopy copy_kv, bf16* sK, bf16* sV) const {
    copy_kv(sK, rows.k, p.k_s.row, tk - tiles.n0);
    copy_kv(sV, rows.v, p.v_s.row, tk - tiles.n0);
    fetch(tiles.m_begin, 0);
    cp_async_commit();
  }
  // Query tile i's turn of the pipeline (as KeyValueStream::turn); returns its Q, dO, L and delta.
  struct Stage {
    const bf16 *q, *d_o;
    const float *lse, *delta;
  };
  __device__ __forceinline__ Stage turn(int i) const {
    const int s = (i - tiles.m_begin) & 1;
    pipeline_turn(i + 1 < tiles.m_blocks, [&] { fetch(i + 1, s ^ 1); });
    Copy::publish();
    __syncthreads();
    return {sQ + s * Copy::kStageElems, sdO + s * Copy::kStageElems, sL + s * kBlockM, sDelta + s * kBlockM};
  }
};

// A fragments of a 16 × 16 block at (0, k0) of a row-major padded shared tile.
__device__ __forceinline__ void load_a_frag(uint32_t (&a)[4], const bf16* tile, int ld, int k0) {
  const int lane = threadIdx.x % 32;
  ldmatrix_x4(a, tile + (lane % 8 + 8 * ((lane / 8) % 2)) * ld + k0 + 8 * (lane / 16));
}

// The warp's whole 16 × K strip as A fragments (kept in registers across a loop).
template <int K>
__device__ __forceinline__ void load_a_strip(uint32_t (&a)[K / 16][4], const bf16* tile, int ld) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) load_a_frag(a[kk], tile, ld, kk * 16);
}

// B fragments for n-tiles n0 and n0+8 at k-step k0: b[0], b[1] of n0; b[2], b[3] of n0+8.
// kRowsAreK = false: the tile stores B transposed, row n holds B[·][n] (K rows for Q·Kᵀ).
// kRowsAreK = true:  the tile stores B itself, row k holds B[k][·] (V rows for P·V).
template <bool kRowsAreK>
__device__ __forceinline__ void load_b_frag(uint32_t (&b)[4], const bf16* tile, int ld, int k0, int n0) {
  const int lane = threadIdx.x % 32;
  if constexpr (kRowsAreK)
    ldmatrix_x4_trans(b, tile + (k0 + lane % 8 + 8 * ((lane / 8) % 2)) * ld + n0 + 8 * (lane / 16));
  else
    ldmatrix_x4(b, tile + (n0 + lane % 8 + 8 * (lane / 16)) * ld + k0 + 8 * ((lane / 8) % 2));
}

// acc (16 × N) += A (16 × K, in registers) · B (K × N, in shared memory).
template <int K, int N, bool kRowsAreK>
__device__ __forceinline__ void warp_mma_rs(float (&acc)[N / 8][4], const uint32_t (&a)[K / 16][4], const bf16* b_tile,
                                            int ld) {
  static_assert(K % 16 == 0 && N % 16 == 0, "mma shapes are multiples of 16");
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      uint32_t b[4];
      load_b_frag<kRowsAreK>(b, b_tile, ld, kk * 16, nn * 16);
      mma_16816(acc[2 * nn], a[kk], b[0], b[1]);
      mma_16816(acc[2 * nn + 1], a[kk], b[2], b[3]);
    }
}

// acc (16 × N) += A (16 × K, rows of a shared tile) · B: A loaded one k-step at a time, which
// keeps only 4 registers of A live (the backward kernels hold four accumulators already).
template <int K, int N, bool kRowsAreK>
__device__ __forceinline__ void warp_mma_ss(float (&acc)[N / 8][4], const bf16* a_tile, const bf16* b_tile, int ld) {
  static_assert(K % 16 == 0 && N % 16 == 0, "mma shapes are multiples of 16");
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t a[4];
    load_a_frag(a, a_tile, ld, kk * 16);
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      uint32_t b[4];
      load_b_frag<kRowsAreK>(b, b_tile, ld, kk * 16, nn * 16);
      mma_16816(acc[2 * nn], a, b[0], b[1]);
      mma_16816(acc[2 * nn + 1], a, b[2], b[3]);
    }
  }
}

// A 16 × N accumulator as bf16 A fragments of a 16 × N (rows × k) operand.
template <int N>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[N / 16][4], const float (&acc)[N / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    a[kk][0] = pack_bf16(acc[2 * kk][0], acc[2 * kk][1]);
    a[kk][1] = pack_bf16(acc[2 * kk][2], acc[2 * kk][3]);
    a[kk][2] = pack_bf16(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
    a[kk][3] = pack_bf16(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
  }
}

template <int N>
__device__ __forceinline__ void zero(float (&acc)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
}

// A pair of columns (2i, 2i+1) rotated back by RoPE's angle (cos, sin) = cs: the inverse
// rotation (x0·c + x1·s, x1·c − x0·s), packed as bf16. dQ and dK leave the backward this way when
// the caller asks for un-rotated gradients (FlashParams::rope_cos_sin).
__device__ __forceinline__ uint32_t pack_unrotated(float x0, float x1, float2 cs) {
  return pack_bf16(x0 * cs.x + x1 * cs.y, x1 * cs.x - x0 * cs.y);
}

// The angle pack_unrotated turns pair `pair` of row `row` back by: from the RoPE table (kHeadDim/2
// (cos, sin) a row, L2-resident), or none — (1, 0) — where there is no table or the row is not stored.
template <int kHeadDim>
__device__ __forceinline__ float2 unrotate_angle(const float2* table, int row, int pair, bool stored) {
  return table != nullptr && stored ? __ldg(table + row * (kHeadDim / 2) + pair) : make_float2(1.0f, 0.0f);
}

// Store a warp's 16 × D accumulator strip (times `scale`) as bf16 rows; rows ≥ valid_rows skipped.
// unrotate (optional): the RoPE table's rows for the strip's rows, (D/2) (cos, sin) a row — each
// pair is rotated back before it is rounded, in place of a rope pass over the stored tensor.
template <int kHeadDim>
__device__ __forceinline__ void store_strip(bf16* dst, int64_t ld, const float (&acc)[kHeadDim / 8][4], float scale_lo,
                                            float scale_hi, int valid_rows, const float2* unrotate = nullptr) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  if (unrotate != nullptr) {
    // Column blocks in groups of up to 8: their angles loaded together (up to 16 loads of the
    // L2-resident table in flight: one round trip at d 64), then rotated and stored; pair j·4 + t
    // of the row holds columns col, col+1. Groups of 4 (two round trips at d 64) slowed the
    // backward; groups of 8 did not (docs/reports/2026-11-25_rope-table-recompute-swiglu_h100.md).
    constexpr int kBlocks = kHeadDim / 8;
    // The largest divisor of kBlocks up to 8 (d 64, 128: 8; d 80: 5).
    constexpr int kGroup = kBlocks % 8 == 0   ? 8
                           : kBlocks % 5 == 0 ? 5
                           : kBlocks % 4 == 0 ? 4
                           : kBlocks % 2 == 0 ? 2
                                              : 1;
#pragma unroll
    for (int j0 = 0; j0 < kBlocks; j0 += kGroup) {
      float2 lo[kGroup], hi[kGroup];
#pragma unroll
      for (int jj = 0; jj < kGroup; ++jj) {
        const int pair = (j0 + jj) * 4 + t;
        lo[jj] = unrotate_angle<kHeadDim>(unrotate, g, pair, g < valid_rows);
        hi[jj] = unrotate_angle<kHeadDim>(unrotate, g + 8, pair, g + 8 < valid_rows);
      }
#pragma unroll
      for (int jj = 0; jj < kGroup; ++jj) {
        const int j = j0 + jj, col = j * 8 + 2 * t;
        if (g < valid_rows)
          *reinterpret_cast<uint32_t*>(dst + g * ld + col) =
              pack_unrotated(acc[j][0] * scale_lo, acc[j][1] * scale_lo, lo[jj]);
        if (g + 8 < valid_rows)
          *reinterpret_cast<uint32_t*>(dst + (g + 8) * ld + col) =
              pack_unrotated(acc[j][2] * scale_hi, acc[j][3] * scale_hi, hi[jj]);
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    const int col = j * 8 + 2 * t;
    if (g < valid_rows)
      *reinterpret_cast<uint32_t*>(dst + g * ld + col) = pack_bf16(acc[j][0] * scale_lo, acc[j][1] * scale_lo);
    if (g + 8 < valid_rows)
      *reinterpret_cast<uint32_t*>(dst + (g + 8) * ld + col) = pack_bf16(acc[j][2] * scale_hi, acc[j][3] * scale_hi);
  }
}

}  // namespace pt::cuda::flash
