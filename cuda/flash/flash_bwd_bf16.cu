// FlashAttention-2 backward on tensor cores, with recomputation and no atomics.
//
//   delta = rowsum(O ∘ dO)                                   (flash_bwd_delta_kernel)
//   per key tile:   dV = Σ_i P_iᵀ dO_i,  dK = Σ_i dS_iᵀ Q_i   (flash_bwd_dkdv_kernel)
//   per query tile: dQ = Σ_j dS_j K_j                        (flash_bwd_dq_kernel)
//   with P = exp(S − L) rebuilt from the saved L, dP = dO·Vᵀ, dS = P ∘ (dP − delta).
//
// Why two passes rather than FlashAttention-2's single pass with atomicAdd on dQ: each
// output has exactly one writer, so dQ is deterministic, needs no fp32 (B, H, Tq, D) scratch
// buffer nor its zeroing and conversion passes, and no red.global traffic into L2. The price
// is recomputing S = Q·Kᵀ and dP = dO·Vᵀ in the dQ pass: 7 tile products instead of 5. The
// wgmma kernels also compile the single pass (tiles "…/acc", flash_bwd_wgmma.cu); which runs by
// default is docs/FLASH_ATTENTION.md's table.
#include <algorithm>

#include "cuda/flash/flash_dq_fixed.cuh"
#include "cuda/flash/flash_mma.cuh"
#include "cuda/flash/flash_params.h"
#include "cuda/flash/flash_softmax.cuh"

namespace pt::cuda {
namespace flash {
namespace {

// dK/dV pass: kWarps × 16 keys per block (each warp its own 16 keys), kBlockM queries per
// step. Four accumulators live per warp: S and dP (kBlockM/2 registers each), dK and dV
// (kHeadDim/2 each); d = 128 halves the query step to stay clear of spills.
template <int kHeadDim>
struct DkDvTraits {
  static constexpr int kWarps = 4;
  static constexpr int kBlockN = 16 * kWarps;
  static constexpr int kBlockM = kHeadDim <= 64 ? 64 : 32;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = smem_ld<kHeadDim>();
  // K, V once; two stages of Q, dO (bf16) and L, delta (fp32).
  static constexpr int kSmemBytes = (2 * kBlockN + 4 * kBlockM) * kLd * 2 + 4 * kBlockM * 4;
};

// dQ pass: kWarps × 16 queries per block, kBlockN keys per step.
template <int kHeadDim>
struct DqTraits {
  static constexpr int kWarps = 4;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kBlockN = kHeadDim <= 64 ? 64 : 32;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = smem_ld<kHeadDim>();
  static constexpr int kSmemBytes = (2 * kBlockM + 4 * kBlockN) * kLd * 2;  // Q, dO; 2 stages K, V
};

// delta[b, h, i] = Σ_c O[i, c] · dO[i, c] in fp32. kLanes lanes per query row (the row's
// 16-byte packs, rounded up to a power of two), the rows of one (b, h) per block: grid (query
// blocks, H, B), so no index divisions. Rows start on 16-byte boundaries (ops' check_layout).
// A warp per row with 2-byte loads and 64-bit index divisions was a fifth of the attention
// backward at XL's shape (docs/reports/2026-11-24_flash-model-shape-ncu_h100.md).
template <int kHeadDim>
struct DeltaTraits {
  static constexpr int kPacks = kHeadDim / 8;
  static constexpr int kLanes = kPacks <= 2 ? 2 : kPacks <= 4 ? 4 : kPacks <= 8 ? 8 : kPacks <= 16 ? 16 : 32;
  static constexpr int kThreads = 256, kRowsPerBlock = kThreads / kLanes;
  static_assert(kHeadDim % 8 == 0 && kPacks <= 32, "delta: whole 16-byte packs, at most 32 a row");
};
//
// With dQ in fixed point (p.dq_row_exp set: tiles "…/fxp", cuda/flash/flash_dq_fixed.cuh) the kernel
// also writes each query row's bound exponent from Σ dO², and folds max |K| and max Σ V² of its
// key rows into the head's two words (atomicMax on fp32 bits, once a block; the launcher zeroed
// them and runs max(Tq, Tk) rows). K and V are read only for this: 67 MB more at the leaderboard's
// d 64 shape, about 20 us at the copy rate.
template <int kHeadDim>
__global__ void flash_bwd_delta_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
  using Tr = DeltaTraits<kHeadDim>;
  const int lane = threadIdx.x % Tr::kLanes;
  const int i = blockIdx.x * Tr::kRowsPerBlock + threadIdx.x / Tr::kLanes;
  const int b = blockIdx.z, h = blockIdx.y;
  const int64_t bh = static_cast<int64_t>(b) * p.heads + h;
  const bool fixed = p.dq_row_exp != nullptr;  // the same for the whole grid
  // This lane's 8 elements of row i of a (B, H, T, D) bf16 tensor.
  auto load_row_pack = [&](const void* t, const RowStrides& st, float(&x)[8]) {
    load_pack<8>(head_row<const bf16>(t, st, b, h, i) + 8 * lane, x);
  };
  float s = 0.0f, n2 = 0.0f;
  if (i < p.seqlen_q && lane < Tr::kPacks) {
    float o[8], d_o[8];
    load_row_pack(p.o, p.o_s, o);
    load_row_pack(p.dout, p.do_s, d_o);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      s += o[c] * d_o[c];
      n2 += d_o[c] * d_o[c];
    }
  }
#pragma unroll
  for (int off = Tr::kLanes / 2; off > 0; off >>= 1) {  // every lane
    s += __shfl_xor_sync(0xffffffffu, s, off);
    n2 += __shfl_xor_sync(0xffffffffu, n2, off);
  }
  if (i < p.seqlen_q && lane == 0) {
    p.delta[bh * p.seqlen_q + i] = s;
    if (fixed) p.dq_row_exp[bh * p.seqlen_q + i] = dq_fixed_row_exp(n2, s);
  }
  if (!fixed) return;
  // This block's key rows: max |K| and max Σ V² as fp32 bits (ordered as ints for x ≥ 0, NaN above
  // inf: fmaxf would drop a NaN).
  int k_bits = 0, v2_bits = 0;
  float v2 = 0.0f;
  if (i < p.seqlen_k && lane < Tr::kPacks) {
    float k[8], v[8];
    load_row_pack(p.k, p.k_s, k);
    load_row_pack(p.v, p.v_s, v);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      k_bits = max(k_bits, __float_as_int(fabsf(k[c])));
      v2 += v[c] * v[c];
    }
  }
#pragma unroll
  for (int off = Tr::kLanes / 2; off > 0; off >>= 1) v2 += __shfl_xor_sync(0xffffffffu, v2, off);
  v2_bits = __float_as_int(fabsf(v2));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    k_bits = max(k_bits, __shfl_xor_sync(0xffffffffu, k_bits, off));
    v2_bits = max(v2_bits, __shfl_xor_sync(0xffffffffu, v2_bits, off));
  }
  __shared__ int warp_bits[2][Tr::kThreads / 32];
  if (threadIdx.x % 32 == 0) {
    warp_bits[0][threadIdx.x / 32] = k_bits;
    warp_bits[1][threadIdx.x / 32] = v2_bits;
  }
  __syncthreads();
  if (threadIdx.x < 2) {
    int m = 0;
    for (int w = 0; w < Tr::kThreads / 32; ++w) m = max(m, warp_bits[threadIdx.x][w]);
    if (m != 0) atomicMax(p.dq_head_bound + 2 * bh + threadIdx.x, m);
  }
}

