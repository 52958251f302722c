// FlashAttention backward on Hopper warpgroup MMA (wgmma): the two passes of flash_bwd_bf16.cu
// (dK/dV per key tile, dQ per query tile, no atomics; the reasons are given there) with each
// warpgroup running its products on 64 rows from swizzled shared-memory tiles. Every operand
// keeps its natural row layout: Q, K, V, dO are K-major where they are contracted over d and
// MN-major where they are contracted over the sequence (flash_wgmma.cuh). Head dimensions 64, 128.
// delta = rowsum(O ∘ dO) comes from flash_bwd_bf16.cu's kernel, launched first.
//
// Tiles "…/acc" (WgmmaTiles::dq_accumulate) run FlashAttention-2's single pass instead: the dK/dV
// kernel also computes each tile's dQ contribution dS·K (5 products per tile instead of the two
// passes' 7) and adds it into an fp32 buffer with bulk asynchronous reductions, as FlashAttention-3
// does; a small kernel then scales it into dQ. dSᵀ goes through shared memory (the tensor cores
// read it back as dS, MN-major), and each 64 × D partial is staged in shared memory in the
// accumulator's own fragment order — conflict-free stores, one contiguous bulk reduction — so the
// fp32 buffer holds each 64-query tile in that order and the conversion kernel undoes it. dQ is
// then summed in an order that varies from run to run (not bit-for-bit reproducible); dK, dV are.
// Tiles "…/fxp" (WgmmaTiles::dq_fixed_point, warp-specialised dK/dV pass only) hold the buffer as
// 32-bit fixed point instead and add by integer reductions: reproducible (flash_dq_fixed.cuh).
#include "cuda/flash/flash_dq_fixed.cuh"
#include "cuda/flash/flash_params.h"
#include "cuda/flash/flash_softmax.cuh"
#include "cuda/flash/flash_wgmma.cuh"

