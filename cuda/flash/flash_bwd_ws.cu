// FlashAttention backward on Hopper in FlashAttention-3's design (issue 18): the two passes of
// flash_bwd_wgmma.cu (dK/dV per key tile, dQ per query tile, no atomics, bit-for-bit
// reproducible), each with warpgroup 0 as a TMA producer (flash_tma.cuh) and two math
// warpgroups of 64 rows that never copy, wait on a copy or meet at a block barrier.
//
// dK/dV pass (128 keys a block): the producer loads K and V once, then per query tile Q, dO
// (TMA) and L, delta (its first warp, plain loads into shared memory) into a ring of stages.
// Each math warpgroup runs [Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ], the element-wise Pᵀ and dSᵀ, then
// [dV += Pᵀ·dO, dK += dSᵀ·Q], and releases the stage; its two warpgroups drift apart, so one's
// element-wise work runs beside the other's products. (Overlapping a tile's element-wise work with
// the previous tile's products inside a warpgroup, as the dQ pass does, needs both tiles in
// registers: at 64 queries a stage it lost to 128 queries a stage without it;
// docs/reports/2026-11-25_flash-warp-specialised_h100.md.)
//
// dQ pass (128 queries a block): the producer loads Q and dO once, then each key tile's K and V.
// As in the forward (flash_fwd_ws.cu), the element-wise work of tile j overlaps the product of
// tile j−1 that needs it, inside each math warpgroup:
//
//   issue [S_j = Q·K_jᵀ, dP_j = dO·V_jᵀ], issue dQ += dS_{j−1}·K_{j−1};  wait for S_j, dP_j;
//   P_j, dS_j in fp32;  wait for dQ;  release stage j−1;  dS_j to bf16
//
// The single pass (tiles "ws2/acc"; the default from 2048 keys with --deterministic off): the dK/dV pass also computes
// each query tile's dQ contribution dS·K and adds it into p.dq_accum (fp32) with vector reductions; flash_bwd_wgmma.cu
// zeroes the buffer before and converts it into dQ after. 5 products per tile instead of the two passes' 7
// (DkDvWsTraits says how the work is split). Tiles "ws2/fxp" (kFixedDq): the same pass adding
// dQ's partials as 32-bit fixed point by integer reductions, so dQ is reproducible bit for bit
// (flash_dq_fixed.cuh); measured against the fp32 reductions and the two passes in
// docs/reports/2026-11-27_flash-fixed-point-dq_h100.md.
//
// delta = rowsum(O ∘ dO) comes from flash_bwd_bf16.cu's kernel, launched first.
#include <string>
#include <type_traits>

#include "core/error.h"
#include "cuda/flash/flash_dq_fixed.cuh"
#include "cuda/flash/flash_params.h"
#include "cuda/flash/flash_softmax.cuh"
#include "cuda/flash/flash_tma.cuh"

