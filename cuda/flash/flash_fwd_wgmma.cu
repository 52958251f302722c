// FlashAttention forward on Hopper warpgroup MMA (wgmma): Algorithm 1 as in flash_fwd_bf16.cu,
// with each warpgroup computing S = Q·Kᵀ and O += P·V for 64 query rows straight from swizzled
// shared-memory tiles (the B operand is never staged through registers, and one read of a K or V
// tile feeds 64 rows instead of 16). The warpgroups of a block share the K/V tiles, copied in with
// cp.async two stages deep. Head dimensions 64 and 128; tile shapes chosen at run time among the
// compiled ones (FlashParams::tiles).
#include "cuda/flash/flash_params.h"
#include "cuda/flash/flash_softmax.cuh"
#include "cuda/flash/flash_wgmma.cuh"

namespace pt::cuda {
namespace flash {
namespace {

template <int kHeadDim, int kWarpgroups, int kBlockN_>
struct FwdWgmmaTraits {
  static constexpr int kBlockM = 64 * kWarpgroups;  // query rows per block
  static constexpr int kBlockN = kBlockN_;          // keys per step
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kQBytes = sw128_tile_bytes<kBlockM, kHeadDim>();
  static constexpr int kKVBytes = sw128_tile_bytes<kBlockN, kHeadDim>();
  // Q, then two stages of K and of V; 1 KiB slack to align the base to the swizzle period.
  static constexpr int kSmemBytes = kQBytes + 4 * kKVBytes + kSwizzleBlockBytes;
};

template <int kHeadDim, int kWarpgroups, int kBlockN_, bool kCausal>
__global__ void __launch_bounds__(FwdWgmmaTraits<kHeadDim, kWarpgroups, kBlockN_>::kThreads)
    flash_fwd_wgmma_kernel(const FlashParams p) {
  begin_chained_kernel();  // launched by launch_chained or launch_flash_kernel
#if PT_FLASH_WGMMA_COMPILED
  using Tr = FwdWgmmaTraits<kHeadDim, kWarpgroups, kBlockN_>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kThreads = Tr::kThreads;
  unsigned char* smem = sw128_smem();
  bf16* sQ = reinterpret_cast<bf16*>(smem);                // (kBlockM, D) SW128
  bf16* sK = reinterpret_cast<bf16*>(smem + Tr::kQBytes);  // (2, kBlockN, D) SW128
  bf16* sV = sK + 2 * kBlockN * kHeadDim;                  // (2, kBlockN, D) SW128

  const auto [m0, h, b] = query_tile_rows<kBlockM>(p);
  const int wg = warpgroup_index(), warp_in_wg = (threadIdx.x / 32) % 4;
  const int row0 = m0 + wg * 64 + warp_in_wg * 16;  // this warp's 16-row strip

  const KeyValueStream<kBlockM, kBlockN, kCausal, Sw128TileCopy<kBlockN, kHeadDim, kThreads>> kv(p, b, h, m0, sK, sV);
  kv.start(Sw128TileCopy<kBlockM, kHeadDim, kThreads>(), sQ);

  const float scale_log2 = p.scale * kLog2e;
  const float mask_bias = kMaskedScoreBias / p.scale;
  float acc_o[kHeadDim / 8][4] = {};  // (64, D) per warpgroup: this thread's fragment
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  for (int j = 0; j < kv.tiles.n_blocks; ++j) {
    const auto [sKj, sVj] = kv.turn(j);

    float acc_s[kBlockN / 8][4];  // (64, kBlockN) raw scores
    zero(acc_s);
    pin(acc_s);
    wgmma_fence();
    wgmma_k_major<kHeadDim, kBlockN, kBlockM, kBlockN>(acc_s, sQ, wg * 64, sKj, 0);
    wgmma_commit();
    wgmma_wait<0>();
    pin(acc_s);

    if (j < kv.tiles.n_full)
      online_softmax<kBlockN, kHeadDim, kCausal, false>(acc_s, acc_o, row_max, row_sum, row0, j * kBlockN, kv.tk,
                                                        scale_log2, mask_bias);
    else
      online_softmax<kBlockN, kHeadDim, kCausal, true>(acc_s, acc_o, row_max, row_sum, row0, j * kBlockN, kv.tk,
                                                       scale_log2, mask_bias);

    uint32_t p_frag[kBlockN / 16][4];  // P in bf16 as the register A operand
    acc_to_a<kBlockN>(p_frag, acc_s);
    wgmma_regs_mn_major_waited<kBlockN, kHeadDim, kBlockN, kRegsProductN<kHeadDim>>(acc_o, p_frag, sVj);
    __syncthreads();  // this stage is refilled by the next iteration's copy
  }

  store_output<kHeadDim>(p, b, h, row0, acc_o, row_max, row_sum);
#else
  __trap();
#endif
}

template <int kHeadDim, int kWarpgroups, int kBlockN, bool kCausal>
void launch(const FlashParams& p, cudaStream_t stream) {
  using Tr = FwdWgmmaTraits<kHeadDim, kWarpgroups, kBlockN>;
  launch_flash_kernel(flash_fwd_wgmma_kernel<kHeadDim, kWarpgroups, kBlockN, kCausal>,
                      flash_grid(p, p.seqlen_q, Tr::kBlockM), Tr::kThreads, Tr::kSmemBytes, stream, p);
}

// The compiled tile shapes: (warpgroups, keys per step) ∈ {1, 2} × {64, 128}.
template <int kHeadDim, bool kCausal>
void launch_tiles(const FlashParams& p, cudaStream_t stream) {
  const int wg = p.tiles.fwd_warpgroups, bn = p.tiles.fwd_block_n;
  if (wg == 1 && bn == 64) return launch<kHeadDim, 1, 64, kCausal>(p, stream);
  if (wg == 1 && bn == 128) return launch<kHeadDim, 1, 128, kCausal>(p, stream);
  if (wg == 2 && bn == 64) return launch<kHeadDim, 2, 64, kCausal>(p, stream);
  if (wg == 2 && bn == 128) return launch<kHeadDim, 2, 128, kCausal>(p, stream);
  PT_FAIL("flash attention: no wgmma forward kernel with " + std::to_string(wg) + " warpgroups × " +
          std::to_string(bn) + " keys (1 or 2 × 64 or 128)");
}

}  // namespace
}  // namespace flash

void flash_fwd_wgmma(const FlashParams& p, cudaStream_t stream) {
  if (p.tiles.fwd_warp_specialized) return flash_fwd_wgmma_ws(p, stream);
  flash_wgmma_switch(
      p, [&](auto d, auto causal) { flash::launch_tiles<decltype(d)::value, decltype(causal)::value>(p, stream); });
}

}  // namespace pt::cuda