namespace pt::cuda {
namespace flash {
namespace {

// dK/dV pass: warpgroups × 64 keys per block, 64 queries per step. Per thread: Sᵀ and dPᵀ
// (32 registers each), dK and dV (D/2 each). Two warpgroups share each Q/dO tile (half the copy
// traffic); one warpgroup per block fits several blocks per SM, which then drift apart and keep
// the tensor cores busy through each other's element-wise phases.
template <int kHeadDim, int kWarpgroups_, bool kAccumulateDq_>
struct DkDvWgmmaTraits {
  static constexpr int kWarpgroups = kWarpgroups_;
  static constexpr bool kAccumulateDq = kAccumulateDq_;
  static constexpr int kBlockN = 64 * kWarpgroups;  // keys per block
  static constexpr int kBlockM = 64;                // queries per step
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kKVBytes = sw128_tile_bytes<kBlockN, kHeadDim>();
  static constexpr int kQBytes = sw128_tile_bytes<kBlockM, kHeadDim>();
  // dQ accumulation. Two warpgroups at d = 128: each takes 64 of dQ's columns over all the
  // block's keys (one partial per tile, half the reduction traffic); otherwise each warpgroup
  // takes every column over its own 64 keys and reduces its own partial.
  static constexpr bool kDqSplitCols = kWarpgroups == 2 && kHeadDim == 128;
  static constexpr int kDqCols = kDqSplitCols ? 64 : kHeadDim;  // dQ columns per warpgroup
  static constexpr int kDqKeys = kDqSplitCols ? kBlockN : 64;   // keys each warpgroup contracts
  static_assert(kDqKeys % 16 == 0, "dQ's product contracts keys in wgmma k-steps of 16");
  static constexpr int kDsBytes = kAccumulateDq ? sw128_tile_bytes<kBlockN, kBlockM>() : 0;      // dSᵀ
  static constexpr int kDqStageBytes = kAccumulateDq ? kWarpgroups * kBlockM * kDqCols * 4 : 0;  // fp32
  // K, V; two stages of Q and dO; dSᵀ; two stages of L and delta (fp32); dQ partials; alignment slack.
  static constexpr int kSmemBytes =
      2 * kKVBytes + 4 * kQBytes + kDsBytes + 4 * kBlockM * 4 + kDqStageBytes + kSwizzleBlockBytes;
  // One warpgroup, d = 64: ask for registers that let three blocks share an SM.
  static constexpr int kMinBlocks = kWarpgroups == 1 && kHeadDim == 64 ? 3 : 1;
  static_assert(!kAccumulateDq || kBlockM == kDqAccumTileRows, "dq_accum tiles are one query step");
};

// dQ pass: warpgroups × 64 queries per block, 64 keys per step.
template <int kHeadDim, int kWarpgroups_>
struct DqWgmmaTraits {
  static constexpr int kWarpgroups = kWarpgroups_;
  static constexpr int kBlockM = 64 * kWarpgroups;
  static constexpr int kBlockN = 64;
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kQBytes = sw128_tile_bytes<kBlockM, kHeadDim>();
  static constexpr int kKVBytes = sw128_tile_bytes<kBlockN, kHeadDim>();
  static constexpr int kSmemBytes = 2 * kQBytes + 4 * kKVBytes + kSwizzleBlockBytes;  // Q, dO; 2 stages K, V
  static constexpr int kMinBlocks = kWarpgroups == 1 && kHeadDim == 64 ? 3 : 1;
};

// A warpgroup's (64 × N) fp32 accumulator into shared memory in fragment order (flash_wgmma.cuh),
// the staging of one bulk reduction into p.dq_accum.
template <int N>
__device__ __forceinline__ void stage_fragments(float* dst, const float (&acc)[N / 8][4]) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
    reinterpret_cast<float4*>(dst)[fragment_order_float4(j)] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
}

template <int kHeadDim, int kWarpgroups, bool kCausal, bool kAccumulateDq>
__global__ void __launch_bounds__(DkDvWgmmaTraits<kHeadDim, kWarpgroups, kAccumulateDq>::kThreads,
                                  DkDvWgmmaTraits<kHeadDim, kWarpgroups, kAccumulateDq>::kMinBlocks)
    flash_bwd_dkdv_wgmma_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
#if PT_FLASH_WGMMA_COMPILED
  using Tr = DkDvWgmmaTraits<kHeadDim, kWarpgroups, kAccumulateDq>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kThreads = Tr::kThreads;
  bf16 *sK, *sV, *sQ, *sdO;  // (kBlockN, D) and (2, kBlockM, D) SW128 each
  // (kBlockN, kBlockM) SW128, dQ accumulation only
  bf16* sdS = reinterpret_cast<bf16*>(carve_bwd_tiles<kBlockN, kBlockM, 2, kHeadDim>(sw128_smem(), sK, sV, sQ, sdO));
  float* sL = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(sdS) + Tr::kDsBytes);  // (2, kBlockM)
  float* sDelta = sL + 2 * kBlockM;                                                            // (2, kBlockM)
  float* sdQ = sDelta + 2 * kBlockM;  // (warpgroups, kBlockM · kDqCols) fp32 in fragment order, idem

  const auto [n0, h, b] = key_tile_rows<kBlockN>(p);
  const int wg = warpgroup_index(), warp_in_wg = (threadIdx.x / 32) % 4;
  const int tq = p.seqlen_q, tk = p.seqlen_k;
  const int64_t bh = static_cast<int64_t>(b) * p.heads + h;
  const int key0 = n0 + wg * 64 + warp_in_wg * 16;  // this warp's 16 keys

  const DkDvQueries<kBlockM, kBlockN, kCausal, kThreads, Sw128TileCopy<kBlockM, kHeadDim, kThreads>> queries(
      p, b, h, n0, sQ, sdO, sL, sDelta);
  queries.start(Sw128TileCopy<kBlockN, kHeadDim, kThreads>(), sK, sV);

  float acc_dk[kHeadDim / 8][4] = {}, acc_dv[kHeadDim / 8][4] = {};  // (64 keys, D) per warpgroup
  const float scale_log2 = p.scale * kLog2e;