namespace pt::cuda {
namespace flash {
namespace {

constexpr int kMathWarpgroups = 2;  // per block, in both passes
constexpr int kProducerRegs = 24, kMathRegs = 240;
// The score products (Sᵀ, dPᵀ; S, dP) as m64n128 wgmma where their N allows (flash_wgmma.cuh).
template <int N>
constexpr int kSsInstrN = N % 128 == 0 ? 128 : 64;
static_assert((kProducerRegs + kMathWarpgroups * kMathRegs) * 128 <= setmaxnreg_budget(128 * (kMathWarpgroups + 1)),
              "setmaxnreg asks for more registers than the block is launched with");

// dK/dV pass: 64 keys per math warpgroup; 128 queries per stage at d = 64 (Sᵀ, dPᵀ of 64 × 128 per
// warpgroup), 64 at d = 128, where dK and dV already take 128 registers a thread.
//
// kAccumulateDq (tiles "ws2/acc", the single pass): the pass also adds each query tile's dQ
// partial dS·K (kBlockM × D over the block's 128 keys) into p.dq_accum. Each math warpgroup stages
// its dSᵀ rows in shared memory (store_ds_rows) and announces them on an mbarrier; each then
// computes a 64 × 64 piece of the partial over all 128 keys — at d = 128 the tile's 64 queries × its 64
// columns, at d = 64 its 64 of the tile's 128 queries × all 64 columns — so every partial element
// is reduced once (32 registers a thread), added from the registers in p.dq_accum's fragment order.
// dSᵀ is double-buffered and handed between the warpgroups by mbarriers (ds_full, ds_empty): a
// block barrier there held them in step (docs/reports/2026-11-25_flash-single-pass_h100.md).
//
// kFixedDq (tiles "ws2/fxp"): dQ in fixed point; the producer also copies each query tile's row
// exponents into a ring of kRowExpSlots (one more than the stages: a tile's dQ piece is added an
// iteration after its stage goes back: the loop below). Loading them in each math thread, and
// inline-PTX reductions, spilled in the math warpgroups
// (docs/reports/2026-11-27_flash-fixed-point-dq_h100.md).
template <int kHeadDim, bool kAccumulateDq = false, bool kFixedDq = false>
struct DkDvWsTraits {
  static constexpr int kBlockN = 64 * kMathWarpgroups;       // keys per block
  static constexpr int kBlockM = kHeadDim == 64 ? 128 : 64;  // queries per stage
  static constexpr int kThreads = 128 * (kMathWarpgroups + 1);
  static constexpr int kKVBytes = sw128_tile_bytes<kBlockN, kHeadDim>();
  static constexpr int kQBytes = sw128_tile_bytes<kBlockM, kHeadDim>();
  static constexpr bool kDqSplitCols = kHeadDim == 128;  // else split the tile's queries
  static_assert(kBlockM * kHeadDim == kMathWarpgroups * 64 * 64, "dQ's partial is one 64 × 64 piece per warpgroup");
  static constexpr int kDsBytes = kAccumulateDq ? sw128_tile_bytes<kBlockN, kBlockM>() : 0;  // one dSᵀ buffer
  // K, V; `stages` × (Q, dO, L and delta in fp32); two dSᵀ buffers; fixed point's row exponents
  // (stages + 1 slots); alignment slack.
  static constexpr int smem_bytes(int stages) {
    return 2 * kKVBytes + stages * (2 * kQBytes + 2 * kBlockM * 4) + 2 * kDsBytes +
           (kFixedDq ? (stages + 1) * kBlockM * 4 : 0) + kSwizzleBlockBytes;
  }
  // Stages of Q, dO: 4 at d = 128 (195 KB; docs/reports/2026-11-25_flash-d128-n128-stages_h100.md),
  // 3 at d = 64; one fewer where the
  // single pass's dSᵀ buffers leave no room (d 128: 3, 195 KB). 256 bytes of the per-block limit
  // are left to the static mbarriers.
  static constexpr int kMaxStages = kHeadDim == 64 ? 3 : 4;
  static constexpr int kStages = smem_bytes(kMaxStages) <= kMaxBlockSmemBytes - 256       ? kMaxStages
                                 : smem_bytes(kMaxStages - 1) <= kMaxBlockSmemBytes - 256 ? kMaxStages - 1
                                                                                          : kMaxStages - 2;
  static constexpr int kSmemBytes = smem_bytes(kStages);
  static constexpr int kRowExpSlots = kStages + 1;
  static_assert(kStages >= 2 && kSmemBytes <= kMaxBlockSmemBytes - 256, "shared memory overcommitted");
};

// dQ pass: 64 queries per math warpgroup; 128 keys per stage at d = 64, 64 at d = 128.
template <int kHeadDim>
struct DqWsTraits {
  static constexpr int kBlockM = 64 * kMathWarpgroups;       // queries per block
  static constexpr int kBlockN = kHeadDim == 64 ? 128 : 64;  // keys per stage
  static constexpr int kThreads = 128 * (kMathWarpgroups + 1);
  static constexpr int kStages = kHeadDim == 64 ? 3 : 4;  // K, V stages (4 at d = 128 as above: 161 → 193 KB)
  static constexpr int kQBytes = sw128_tile_bytes<kBlockM, kHeadDim>();
  static constexpr int kKVBytes = sw128_tile_bytes<kBlockN, kHeadDim>();
  static constexpr int kSmemBytes = 2 * kQBytes + 2 * kStages * kKVBytes + kSwizzleBlockBytes;  // Q, dO; K, V ring
  static_assert(kSmemBytes <= kMaxBlockSmemBytes, "shared memory overcommitted");
};

// The four views both passes load (boxes of each pass's kBlockM query rows, kBlockN key rows).
struct BwdWsMaps {
  TmaRows q, k, v, d_o;
};

// What the producer and the math warpgroups of a dK/dV block share: the parameters, its place
// (keys n0 … n0 + kBlockN − 1 of head h of batch b, and the query tiles that see them) and its
// shared memory: the static barriers, which the kernel declares, and the dynamic tiles, carved
// here in the order smem_bytes counts them.
template <int kHeadDim_, bool kCausal_, bool kAccumulateDq_, bool kFixedDq_>
struct DkDvWsBlock {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kCausal = kCausal_, kAccumulateDq = kAccumulateDq_, kFixedDq = kFixedDq_;
  using Tr = DkDvWsTraits<kHeadDim, kAccumulateDq, kFixedDq>;
  static constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  static constexpr int kQElems = kBlockM * kHeadDim;  // one stage of Q or dO

