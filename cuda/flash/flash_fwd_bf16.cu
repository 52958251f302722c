// FlashAttention-2 forward on tensor cores (bf16 operands, fp32 softmax and accumulators).
// One thread block per (query tile, head, batch); each warp owns 16 query rows and runs
// Algorithm 1 on them: S = Q·Kᵀ, online softmax (running max m, running sum l), O += P·V,
// with the next K/V tile copied in (cp.async, two stages) while the current one is used.
#include "cuda/flash/flash_mma.cuh"
#include "cuda/flash/flash_params.h"
#include "cuda/flash/flash_softmax.cuh"

namespace pt::cuda {
namespace flash {
namespace {

// Tile shapes per head dimension: kBlockM = 16 rows × kWarps query rows per block, kBlockN keys
// per step. The S accumulator is kBlockN/2 fp32 registers, O is kHeadDim/2, the Q strip
// kHeadDim/4: 128 query rows × 64 keys keeps d = 128 under ~170 registers.
template <int kHeadDim>
struct FwdTraits {
  static constexpr int kWarps = 8;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kBlockN = kHeadDim <= 32 ? 128 : 64;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLd = smem_ld<kHeadDim>();
  static constexpr int kSmemBytes = (kBlockM + 4 * kBlockN) * kLd * 2;  // Q + 2 stages of K, V
};

// One key tile of Algorithm 1 for this warp's 16 rows. kMasked: the tile crosses the diagonal
// (causal) or the end of the keys; unmasked tiles do no index arithmetic at all.
template <int kHeadDim, int kBlockN, bool kCausal, bool kMasked>
__device__ __forceinline__ void fwd_step(float (&acc_o)[kHeadDim / 8][4], float (&row_max)[2], float (&row_sum)[2],
                                         const uint32_t (&q_frag)[kHeadDim / 16][4], const bf16* sK, const bf16* sV,
                                         int row0, int n0, int seqlen_k, float scale_log2, float mask_bias) {
  constexpr int kLd = smem_ld<kHeadDim>();
  float acc_s[kBlockN / 8][4];  // (16, kBlockN) raw scores q·k
  zero(acc_s);
  warp_mma_rs<kHeadDim, kBlockN, false>(acc_s, q_frag, sK, kLd);
  online_softmax<kBlockN, kHeadDim, kCausal, kMasked>(acc_s, acc_o, row_max, row_sum, row0, n0, seqlen_k, scale_log2,
                                                      mask_bias);
  uint32_t p_frag[kBlockN / 16][4];  // P in bf16, straight from the S registers
  acc_to_a<kBlockN>(p_frag, acc_s);
  warp_mma_rs<kBlockN, kHeadDim, true>(acc_o, p_frag, sV, kLd);
}

template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(FwdTraits<kHeadDim>::kThreads) flash_fwd_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
  using Tr = FwdTraits<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kLd = Tr::kLd, kThreads = Tr::kThreads;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);  // (kBlockM, kLd)
  bf16* sK = sQ + kBlockM * kLd;             // (2, kBlockN, kLd)
  bf16* sV = sK + 2 * kBlockN * kLd;         // (2, kBlockN, kLd)

  const auto [m0, h, b] = query_tile_rows<kBlockM>(p);
  const int warp = threadIdx.x / 32;

  const KeyValueStream<kBlockM, kBlockN, kCausal, PaddedTileCopy<kBlockN, kHeadDim, kThreads>> kv(p, b, h, m0, sK, sV);
  kv.start(PaddedTileCopy<kBlockM, kHeadDim, kThreads>(), sQ);

  const float scale_log2 = p.scale * kLog2e;
  const float mask_bias = kMaskedScoreBias / p.scale;                    // -1e6 on the scaled score
  float acc_o[kHeadDim / 8][4] = {};                                     // (16, kHeadDim) unnormalised output
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};  // rows g and g+8
  uint32_t q_frag[kHeadDim / 16][4];
  const int row0 = m0 + warp * 16;

  for (int j = 0; j < kv.tiles.n_blocks; ++j) {
    const auto [sKj, sVj] = kv.turn(j);
    if (j == 0) load_a_strip<kHeadDim>(q_frag, sQ + warp * 16 * kLd, kLd);
    if (j < kv.tiles.n_full)
      fwd_step<kHeadDim, kBlockN, kCausal, false>(acc_o, row_max, row_sum, q_frag, sKj, sVj, row0, j * kBlockN, kv.tk,
                                                  scale_log2, mask_bias);
    else
      fwd_step<kHeadDim, kBlockN, kCausal, true>(acc_o, row_max, row_sum, q_frag, sKj, sVj, row0, j * kBlockN, kv.tk,
                                                 scale_log2, mask_bias);
    __syncthreads();  // this stage is refilled by the next iteration's copy
  }

  store_output<kHeadDim>(p, b, h, row0, acc_o, row_max, row_sum);
}

template <int kHeadDim, bool kCausal>
void launch_fwd(const FlashParams& p, cudaStream_t stream) {
  using Tr = FwdTraits<kHeadDim>;
  launch_flash_kernel(flash_fwd_kernel<kHeadDim, kCausal>, flash_grid(p, p.seqlen_q, Tr::kBlockM), Tr::kThreads,
                      Tr::kSmemBytes, stream, p);
}

}  // namespace
}  // namespace flash

void flash_fwd_bf16(const FlashParams& p, cudaStream_t stream) {
  if (p.kernels == FlashKernels::Wgmma) return flash_fwd_wgmma(p, stream);
  const bool launched = flash_head_dim_switch(p.head_dim, p.causal, [&](auto d, auto causal) {
    flash::launch_fwd<decltype(d)::value, decltype(causal)::value>(p, stream);
  });
  PT_CHECK(launched, "flash attention: no bf16 kernel for head dimension " + std::to_string(p.head_dim));
}

}  // namespace pt::cuda