// Query tile [m0, m0 + kBlockM) against this warp's 16 keys starting at key0. kMasked: the
// tile crosses the diagonal (causal) or the end of the queries.
template <int kHeadDim, int kBlockM, bool kCausal, bool kMasked>
__device__ __forceinline__ void dkdv_step(float (&acc_dk)[kHeadDim / 8][4], float (&acc_dv)[kHeadDim / 8][4],
                                          const bf16* sK, const bf16* sV, const bf16* sQ, const bf16* sdO,
                                          const float* sL, const float* sDelta, int key0, int m0, int seqlen_q,
                                          float scale_log2) {
  constexpr int kLd = smem_ld<kHeadDim>();
  // Sᵀ = K·Qᵀ: rows are this warp's keys, columns the tile's queries.
  float acc_s[kBlockM / 8][4];
  zero(acc_s);
  warp_mma_ss<kHeadDim, kBlockM, false>(acc_s, sK, sQ, kLd);
  probs_by_col<kBlockM, kCausal, kMasked>(acc_s, sL, key0, m0, seqlen_q, scale_log2);
  // dV += Pᵀ·dO
  {
    uint32_t p_frag[kBlockM / 16][4];
    acc_to_a<kBlockM>(p_frag, acc_s);
    warp_mma_rs<kBlockM, kHeadDim, true>(acc_dv, p_frag, sdO, kLd);
  }
  // dPᵀ = V·dOᵀ; dSᵀ = Pᵀ ∘ (dPᵀ − delta_query)
  float acc_dp[kBlockM / 8][4];
  zero(acc_dp);
  warp_mma_ss<kHeadDim, kBlockM, false>(acc_dp, sV, sdO, kLd);
  ds_by_col<kBlockM>(acc_dp, acc_s, sDelta);
  // dK += dSᵀ·Q (the 1/sqrt(d) is applied once at the end)
  uint32_t ds_frag[kBlockM / 16][4];
  acc_to_a<kBlockM>(ds_frag, acc_dp);
  warp_mma_rs<kBlockM, kHeadDim, true>(acc_dk, ds_frag, sQ, kLd);
}