  const FlashParams& p;
  const int n0, h, b;  // first key; head by head, as the ws query passes
  // Keys past seqlen_k load as zeros (TMA) and only reach dK, dV rows never stored (and dSᵀ rows
  // stored as zeros).
  const int tq, tk;
  const int64_t bh;  // b · H + h: the (batch, head) row of lse, delta, dq_accum and the row exponents
  const QueryTiles<kBlockM, kBlockN, kCausal> tiles;
  uint64_t* const kv_full;   // K and V have landed
  StageRing<kStages>& ring;  // Q, dO, L, delta of each query tile
  // dQ accumulation, [2] each: dSᵀ buffer b written by every math thread (full) and read by both
  // dQ products (empty: every math thread arrives once its product is done).
  uint64_t *const ds_full, *const ds_empty;
  bf16 *sK, *sV;       // (kBlockN, D) SW128 each
  bf16 *sQ, *sdO;      // (kStages, kBlockM, D) SW128 each
  bf16* sdS;           // (2, kBlockN, kBlockM) SW128, dQ accumulation only (else empty)
  float *sL, *sDelta;  // (kStages, kBlockM) each
  int* sRowExp;        // (kRowExpSlots, kBlockM), fixed point only

  __device__ __forceinline__ DkDvWsBlock(const FlashParams& params, uint64_t* kv, StageRing<kStages>& stage_ring,
                                         uint64_t* ds_full_bars, uint64_t* ds_empty_bars)
      : p(params),
        n0(blockIdx.x * kBlockN),
        h(blockIdx.y),
        b(blockIdx.z),
        tq(params.seqlen_q),
        tk(params.seqlen_k),
        bh(static_cast<int64_t>(b) * params.heads + h),
        tiles(n0, tq),
        kv_full(kv),
        ring(stage_ring),
        ds_full(ds_full_bars),
        ds_empty(ds_empty_bars) {
    sdS = reinterpret_cast<bf16*>(carve_bwd_tiles<kBlockN, kBlockM, kStages, kHeadDim>(sw128_smem(), sK, sV, sQ, sdO));
    sL = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(sdS) + 2 * Tr::kDsBytes);
    sDelta = sL + kStages * kBlockM;
    sRowExp = reinterpret_cast<int*>(sDelta + kStages * kBlockM);
  }
};

// The producer's first warp: K and V once; then per query tile L and delta (plain loads into
// shared memory, zero past the last query as the tiles are; its 32 arrivals on the stage) and Q
// and dO (TMA).
template <class Block>
__device__ __forceinline__ void dkdv_load_query_tiles(const Block& blk, const BwdWsMaps& maps, int lane) {
  constexpr int kBlockM = Block::kBlockM, kBlockN = Block::kBlockN, kHeadDim = Block::kHeadDim;
  const int h = blk.h, b = blk.b, tq = blk.tq;
  if (lane == 0) {
    mbar_arrive_expect_tx(blk.kv_full, 2 * Block::Tr::kKVBytes);
    tma_load_tile<kBlockN, kHeadDim>(blk.sK, maps.k, blk.kv_full, blk.n0, h, b);
    tma_load_tile<kBlockN, kHeadDim>(blk.sV, maps.v, blk.kv_full, blk.n0, h, b);
  }
  const float* lse = blk.p.lse + blk.bh * tq;
  const float* delta = blk.p.delta + blk.bh * tq;
  for (int i = blk.tiles.m_begin, it = 0; i < blk.tiles.m_blocks; ++i, ++it) {
    const int s = blk.ring.stage(it), m0 = i * kBlockM;
    blk.ring.acquire(it);
#pragma unroll
    for (int r = lane; r < kBlockM; r += 32) {
      blk.sL[s * kBlockM + r] = m0 + r < tq ? lse[m0 + r] : 0.0f;
      blk.sDelta[s * kBlockM + r] = m0 + r < tq ? delta[m0 + r] : 0.0f;
    }
    if (lane == 0) {
      mbar_arrive_expect_tx(blk.ring.landed(it), 2 * Block::Tr::kQBytes);
      tma_load_tile<kBlockM, kHeadDim>(blk.sQ + s * Block::kQElems, maps.q, blk.ring.landed(it), m0, h, b);
      tma_load_tile<kBlockM, kHeadDim>(blk.sdO + s * Block::kQElems, maps.d_o, blk.ring.landed(it), m0, h, b);
    } else {
      mbar_arrive(blk.ring.landed(it));
    }
  }
}

// Fixed point: the producer's second warp copies each query tile's row exponents into slot
// it % kRowExpSlots (its 32 arrivals on the stage). In a warp of its own: one more load in the
// first warp's loop spilled its 24 registers.
template <class Block>
__device__ __forceinline__ void dkdv_load_row_exps(const Block& blk, int lane) {
  constexpr int kBlockM = Block::kBlockM;
  const int* row_exp = blk.p.dq_row_exp + blk.bh * blk.tq;
  for (int i = blk.tiles.m_begin, it = 0; i < blk.tiles.m_blocks; ++i, ++it) {
    const int m0 = i * kBlockM;
    blk.ring.acquire(it);  // tile it − kStages released, so tile it − kRowExpSlots's piece is added
#pragma unroll
    for (int r = lane - 32; r < kBlockM; r += 32)  // rows past the end add zeros whatever their scale
      blk.sRowExp[it % Block::Tr::kRowExpSlots * kBlockM + r] = m0 + r < blk.tq ? row_exp[m0 + r] : kDqExpOfZero;
    mbar_arrive(blk.ring.landed(it));
  }
}

// The stages of a query tile in one math warpgroup of a dK/dV block (its 64 keys n0 + 64c …):
// scores, grads (with share_ds), accumulate (with add_dq_piece); dkdv_math_warpgroup runs them.
// The register arrays they share are locals of dkdv_math_warpgroup, reached by reference as a
// lambda's captures are: arrays held in the struct itself compiled to other instructions.
template <class Block>
struct DkDvWsMath {
  static constexpr int kHeadDim = Block::kHeadDim, kBlockM = Block::kBlockM, kBlockN = Block::kBlockN;
  static constexpr int kQElems = Block::kQElems;
  static constexpr bool kCausal = Block::kCausal, kAccumulateDq = Block::kAccumulateDq;
  using Tr = typename Block::Tr;