  // dQ accumulation: this warpgroup's keys, columns and destination (tile i at dq_tiles + i · 64 · D).
  const int dq_key0 = Tr::kDqSplitCols ? 0 : wg * 64;
  const int dq_block0 = Tr::kDqSplitCols ? wg : 0;  // first 64-column block of dQ
  float* sdQ_wg = sdQ + wg * kBlockM * Tr::kDqCols;
  float* dq_tiles =
      kAccumulateDq ? p.dq_accum + bh * ceil_div(tq, kBlockM) * kBlockM * kHeadDim + dq_block0 * kBlockM * 64 : nullptr;
  const bool reduce_leader = threadIdx.x % 128 == 0;

  for (int i = queries.tiles.m_begin; i < queries.tiles.m_blocks; ++i) {
    const auto [sQi, sdOi, sLi, sDi] = queries.turn(i);
    const int m0 = i * kBlockM;

    // Sᵀ = K·Qᵀ (rows: this warpgroup's keys; columns: the tile's queries)
    float acc_s[kBlockM / 8][4];
    zero(acc_s);
    pin(acc_s);
    wgmma_fence();
    wgmma_k_major<kHeadDim, kBlockM, kBlockN, kBlockM>(acc_s, sK, wg * 64, sQi, 0);
    wgmma_commit();
    wgmma_wait<0>();
    pin(acc_s);
    if (queries.tiles.unmasked(i))
      probs_by_col<kBlockM, kCausal, false>(acc_s, sLi, key0, m0, tq, scale_log2);
    else
      probs_by_col<kBlockM, kCausal, true>(acc_s, sLi, key0, m0, tq, scale_log2);

    // dV += Pᵀ·dO and dPᵀ = V·dOᵀ, one batch
    uint32_t p_frag[kBlockM / 16][4];
    acc_to_a<kBlockM>(p_frag, acc_s);
    float acc_dp[kBlockM / 8][4];
    zero(acc_dp);
    pin(p_frag);
    pin(acc_dp);
    pin(acc_dv);
    wgmma_fence();
    wgmma_regs_mn_major<kBlockM, kHeadDim, kBlockM, kRegsProductN<kHeadDim>>(acc_dv, p_frag, sdOi);
    wgmma_k_major<kHeadDim, kBlockM, kBlockN, kBlockM>(acc_dp, sV, wg * 64, sdOi, 0);
    wgmma_commit();
    wgmma_wait<0>();
    pin(acc_dv);
    pin(acc_dp);

    // dSᵀ = Pᵀ ∘ (dPᵀ − delta); dK += dSᵀ·Q (1/sqrt(d) applied at the end)
    ds_by_col<kBlockM>(acc_dp, acc_s, sDi);
    uint32_t ds_frag[kBlockM / 16][4];
    acc_to_a<kBlockM>(ds_frag, acc_dp);
    if constexpr (kAccumulateDq) {
      // The previous tile's reduction has read sdQ before anyone passes the barrier below.
      if (reduce_leader) bulk_wait_read<0>();
      store_ds_rows<kBlockN, kBlockM>(sdS, ds_frag, key0 - n0, key0 + frag_row(0) < tk, key0 + frag_row(2) < tk);
      fence_async_proxy();
      // Each warpgroup reads the dS rows of its own keys, or of every key when it splits columns.
      if constexpr (kWarpgroups == 1 || Tr::kDqSplitCols)
        __syncthreads();
      else if (wg == 0)
        named_barrier_sync<1, 128>();
      else
        named_barrier_sync<2, 128>();
    }
    float acc_dq[Tr::kDqCols / 8][4];  // dQ accumulation: this tile's dS·K, (64 queries, kDqCols)
    zero(acc_dq);
    pin(ds_frag);
    pin(acc_dk);
    if constexpr (kAccumulateDq) pin(acc_dq);
    wgmma_fence();
    wgmma_regs_mn_major<kBlockM, kHeadDim, kBlockM, kRegsProductN<kHeadDim>>(acc_dk, ds_frag, sQi);
    if constexpr (kAccumulateDq)
      wgmma_mn_major<Tr::kDqKeys, Tr::kDqCols, kBlockN, kBlockN>(acc_dq, sdS, dq_key0, sK, dq_key0, dq_block0);
    wgmma_commit();
    wgmma_wait<0>();
    pin(acc_dk);
    if constexpr (kAccumulateDq) {
      pin(acc_dq);
      stage_fragments<Tr::kDqCols>(sdQ_wg, acc_dq);
      fence_async_proxy();
    }
    __syncthreads();
    if (kAccumulateDq && reduce_leader) {
      bulk_reduce_add_f32(dq_tiles + static_cast<int64_t>(i) * kBlockM * kHeadDim, sdQ_wg, kBlockM * Tr::kDqCols * 4);
      bulk_commit();
    }
  }
  if (kAccumulateDq && reduce_leader) bulk_wait<0>();  // shared memory must outlive the reads