template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(DkDvTraits<kHeadDim>::kThreads) flash_bwd_dkdv_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
  using Tr = DkDvTraits<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kLd = Tr::kLd, kThreads = Tr::kThreads;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *sK, *sV, *sQ, *sdO;  // (kBlockN, kLd) and (2, kBlockM, kLd) each
  carve_bwd_tiles<kBlockN, kBlockM, 2, kLd>(smem, sK, sV, sQ, sdO);
  float* sL = reinterpret_cast<float*>(sdO + 2 * kBlockM * kLd);  // (2, kBlockM)
  float* sDelta = sL + 2 * kBlockM;                               // (2, kBlockM)

  const auto [n0, h, b] = key_tile_rows<kBlockN>(p);
  const int warp = threadIdx.x / 32;
  const int tq = p.seqlen_q;

  const DkDvQueries<kBlockM, kBlockN, kCausal, kThreads, PaddedTileCopy<kBlockM, kHeadDim, kThreads>> queries(
      p, b, h, n0, sQ, sdO, sL, sDelta);
  queries.start(PaddedTileCopy<kBlockN, kHeadDim, kThreads>(), sK, sV);

  float acc_dk[kHeadDim / 8][4] = {}, acc_dv[kHeadDim / 8][4] = {};  // (16 keys, kHeadDim) per warp
  const float scale_log2 = p.scale * kLog2e;
  const bf16* sKw = sK + warp * 16 * kLd;
  const bf16* sVw = sV + warp * 16 * kLd;
  const int key0 = n0 + warp * 16;

  for (int i = queries.tiles.m_begin; i < queries.tiles.m_blocks; ++i) {
    const auto [sQi, sdOi, sLi, sDi] = queries.turn(i);
    if (queries.tiles.unmasked(i))
      dkdv_step<kHeadDim, kBlockM, kCausal, false>(acc_dk, acc_dv, sKw, sVw, sQi, sdOi, sLi, sDi, key0, i * kBlockM, tq,
                                                   scale_log2);
    else
      dkdv_step<kHeadDim, kBlockM, kCausal, true>(acc_dk, acc_dv, sKw, sVw, sQi, sdOi, sLi, sDi, key0, i * kBlockM, tq,
                                                  scale_log2);
    __syncthreads();
  }

  store_dk_dv<kHeadDim>(p, b, h, key0, acc_dk, acc_dv);
}

// Key tile [n0, n0 + kBlockN) for this warp's 16 queries starting at row0.
template <int kHeadDim, int kBlockN, bool kCausal, bool kMasked>
__device__ __forceinline__ void dq_step(float (&acc_dq)[kHeadDim / 8][4], const bf16* sQw, const bf16* sdOw,
                                        const bf16* sK, const bf16* sV, const float (&neg_lse2)[2],
                                        const float (&delta)[2], int row0, int n0, int seqlen_k, float scale_log2) {
  constexpr int kLd = smem_ld<kHeadDim>();
  float acc_s[kBlockN / 8][4];  // S = Q·Kᵀ, then P, then dS
  zero(acc_s);
  warp_mma_ss<kHeadDim, kBlockN, false>(acc_s, sQw, sK, kLd);
  probs_by_row<kBlockN, kCausal, kMasked>(acc_s, neg_lse2, row0, n0, seqlen_k, scale_log2);
  float acc_dp[kBlockN / 8][4];  // dP = dO·Vᵀ
  zero(acc_dp);
  warp_mma_ss<kHeadDim, kBlockN, false>(acc_dp, sdOw, sV, kLd);
  ds_by_row<kBlockN>(acc_s, acc_dp, delta);
  uint32_t ds_frag[kBlockN / 16][4];
  acc_to_a<kBlockN>(ds_frag, acc_s);
  warp_mma_rs<kBlockN, kHeadDim, true>(acc_dq, ds_frag, sK, kLd);  // dQ += dS·K
}