  const Block& blk;
  const int c;                                                   // this math warpgroup's keys: n0 + 64c …
  const int key0;                                                // this warp's first key (its 16 of the warpgroup's 64)
  const float scale_log2;                                        // the scores' scale times log2(e)
  float (&acc_dk)[kHeadDim / 8][4], (&acc_dv)[kHeadDim / 8][4];  // (64 keys, D)
  float (&acc_s)[kBlockM / 8][4], (&acc_dp)[kBlockM / 8][4];     // Sᵀ then Pᵀ; dPᵀ then dSᵀ (fp32)
  uint32_t (&p_frag)[kBlockM / 16][4], (&ds_frag)[kBlockM / 16][4];  // Pᵀ, dSᵀ in bf16: A operands of dV, dK
  // dQ accumulation: this warpgroup's 64 × 64 piece of each query tile's partial (queries
  // q_block · 64 …, columns col_block · 64 …), its 64-query tile in dq_accum at dq_tiles + tile · 64 · D.
  const int q_block, col_block;
  float* const dq_tiles;
  float (&acc_dq)[8][4];  // (64 queries, 64 columns)
  const int head_exp;     // fixed point: the head's bound exponent

  // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ of the tile in stage s (rows: this warpgroup's keys; columns: the
  // tile's queries), one batch, waited for.
  __device__ __forceinline__ void scores(int s) {
    zero(acc_s);
    zero(acc_dp);
    pin(acc_s);
    pin(acc_dp);
    wgmma_fence();
    wgmma_k_major<kHeadDim, kBlockM, kBlockN, kBlockM, kSsInstrN<kBlockM>>(acc_s, blk.sK, c * 64, blk.sQ + s * kQElems,
                                                                           0);
    wgmma_k_major<kHeadDim, kBlockM, kBlockN, kBlockM, kSsInstrN<kBlockM>>(acc_dp, blk.sV, c * 64,
                                                                           blk.sdO + s * kQElems, 0);
    wgmma_commit();
    wgmma_wait<0>();
    pin(acc_s);
    pin(acc_dp);
  }

  // dQ accumulation: stream tile t's dSᵀ rows into buffer t % 2, once both warpgroups' dQ products
  // of tile t − 2 have read it; then announced on ds_full.
  __device__ __forceinline__ void share_ds(int t) {
    const int buf = t & 1;
    if (t >= 2) mbar_wait(&blk.ds_empty[buf], ((t >> 1) - 1) & 1);
    store_ds_rows<kBlockN, kBlockM>(blk.sdS + buf * kBlockN * kBlockM, ds_frag, key0 - blk.n0,
                                    key0 + frag_row(0) < blk.tk, key0 + frag_row(2) < blk.tk);
    fence_async_proxy();
    mbar_arrive(&blk.ds_full[buf]);
  }

  // Pᵀ and dSᵀ of query tile i (stage s), into p_frag and ds_frag.
  __device__ __forceinline__ void grads(int i, int s) {
    if (blk.tiles.unmasked(i))
      probs_by_col<kBlockM, kCausal, false>(acc_s, blk.sL + s * kBlockM, key0, i * kBlockM, blk.tq, scale_log2);
    else
      probs_by_col<kBlockM, kCausal, true>(acc_s, blk.sL + s * kBlockM, key0, i * kBlockM, blk.tq, scale_log2);
    ds_by_col<kBlockM>(acc_dp, acc_s, blk.sDelta + s * kBlockM);
    acc_to_a<kBlockM>(p_frag, acc_s);
    acc_to_a<kBlockM>(ds_frag, acc_dp);
    if constexpr (kAccumulateDq) share_ds(i - blk.tiles.m_begin);
  }