  store_dk_dv<kHeadDim>(p, b, h, key0, acc_dk, acc_dv);
#else
  __trap();
#endif
}

template <int kHeadDim, int kWarpgroups, bool kCausal>
__global__ void __launch_bounds__(DqWgmmaTraits<kHeadDim, kWarpgroups>::kThreads,
                                  DqWgmmaTraits<kHeadDim, kWarpgroups>::kMinBlocks)
    flash_bwd_dq_wgmma_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
#if PT_FLASH_WGMMA_COMPILED
  using Tr = DqWgmmaTraits<kHeadDim, kWarpgroups>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kThreads = Tr::kThreads;
  bf16 *sQ, *sdO, *sK, *sV;  // (kBlockM, D) and (2, kBlockN, D) SW128 each
  carve_bwd_tiles<kBlockM, kBlockN, 2, kHeadDim>(sw128_smem(), sQ, sdO, sK, sV);

  const auto [m0, h, b] = query_tile_rows<kBlockM>(p);
  const int wg = warpgroup_index(), warp_in_wg = (threadIdx.x / 32) % 4;
  const int tq = p.seqlen_q, tk = p.seqlen_k;
  const int row0 = m0 + wg * 64 + warp_in_wg * 16;

  const KeyValueStream<kBlockM, kBlockN, kCausal, Sw128TileCopy<kBlockN, kHeadDim, kThreads>, DqHeadRows<bf16>> kv(
      p, b, h, m0, sK, sV);
  kv.start(Sw128TileCopy<kBlockM, kHeadDim, kThreads>(), sQ, sdO);

  float neg_lse2[2], delta[2];  // this thread's two rows
  load_row_stats(p, b, h, row0, neg_lse2, delta);
  float acc_dq[kHeadDim / 8][4] = {};
  const float scale_log2 = p.scale * kLog2e;

  for (int j = 0; j < kv.tiles.n_blocks; ++j) {
    const auto [sKj, sVj] = kv.turn(j);

    // S = Q·Kᵀ and dP = dO·Vᵀ, one batch
    float acc_s[kBlockN / 8][4], acc_dp[kBlockN / 8][4];
    zero(acc_s);
    zero(acc_dp);
    pin(acc_s);
    pin(acc_dp);
    wgmma_fence();
    wgmma_k_major<kHeadDim, kBlockN, kBlockM, kBlockN>(acc_s, sQ, wg * 64, sKj, 0);
    wgmma_k_major<kHeadDim, kBlockN, kBlockM, kBlockN>(acc_dp, sdO, wg * 64, sVj, 0);
    wgmma_commit();
    wgmma_wait<0>();
    pin(acc_s);
    pin(acc_dp);
    if (j < kv.tiles.n_full)
      probs_by_row<kBlockN, kCausal, false>(acc_s, neg_lse2, row0, j * kBlockN, tk, scale_log2);
    else
      probs_by_row<kBlockN, kCausal, true>(acc_s, neg_lse2, row0, j * kBlockN, tk, scale_log2);
    ds_by_row<kBlockN>(acc_s, acc_dp, delta);

    // dQ += dS·K (K read MN-major: its rows are the contraction)
    uint32_t ds_frag[kBlockN / 16][4];
    acc_to_a<kBlockN>(ds_frag, acc_s);
    wgmma_regs_mn_major_waited<kBlockN, kHeadDim, kBlockN, kRegsProductN<kHeadDim>>(acc_dq, ds_frag, sKj);
    __syncthreads();
  }

  bf16* dq = head_row<bf16>(p.dq, p.dq_s, b, h, row0);
  store_strip<kHeadDim>(dq, p.dq_s.row, acc_dq, p.scale, p.scale, tq - row0, unrotate_rows<kHeadDim>(p, row0));