template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(DqTraits<kHeadDim>::kThreads) flash_bwd_dq_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
  using Tr = DqTraits<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kLd = Tr::kLd, kThreads = Tr::kThreads;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *sQ, *sdO, *sK, *sV;  // (kBlockM, kLd) and (2, kBlockN, kLd) each
  carve_bwd_tiles<kBlockM, kBlockN, 2, kLd>(smem, sQ, sdO, sK, sV);

  const auto [m0, h, b] = query_tile_rows<kBlockM>(p);
  const int warp = threadIdx.x / 32;
  const int tq = p.seqlen_q, tk = p.seqlen_k;

  const KeyValueStream<kBlockM, kBlockN, kCausal, PaddedTileCopy<kBlockN, kHeadDim, kThreads>, DqHeadRows<bf16>> kv(
      p, b, h, m0, sK, sV);
  kv.start(PaddedTileCopy<kBlockM, kHeadDim, kThreads>(), sQ, sdO);

  // This lane's two rows: −L·log2(e) (so P = 2^(s·scale·log2e − L·log2e)) and delta.
  const int row0 = m0 + warp * 16;
  float neg_lse2[2], delta[2];
  load_row_stats(p, b, h, row0, neg_lse2, delta);

  float acc_dq[kHeadDim / 8][4] = {};
  const float scale_log2 = p.scale * kLog2e;
  const bf16* sQw = sQ + warp * 16 * kLd;
  const bf16* sdOw = sdO + warp * 16 * kLd;

  for (int j = 0; j < kv.tiles.n_blocks; ++j) {
    const auto [sKj, sVj] = kv.turn(j);
    if (j < kv.tiles.n_full)
      dq_step<kHeadDim, kBlockN, kCausal, false>(acc_dq, sQw, sdOw, sKj, sVj, neg_lse2, delta, row0, j * kBlockN, tk,
                                                 scale_log2);
    else
      dq_step<kHeadDim, kBlockN, kCausal, true>(acc_dq, sQw, sdOw, sKj, sVj, neg_lse2, delta, row0, j * kBlockN, tk,
                                                scale_log2);
    __syncthreads();
  }

  bf16* dq = head_row<bf16>(p.dq, p.dq_s, b, h, row0);
  store_strip<kHeadDim>(dq, p.dq_s.row, acc_dq, p.scale, p.scale, tq - row0, unrotate_rows<kHeadDim>(p, row0));
}

template <int kHeadDim>
void launch_delta(const FlashParams& p, cudaStream_t stream) {
  using Tr = DeltaTraits<kHeadDim>;
  // With fixed-point dQ the kernel also reads every key row (for the heads' bounds).
  const int rows = p.dq_row_exp != nullptr ? std::max(p.seqlen_q, p.seqlen_k) : p.seqlen_q;
  launch_chained(flash_bwd_delta_kernel<kHeadDim>, flash_grid(p, rows, Tr::kRowsPerBlock), Tr::kThreads, 0, stream, p);
  PT_CUDA_CHECK_LAUNCH();
}

template <int kHeadDim, bool kCausal>
void launch_dkdv_dq(const FlashParams& p, cudaStream_t stream) {
  using KV = DkDvTraits<kHeadDim>;
  launch_flash_kernel(flash_bwd_dkdv_kernel<kHeadDim, kCausal>, flash_grid(p, p.seqlen_k, KV::kBlockN), KV::kThreads,
                      KV::kSmemBytes, stream, p);
  using Q = DqTraits<kHeadDim>;
  launch_flash_kernel(flash_bwd_dq_kernel<kHeadDim, kCausal>, flash_grid(p, p.seqlen_q, Q::kBlockM), Q::kThreads,
                      Q::kSmemBytes, stream, p);
}

}  // namespace
}  // namespace flash

void flash_bwd_bf16(const FlashParams& p, cudaStream_t stream) {
  const bool launched = flash_head_dim_switch(p.head_dim, p.causal, [&](auto d, auto causal) {
    constexpr int kHeadDim = decltype(d)::value;
    if (p.kernels == FlashKernels::Wgmma && p.tiles.dq_accumulate) {
      // The dQ accumulation workspace, zeroed as one before the delta kernel folds the heads'
      // bounds into its last words (fixed point) and the dK/dV pass adds into it.
      PT_CHECK(p.dq_accum != nullptr && (!p.tiles.dq_fixed_point || p.dq_row_exp != nullptr),
               "flash attention: dQ accumulation needs its workspace (dq_accum, and for fixed point dq_row_exp)");
      PT_CUDA_CHECK(cudaMemsetAsync(p.dq_accum, 0, static_cast<size_t>(flash_dq_workspace_numel(p)) * 4, stream));
    }
    flash::launch_delta<kHeadDim>(p, stream);  // rowsum(dO ∘ O), for either family
    if (p.kernels == FlashKernels::Wgmma)
      flash_bwd_wgmma(p, stream);
    else
      flash::launch_dkdv_dq<kHeadDim, decltype(causal)::value>(p, stream);
  });
  PT_CHECK(launched, "flash attention: no bf16 kernel for head dimension " + std::to_string(p.head_dim));
}

}  // namespace pt::cuda