  // This warpgroup's dQ piece of stream tile t (in acc_dq) into p.dq_accum; fixed point: scaled by
  // its rows' 2^s (this thread's rows g, g + 8 of its warp's 16) and rounded.
  __device__ __forceinline__ void add_dq_piece(int t) {
    // The piece's first query. The literal 0 where the warpgroups split the columns lets the
    // compiler see q0 / kDqAccumTileRows as the tile's index (q_block, a member, hides the zero).
    const int q0 = (blk.tiles.m_begin + t) * kBlockM + (Tr::kDqSplitCols ? 0 : q_block) * 64;
    if (q0 >= blk.tq) return;  // the tile's second half, past the end
    float* dst = dq_tiles + static_cast<int64_t>(q0 / kDqAccumTileRows) * kDqAccumTileRows * kHeadDim;
    if constexpr (Block::kFixedDq) {
      const int* exps = blk.sRowExp + t % Tr::kRowExpSlots * kBlockM + q_block * 64 + ((threadIdx.x / 32) % 4) * 16 +
                        (threadIdx.x % 32) / 4;
      const float scale[2] = {dq_fixed_scale(dq_fixed_scale_exp(exps[0], head_exp)),
                              dq_fixed_scale(dq_fixed_scale_exp(exps[8], head_exp))};
      // This thread's word f, then constant offsets (folded into the instructions).
      int* words = reinterpret_cast<int*>(dst) + fixed_order_word(0, 0, threadIdx.x % 128);
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)  // e = 0, 1: row g; 2, 3: row g + 8
          red_add_s32(words + fixed_order_word(j, e, 0), dq_fixed_round(acc_dq[j][e] * scale[e >> 1]));
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) red_add_v4(dst + 4 * fragment_order_float4(j), acc_dq[j]);
    }
  }

  // This warpgroup's piece of dS·K of stream tile t_dq (kWithDq), then dV += Pᵀ·dO and dK += dSᵀ·Q
  // (1/sqrt(d) applied at the end) of stream tile t (kDkDv), two batches, both waited for: once
  // the piece is done, t_dq's dSᵀ buffer goes back to the writers and the piece into p.dq_accum;
  // then tile t's stage goes back to the producer. (Compile-time choices: a run-time one inside
  // the batch cost ptxas registers.)
  template <bool kDkDv, bool kWithDq>
  __device__ __forceinline__ void accumulate(int t, int t_dq) {
    constexpr bool kDq = kAccumulateDq && kWithDq;
    const int s = blk.ring.stage(t);
    if constexpr (kDq) mbar_wait(&blk.ds_full[t_dq & 1], (t_dq >> 1) & 1);  // both warpgroups' rows of dSᵀ
    pin(p_frag);
    pin(ds_frag);
    pin(acc_dv);
    pin(acc_dk);
    if constexpr (kDq) {
      zero(acc_dq);
      pin(acc_dq);
    }
    wgmma_fence();
    // dQ's product first, in its own batch, so that its reductions are issued while dV and dK still
    // run. A reduction reads its registers only when the memory pipe takes it, and the next write of
    // those registers waits until then. Issued after the whole batch, they held up the next tile's
    // score products (docs/reports/2026-11-25_flash-source-stalls_h100.md).
    if constexpr (kDq) {
      wgmma_mn_major<kBlockN, 64, kBlockN, kBlockN>(
          acc_dq, blk.sdS + (t_dq & 1) * kBlockN * kBlockM + q_block * kBlockN * 64, 0, blk.sK, 0, col_block);
      wgmma_commit();
    }
    if constexpr (kDkDv) {
      wgmma_regs_mn_major<kBlockM, kHeadDim, kBlockM, kRegsProductN<kHeadDim>>(acc_dv, p_frag, blk.sdO + s * kQElems);
      wgmma_regs_mn_major<kBlockM, kHeadDim, kBlockM, kRegsProductN<kHeadDim>>(acc_dk, ds_frag, blk.sQ + s * kQElems);
      wgmma_commit();
    }
    if constexpr (kDq) {
      wgmma_wait<kDkDv ? 1 : 0>();  // dQ's product done; dV, dK may still run
      pin(acc_dq);
      mbar_arrive(&blk.ds_empty[t_dq & 1]);
      add_dq_piece(t_dq);
    }
    wgmma_wait<0>();
    pin(acc_dv);
    pin(acc_dk);
    pin(p_frag);  // the A registers stay untouched until the products that read them are done
    pin(ds_frag);
    if constexpr (kDkDv) blk.ring.release(t);
  }
};