#else
  __trap();
#endif
}

template <typename Traits, typename Kernel>
void launch(Kernel kernel, int blocks, const FlashParams& p, cudaStream_t stream) {
  launch_flash_kernel(kernel, flash_grid(p, blocks, 1), Traits::kThreads, Traits::kSmemBytes, stream, p);
}

template <int kHeadDim, int kWarpgroups, bool kCausal, bool kAccumulateDq>
void launch_dkdv(const FlashParams& p, cudaStream_t stream) {
  using Tr = DkDvWgmmaTraits<kHeadDim, kWarpgroups, kAccumulateDq>;
  launch<Tr>(flash_bwd_dkdv_wgmma_kernel<kHeadDim, kWarpgroups, kCausal, kAccumulateDq>,
             static_cast<int>(ceil_div(p.seqlen_k, Tr::kBlockN)), p, stream);
}

// dQ = scale · dq_accum as bf16 rows: one thread per float4 of the fp32 buffer, i.e. per
// (64-query tile, column tile j, fragment thread f) — undoing stage_fragments' order. kFixed: the
// buffer holds int32 in fixed_order_word's layout, each row scaled by 2^s (flash_dq_fixed.cuh).
template <int kHeadDim, bool kFixed>
__global__ void flash_dq_from_accum_kernel(const FlashParams p) {
  begin_chained_kernel();                       // launched by launch_chained or launch_flash_kernel
  constexpr int kPerTile = kHeadDim / 8 * 128;  // float4s per 64 × D tile
  const int m_tiles = ceil_div(p.seqlen_q, kDqAccumTileRows);
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(p.batch) * p.heads * m_tiles * kPerTile) return;
  const int f = static_cast<int>(idx % 128), j = static_cast<int>(idx / 128 % (kHeadDim / 8));
  const int64_t tile = idx / kPerTile;  // (b · H + h) · m_tiles + query tile
  const int b = static_cast<int>(tile / m_tiles / p.heads), h = static_cast<int>(tile / m_tiles % p.heads);
  const int row = static_cast<int>(tile % m_tiles) * kDqAccumTileRows + (f / 32) * 16 + (f % 32) / 4;
  const int col = j * 8 + 2 * (f % 4);
  float4 v;
  float scale_lo = p.scale, scale_hi = p.scale;  // rows row and row + 8
  if constexpr (kFixed) {
    const int* words = reinterpret_cast<const int*>(p.dq_accum) + tile * 64 * kHeadDim + fixed_order_word(j, 0, f);
    v = make_float4(static_cast<float>(words[0]), static_cast<float>(words[128]), static_cast<float>(words[256]),
                    static_cast<float>(words[384]));
    const int64_t bh = static_cast<int64_t>(b) * p.heads + h;
    const int head_exp = dq_fixed_head_exp(p.dq_head_bound + 2 * bh);
    const int* row_exp = p.dq_row_exp + bh * p.seqlen_q;
    if (row < p.seqlen_q) scale_lo *= dq_fixed_unscale(dq_fixed_scale_exp(row_exp[row], head_exp));
    if (row + 8 < p.seqlen_q) scale_hi *= dq_fixed_unscale(dq_fixed_scale_exp(row_exp[row + 8], head_exp));
  } else {
    v = reinterpret_cast<const float4*>(p.dq_accum)[idx];
  }
  bf16* dq = head_row<bf16>(p.dq, p.dq_s, b, h) + col;
  // Columns col, col+1 are one RoPE pair: rotated back here when the caller asks (as store_strip).
  const float2* unrotate = unrotate_rows<kHeadDim>(p, 0);
  if (row < p.seqlen_q)
    *reinterpret_cast<uint32_t*>(dq + row * p.dq_s.row) =
        pack_unrotated(v.x * scale_lo, v.y * scale_lo, unrotate_angle<kHeadDim>(unrotate, row, col / 2, true));
  if (row + 8 < p.seqlen_q)
    *reinterpret_cast<uint32_t*>(dq + (row + 8) * p.dq_s.row) =
        pack_unrotated(v.z * scale_hi, v.w * scale_hi, unrotate_angle<kHeadDim>(unrotate, row + 8, col / 2, true));
}