// A math warpgroup of the dK/dV pass: its registers, the query tiles m_begin … m_blocks − 1
// through the stages of DkDvWsMath, then dK and dV into p.dk, p.dv.
template <class Block>
__device__ __forceinline__ void dkdv_math_warpgroup(const Block& blk, int wg) {
  constexpr int kHeadDim = Block::kHeadDim, kBlockM = Block::kBlockM;
  constexpr bool kAccumulateDq = Block::kAccumulateDq;
  using Tr = typename Block::Tr;
  const int c = wg - 1;
  const int key0 = blk.n0 + c * 64 + ((threadIdx.x / 32) % 4) * 16;
  const float scale_log2 = blk.p.scale * kLog2e;

  float acc_dk[kHeadDim / 8][4], acc_dv[kHeadDim / 8][4];
  zero(acc_dk);
  zero(acc_dv);
  float acc_s[kBlockM / 8][4], acc_dp[kBlockM / 8][4];
  uint32_t p_frag[kBlockM / 16][4], ds_frag[kBlockM / 16][4];
  const int q_block = Tr::kDqSplitCols ? 0 : c, col_block = Tr::kDqSplitCols ? c : 0;
  float* dq_tiles = kAccumulateDq
                        ? blk.p.dq_accum + blk.bh * ceil_div(blk.tq, kDqAccumTileRows) * kDqAccumTileRows * kHeadDim +
                              col_block * 64 * 64
                        : nullptr;
  float acc_dq[8][4];
  // Fixed point: the head's bound exponent, once (the delta kernel finished it before this launch).
  const int head_exp = Block::kFixedDq ? dq_fixed_head_exp(blk.p.dq_head_bound + 2 * blk.bh) : 0;
  const int m_begin = blk.tiles.m_begin, m_blocks = blk.tiles.m_blocks;
  DkDvWsMath<Block> m{blk,    c,       key0,    scale_log2, acc_dk,   acc_dv, acc_s,   acc_dp,
                      p_frag, ds_frag, q_block, col_block,  dq_tiles, acc_dq, head_exp};
  // Causal attention has Tq = Tk (ops::flash_attention), so every key block sees a query tile.
  // Tile i's dV, dK products are issued at the top of iteration i + 1, which was faster than at the
  // end of iteration i (docs/reports/2026-11-25_flash-warp-specialised_h100.md).
  // Tile i's dQ piece waits one iteration more, so that neither warpgroup waits for the other's dSᵀ
  // unless it runs more than about half an iteration ahead: the two drift apart and one's
  // element-wise work runs beside the other's products, as in the two-pass kernel. (Issued with
  // tile i's dV, dK, right after the exchange, it held them in step:
  // docs/reports/2026-11-25_flash-single-pass_h100.md.)
  mbar_wait(blk.kv_full, 0);
  blk.ring.wait(0);
  m.scores(0);
  m.grads(m_begin, 0);
  for (int i = m_begin + 1, it = 1; i < m_blocks; ++i, ++it) {
    if (it == 1)
      m.template accumulate<true, false>(0, -1);
    else
      m.template accumulate<true, true>(it - 1, it - 2);
    blk.ring.wait(it);
    m.scores(blk.ring.stage(it));
    m.grads(i, blk.ring.stage(it));
  }
  const int last = m_blocks - 1 - m_begin;
  if (last == 0)
    m.template accumulate<true, false>(0, -1);
  else
    m.template accumulate<true, true>(last, last - 1);
  if constexpr (kAccumulateDq) m.template accumulate<false, true>(0, last);

  store_dk_dv<kHeadDim>(blk.p, blk.b, blk.h, key0, acc_dk, acc_dv);
}

// The dK/dV pass (see the top of the file): warpgroup 0 produces, warpgroups 1 and 2 compute.
template <int kHeadDim, bool kCausal, bool kAccumulateDq, bool kFixedDq>
__global__ void __launch_bounds__(DkDvWsTraits<kHeadDim, kAccumulateDq, kFixedDq>::kThreads, 1)
    flash_bwd_dkdv_ws_kernel(const __grid_constant__ BwdWsMaps maps, const FlashParams p) {
  static_assert(kAccumulateDq || !kFixedDq, "fixed point is a way of accumulating dQ");
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
#if PT_FLASH_WGMMA_COMPILED
  using Block = DkDvWsBlock<kHeadDim, kCausal, kAccumulateDq, kFixedDq>;
  __shared__ uint64_t kv_full;
  __shared__ StageRing<Block::kStages> ring;
  __shared__ uint64_t ds_full[2], ds_empty[2];
  const Block blk(p, &kv_full, ring, ds_full, ds_empty);
  const int wg = warpgroup_index();

  if (kAccumulateDq && threadIdx.x == 0)
    for (int buf = 0; buf < 2; ++buf) {
      mbar_init(&ds_full[buf], 128 * kMathWarpgroups);
      mbar_init(&ds_empty[buf], 128 * kMathWarpgroups);
    }
  // The producer's first warp: L and delta stored, Q and dO in flight; fixed point: its second
  // warp, the row exponents.
  ring.init_block(&kv_full, kFixedDq ? 64 : 32, 128 * kMathWarpgroups);

  if (wg == 0) {  // the producer
    setmaxnreg_dec<kProducerRegs>();
    const int lane = threadIdx.x;
    if (lane < 32)
      dkdv_load_query_tiles(blk, maps, lane);
    else if (kFixedDq && lane < 64)
      dkdv_load_row_exps(blk, lane);
    return;
  }
  setmaxnreg_inc<kMathRegs>();
  dkdv_math_warpgroup(blk, wg);
#else
  __trap();
#endif
}

template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(DqWsTraits<kHeadDim>::kThreads, 1)
    flash_bwd_dq_ws_kernel(const __grid_constant__ BwdWsMaps maps, const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
#if PT_FLASH_WGMMA_COMPILED
  using Tr = DqWsTraits<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  constexpr int kKVElems = kBlockN * kHeadDim;
  bf16 *sQ, *sdO;  // (kBlockM, D) SW128 each
  bf16 *sK, *sV;   // (kStages, kBlockN, D) SW128 each
  carve_bwd_tiles<kBlockM, kBlockN, kStages, kHeadDim>(sw128_smem(), sQ, sdO, sK, sV);
  __shared__ uint64_t q_full;
  __shared__ StageRing<kStages> ring;  // K and V tiles

  const int m0 = query_tile_head_by_head() * kBlockM, h = blockIdx.y, b = blockIdx.z;
  const int tq = p.seqlen_q, tk = p.seqlen_k;
  const KeyTiles<kBlockM, kBlockN, kCausal> tiles(m0, tk);
  const int n_blocks = tiles.n_blocks, n_full = tiles.n_full;
  const int wg = warpgroup_index();

  ring.init_block(&q_full, 1, 128 * kMathWarpgroups);

  if (wg == 0) {  // the producer
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      mbar_arrive_expect_tx(&q_full, 2 * Tr::kQBytes);
      tma_load_tile<kBlockM, kHeadDim>(sQ, maps.q, &q_full, m0, h, b);
      tma_load_tile<kBlockM, kHeadDim>(sdO, maps.d_o, &q_full, m0, h, b);
      produce_kv_tiles<kBlockN, kHeadDim>(ring, sK, sV, maps.k, maps.v, n_blocks, h, b);
    }
    return;
  }

  setmaxnreg_inc<kMathRegs>();
  const int c = wg - 1;  // this math warpgroup's queries: m0 + 64c …
  const int row0 = m0 + c * 64 + ((threadIdx.x / 32) % 4) * 16;
  const float scale_log2 = p.scale * kLog2e;
  float neg_lse2[2], delta[2];  // this thread's two rows
  load_row_stats(p, b, h, row0, neg_lse2, delta);
  float acc_dq[kHeadDim / 8][4];  // (64 queries, D)
  zero(acc_dq);
  float acc_s[kBlockN / 8][4], acc_dp[kBlockN / 8][4];
  uint32_t ds_frag[kBlockN / 16][4];  // dS in bf16: the register A operand of dS·K

  // S and dP of tile j into acc_s, acc_dp (issued and committed; the caller waits).
  auto issue_scores = [&](int s) {
    zero(acc_s);
    zero(acc_dp);
    pin(acc_s);
    pin(acc_dp);
    wgmma_fence();
    wgmma_k_major<kHeadDim, kBlockN, kBlockM, kBlockN, kSsInstrN<kBlockN>>(acc_s, sQ, c * 64, sK + s * kKVElems, 0);
    wgmma_k_major<kHeadDim, kBlockN, kBlockM, kBlockN, kSsInstrN<kBlockN>>(acc_dp, sdO, c * 64, sV + s * kKVElems, 0);
    wgmma_commit();
  };
  // P and dS of tile j in fp32, in acc_s.
  auto grads = [&](int j) {
    if (j < n_full)
      probs_by_row<kBlockN, kCausal, false>(acc_s, neg_lse2, row0, j * kBlockN, tk, scale_log2);
    else
      probs_by_row<kBlockN, kCausal, true>(acc_s, neg_lse2, row0, j * kBlockN, tk, scale_log2);
    ds_by_row<kBlockN>(acc_s, acc_dp, delta);
  };

  mbar_wait(&q_full, 0);
  ring.wait(0);
  issue_scores(0);
  wgmma_wait<0>();
  pin(acc_s);
  pin(acc_dp);
  grads(0);
  acc_to_a<kBlockN>(ds_frag, acc_s);

  for (int j = 1; j < n_blocks; ++j) {
    const int s = ring.stage(j), prev = ring.stage(j - 1);
    ring.wait(j);
    pin(ds_frag);
    pin(acc_dq);
    issue_scores(s);
    wgmma_regs_mn_major<kBlockN, kHeadDim, kBlockN, kRegsProductN<kHeadDim>>(acc_dq, ds_frag, sK + prev * kKVElems);
    wgmma_commit();
    wgmma_wait<1>();  // S, dP done; dQ's product may still run
    pin(acc_s);
    pin(acc_dp);
    grads(j);
    retire_product(ring, j - 1, acc_dq, ds_frag);
    acc_to_a<kBlockN>(ds_frag, acc_s);
  }

  const int last = ring.stage(n_blocks - 1);
  wgmma_regs_mn_major_waited<kBlockN, kHeadDim, kBlockN, kRegsProductN<kHeadDim>>(acc_dq, ds_frag,
                                                                                  sK + last * kKVElems);

  bf16* dq = head_row<bf16>(p.dq, p.dq_s, b, h, row0);
  store_strip<kHeadDim>(dq, p.dq_s.row, acc_dq, p.scale, p.scale, tq - row0, unrotate_rows<kHeadDim>(p, row0));