// The single pass: the dK/dV pass adds dQ's partials into the buffer (launch_dkdv(): the cp.async
// kernel or the warp-specialised one; flash_bwd_bf16 zeroed the buffer before the delta kernel),
// then dQ from the buffer.
template <int kHeadDim, class LaunchDkDv>
void accumulating_dq(const FlashParams& p, cudaStream_t stream, LaunchDkDv&& launch_dkdv) {
  PT_CHECK(!p.tiles.dq_fixed_point || p.tiles.dkdv_warp_specialized,
           "flash attention: fixed-point dQ runs in the warp-specialised dK/dV pass only");
  const int64_t numel = flash_dq_accum_numel(p.batch, p.heads, p.seqlen_q, kHeadDim);
  launch_dkdv();
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(ceil_div(numel / 4, kThreads));
  if (p.tiles.dq_fixed_point)
    launch_chained(flash_dq_from_accum_kernel<kHeadDim, true>, blocks, kThreads, 0, stream, p);
  else
    launch_chained(flash_dq_from_accum_kernel<kHeadDim, false>, blocks, kThreads, 0, stream, p);
  PT_CUDA_CHECK_LAUNCH();
}

template <int kHeadDim, int kWarpgroups, bool kCausal>
void launch_dq(const FlashParams& p, cudaStream_t stream) {
  using Tr = DqWgmmaTraits<kHeadDim, kWarpgroups>;
  launch<Tr>(flash_bwd_dq_wgmma_kernel<kHeadDim, kWarpgroups, kCausal>,
             static_cast<int>(ceil_div(p.seqlen_q, Tr::kBlockM)), p, stream);
}

// The compiled tile shapes: 1 or 2 warpgroups per block in each pass, or in the single pass.
template <int kHeadDim, bool kCausal>
void launch_bwd(const FlashParams& p, cudaStream_t stream) {
  const int dkdv = p.tiles.dkdv_warpgroups, dq = p.tiles.dq_warpgroups;
  PT_CHECK((dkdv == 1 || dkdv == 2) && (p.tiles.dq_accumulate || dq == 1 || dq == 2),
           "flash attention: the wgmma backward passes run 1 or 2 warpgroups per block");
  if (p.tiles.dq_accumulate) {
    accumulating_dq<kHeadDim>(p, stream, [&] {
      if (p.tiles.dkdv_warp_specialized)
        flash_bwd_dkdv_wgmma_ws(p, stream);
      else
        dkdv == 1 ? launch_dkdv<kHeadDim, 1, kCausal, true>(p, stream)
                  : launch_dkdv<kHeadDim, 2, kCausal, true>(p, stream);
    });
    return;
  }
  if (p.tiles.dkdv_warp_specialized)
    flash_bwd_dkdv_wgmma_ws(p, stream);
  else if (dkdv == 1)
    launch_dkdv<kHeadDim, 1, kCausal, false>(p, stream);
  else
    launch_dkdv<kHeadDim, 2, kCausal, false>(p, stream);
  if (p.tiles.dq_warp_specialized)
    flash_bwd_dq_wgmma_ws(p, stream);
  else if (dq == 1)
    launch_dq<kHeadDim, 1, kCausal>(p, stream);
  else
    launch_dq<kHeadDim, 2, kCausal>(p, stream);
}

}  // namespace
}  // namespace flash

void flash_bwd_wgmma(const FlashParams& p, cudaStream_t stream) {
  flash_wgmma_switch(
      p, [&](auto d, auto causal) { flash::launch_bwd<decltype(d)::value, decltype(causal)::value>(p, stream); });
}

}  // namespace pt::cuda