#else
  __trap();
#endif
}

// One pass: its tensor maps (boxes of Traits' tile rows), then the kernel over `blocks` tiles.
template <typename Traits, int kHeadDim, typename Kernel>
void launch_pass(Kernel kernel, int blocks, const FlashParams& p, cudaStream_t stream) {
  BwdWsMaps maps;
  maps.q = flash_tma_rows(p.q, p.q_s, p.batch, p.heads, p.seqlen_q, kHeadDim, Traits::kBlockM);
  maps.d_o = flash_tma_rows(p.dout, p.do_s, p.batch, p.heads, p.seqlen_q, kHeadDim, Traits::kBlockM);
  maps.k = flash_tma_rows(p.k, p.k_s, p.batch, p.heads, p.seqlen_k, kHeadDim, Traits::kBlockN);
  maps.v = flash_tma_rows(p.v, p.v_s, p.batch, p.heads, p.seqlen_k, kHeadDim, Traits::kBlockN);
  launch_flash_kernel(kernel, flash_grid(p, blocks, 1), Traits::kThreads, Traits::kSmemBytes, stream, maps, p);
}

template <int kHeadDim, bool kCausal, bool kAccumulateDq, bool kFixedDq = false>
void launch_dkdv(const FlashParams& p, cudaStream_t stream) {
  using Tr = DkDvWsTraits<kHeadDim, kAccumulateDq, kFixedDq>;
  launch_pass<Tr, kHeadDim>(flash_bwd_dkdv_ws_kernel<kHeadDim, kCausal, kAccumulateDq, kFixedDq>,
                            static_cast<int>(ceil_div(p.seqlen_k, Tr::kBlockN)), p, stream);
}

template <int kHeadDim, bool kCausal>
void launch_dq(const FlashParams& p, cudaStream_t stream) {
  using Tr = DqWsTraits<kHeadDim>;
  launch_pass<Tr, kHeadDim>(flash_bwd_dq_ws_kernel<kHeadDim, kCausal>,
                            static_cast<int>(ceil_div(p.seqlen_q, Tr::kBlockM)), p, stream);
}

}  // namespace
}  // namespace flash

void flash_bwd_dkdv_wgmma_ws(const FlashParams& p, cudaStream_t stream) {
  flash_wgmma_switch(p, [&](auto d, auto causal) {
    constexpr int kD = decltype(d)::value;
    constexpr bool kCausal = decltype(causal)::value;
    // With dQ accumulation flash_bwd_bf16 has zeroed p.dq_accum and flash_bwd_wgmma converts it afterwards.
    if (!p.tiles.dq_accumulate)
      flash::launch_dkdv<kD, kCausal, false>(p, stream);
    else if (p.tiles.dq_fixed_point)
      flash::launch_dkdv<kD, kCausal, true, true>(p, stream);
    else
      flash::launch_dkdv<kD, kCausal, true>(p, stream);
  });
}

void flash_bwd_dq_wgmma_ws(const FlashParams& p, cudaStream_t stream) {
  flash_wgmma_switch(
      p, [&](auto d, auto causal) { flash::launch_dq<decltype(d)::value, decltype(causal)::value>(p, stream); });
}

}  // namespace pt::cuda
