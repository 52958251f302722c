// FlashAttention forward on Hopper in FlashAttention-3's design (issue 18): warp specialisation.
// Warpgroup 0 is the producer: after giving most of its registers away (setmaxnreg) one of its
// threads loads Q once and then each (K, V) tile into a ring of kStages stages with TMA,
// signalling each stage's `full` mbarrier and waiting on its `empty` one before refilling it.
// Warpgroups 1 … kConsumers are the math: 64 query rows each, S = Q·Kᵀ and O += P·V with wgmma
// straight from the swizzled tiles (flash_wgmma.cuh), and no copy, copy wait or block barrier in
// their loop. Inside each math warpgroup the softmax of tile j overlaps the products of tile j+1
// (FlashAttention-3's intra-warpgroup pipelining):
//
//   issue S = Q·K_j ᵀ, issue O += P_{j−1}·V_{j−1};  wait for S;  softmax(S) (O untouched);
//   wait for P·V;  release stage j−1;  O *= alpha;  P_j = bf16(S)
//
// so the tensor cores have P·V to run while the warps do exp2 and row reductions. At d = 128 the
// two math warpgroups also take turns to issue their products (ping-pong, below). The mask, the
// online-softmax arithmetic and the epilogue are the other kernels' (flash_softmax.cuh).
#include <string>

#include "core/error.h"
#include "cuda/flash/flash_params.h"
#include "cuda/flash/flash_softmax.cuh"
#include "cuda/flash/flash_tma.cuh"

namespace pt::cuda {
namespace flash {
namespace {

struct FwdWsMaps {
  TmaRows q, k, v;
  TmaRows o;  // boxes of 64 rows: one math warpgroup's rows of O (store_output_tma)
};

// The forward epilogue through TMA: L as every forward stores it (store_lse), and this math
// warpgroup's 64 × D rows of O (times 1/l, bf16) written into its own rows of the Q tile, which
// no product reads any more (its last S = Q·Kᵀ was waited for), then stored by one thread with
// TMA, which waits only until the copy has read them. With per-thread stores the block held its SM
// until they drained, which weighs on short rows (docs/reports/2026-11-27_fa3-peer-ws3-forward_h100.md).
// Rows past the last query are not written. Two math warpgroups only (FwdWsTraits::kStoreOutputByTma).
template <int kHeadDim, int kTileRows>
__device__ __forceinline__ void store_output_tma(const FlashParams& p, const TmaRows& o_map, bf16* sQ, int c, int m0,
                                                 int h, int b, int row0, const float (&acc_o)[kHeadDim / 8][4],
                                                 const float (&row_max)[2], const float (&row_sum)[2]) {
  float inv[2];
  store_lse(p, b, h, row0, row_max, row_sum, inv);
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int r_lo = c * 64 + ((threadIdx.x / 32) % 4) * 16 + g;  // this thread's rows of the Q tile: r_lo, r_lo + 8
  uint32_t* words = reinterpret_cast<uint32_t*>(sQ);
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j)  // columns 8j + 2t, + 1: the row's 16-byte chunk j
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int r = r_lo + 8 * hi;
      const int elem = sw128_chunk_index<kTileRows>(r, j) + 2 * t;
      words[elem / 2] = pack_bf16(acc_o[j][2 * hi] * inv[hi], acc_o[j][2 * hi + 1] * inv[hi]);
    }
  fence_async_proxy();
  if (c == 0)  // the warpgroup's 128 threads (ids 3, 4: 1 and 2 are the turns)
    named_barrier_sync<3, 128>();
  else
    named_barrier_sync<4, 128>();
  const int first = m0 + c * 64;
  if (threadIdx.x % 128 == 0 && first < p.seqlen_q) {
#pragma unroll
    for (int cb = 0; cb < kHeadDim / 64; ++cb)
      tma_store_box(sQ + cb * kTileRows * 64 + c * 64 * 64, o_map, cb * 64, first, h, b);
    tma_store_wait_read();
  }
}

template <int kHeadDim, int kConsumers_, int kBlockN_>
struct FwdWsTraits {
  static constexpr int kConsumers = kConsumers_;
  static constexpr int kBlockM = 64 * kConsumers;  // query rows per block
  static constexpr int kBlockN = kBlockN_;         // keys per stage
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kQBytes = sw128_tile_bytes<kBlockM, kHeadDim>();
  static constexpr int kKVBytes = sw128_tile_bytes<kBlockN, kHeadDim>();
  // Q, then `stages` stages of K and of V; 1 KiB slack to align the base to the swizzle period.
  static constexpr int smem_bytes(int stages) { return kQBytes + 2 * stages * kKVBytes + kSwizzleBlockBytes; }
  // Three stages where they fit beside Q (d = 64; d = 128 with 128 query rows: 225 KB), else two.
  // With two at d = 128 the math waited on each K/V tile's TMA load
  // (docs/reports/2026-11-25_flash-d128-n128-stages_h100.md).
  static constexpr int kStages = smem_bytes(3) <= kMaxBlockSmemBytes ? 3 : 2;
  static constexpr int kSmemBytes = smem_bytes(kStages);
  // Registers per thread after setmaxnreg: the producer keeps the minimum, the math warpgroups
  // share the rest of what the block was launched with (setmaxnreg_budget).
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160;
  // O by TMA (store_output_tma) with two math warpgroups; with three it was slower
  // (docs/reports/2026-11-27_fa3-peer-ws3-forward_h100.md).
  static constexpr bool kStoreOutputByTma = kConsumers == 2;
  static_assert((kProducerRegs + kConsumers * kConsumerRegs) * 128 <= setmaxnreg_budget(kThreads),
                "setmaxnreg asks for more registers than the block is launched with");
  static_assert(kSmemBytes <= kMaxBlockSmemBytes, "shared memory overcommitted");
};

template <int kHeadDim, int kConsumers, int kBlockN, bool kCausal>
__global__ void __launch_bounds__(FwdWsTraits<kHeadDim, kConsumers, kBlockN>::kThreads, 1)
    flash_fwd_ws_kernel(const __grid_constant__ FwdWsMaps maps, const FlashParams p) {
#if PT_FLASH_WGMMA_COMPILED
  using Tr = FwdWsTraits<kHeadDim, kConsumers, kBlockN>;
  constexpr int kBlockM = Tr::kBlockM, kStages = Tr::kStages, kKVElems = kBlockN * kHeadDim;
  unsigned char* smem = sw128_smem();
  bf16* sQ = reinterpret_cast<bf16*>(smem);                // (kBlockM, D) SW128
  bf16* sK = reinterpret_cast<bf16*>(smem + Tr::kQBytes);  // (kStages, kBlockN, D) SW128
  bf16* sV = sK + kStages * kKVElems;                      // (kStages, kBlockN, D) SW128
  __shared__ uint64_t q_full;
  __shared__ StageRing<kStages> ring;  // K and V tiles

  const int m0 = query_tile_head_by_head() * kBlockM, h = blockIdx.y, b = blockIdx.z;
  const int tk = p.seqlen_k;
  const KeyTiles<kBlockM, kBlockN, kCausal> tiles(m0, tk);
  const int n_blocks = tiles.n_blocks, n_full = tiles.n_full;
  const int wg = warpgroup_index();

  ring.init_block(&q_full, 1, 128 * kConsumers);

  if (wg == 0) {  // the producer
    setmaxnreg_dec<Tr::kProducerRegs>();
    if (threadIdx.x == 0) {
      mbar_arrive_expect_tx(&q_full, Tr::kQBytes);
      tma_load_tile<kBlockM, kHeadDim>(sQ, maps.q, &q_full, m0, h, b);
      produce_kv_tiles<kBlockN, kHeadDim>(ring, sK, sV, maps.k, maps.v, n_blocks, h, b);
    }
    return;
  }

  setmaxnreg_inc<Tr::kConsumerRegs>();
  const int c = wg - 1;  // this math warpgroup's rows: m0 + 64c …
  const int row0 = m0 + c * 64 + ((threadIdx.x / 32) % 4) * 16;
  const float scale_log2 = p.scale * kLog2e;
  const float mask_bias = kMaskedScoreBias / p.scale;

  float acc_o[kHeadDim / 8][4];  // (64, D): this thread's fragment
  zero(acc_o);
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}, alpha[2];
  bool raised = true;                // this tile raised the running max: O is rescaled by alpha
  float acc_s[kBlockN / 8][4];       // (64, kBlockN) scores, then P in place
  uint32_t p_frag[kBlockN / 16][4];  // P in bf16: the register A operand of P·V

  auto scores = [&](int j) {
    if (j < n_full)
      raised = softmax_scores<kBlockN, kCausal, false>(acc_s, row_max, row_sum, alpha, row0, j * kBlockN, tk,
                                                       scale_log2, mask_bias);
    else
      raised = softmax_scores<kBlockN, kCausal, true>(acc_s, row_max, row_sum, alpha, row0, j * kBlockN, tk, scale_log2,
                                                      mask_bias);
  };

  // Ping-pong (two math warpgroups, FlashAttention-3): each issues its products only in its turn
  // and hands the turn over at once, so one warpgroup's softmax runs beside the other's products.
  // Named barriers 1 and 2 are the turns of warpgroups 0 and 1; each completes when its owner
  // waits (128 threads) and the other has handed over (128). Both run n_blocks turns. d = 128 only:
  // at d = 64 the products are too short to hide a softmax
  // (docs/reports/2026-11-25_flash-warp-specialised_h100.md).
  constexpr bool kPingPong = kConsumers == 2 && kHeadDim == 128;
  auto my_turn = [&] {
    if constexpr (kPingPong) {
      if (c == 0)
        named_barrier_sync<1, 256>();
      else
        named_barrier_sync<2, 256>();
    }
  };
  auto hand_over = [&](int j) {
    if constexpr (kPingPong) {
      if (c == 0)
        named_barrier_arrive<2, 256>();
      else if (j + 1 < n_blocks)  // warpgroup 0 waits for no turn after its last
        named_barrier_arrive<1, 256>();
    }
  };
  if (kPingPong && c == 1) named_barrier_arrive<1, 256>();  // warpgroup 0 goes first

  mbar_wait(&q_full, 0);
  ring.wait(0);
  zero(acc_s);
  pin(acc_s);
  my_turn();
  wgmma_fence();
  wgmma_k_major<kHeadDim, kBlockN, kBlockM, kBlockN>(acc_s, sQ, c * 64, sK, 0);
  wgmma_commit();
  hand_over(0);
  wgmma_wait<0>();
  pin(acc_s);
  scores(0);  // O is still zero: alpha unused
  acc_to_a<kBlockN>(p_frag, acc_s);

  for (int j = 1; j < n_blocks; ++j) {
    const int s = ring.stage(j), prev = ring.stage(j - 1);
    ring.wait(j);
    zero(acc_s);
    pin(acc_s);
    pin(p_frag);
    pin(acc_o);
    my_turn();
    wgmma_fence();
    wgmma_k_major<kHeadDim, kBlockN, kBlockM, kBlockN>(acc_s, sQ, c * 64, sK + s * kKVElems, 0);
    wgmma_commit();
    wgmma_regs_mn_major<kBlockN, kHeadDim, kBlockN, kRegsProductN<kHeadDim>>(acc_o, p_frag, sV + prev * kKVElems);
    wgmma_commit();
    hand_over(j);
    wgmma_wait<1>();  // S done; P·V may still run
    pin(acc_s);
    scores(j);
    retire_product(ring, j - 1, acc_o, p_frag);
    if (raised) rescale_rows<kHeadDim>(acc_o, alpha);
    acc_to_a<kBlockN>(p_frag, acc_s);
  }

  const int last = ring.stage(n_blocks - 1);
  wgmma_regs_mn_major_waited<kBlockN, kHeadDim, kBlockN, kRegsProductN<kHeadDim>>(acc_o, p_frag, sV + last * kKVElems);

  if constexpr (Tr::kStoreOutputByTma)
    store_output_tma<kHeadDim, kBlockM>(p, maps.o, sQ, c, m0, h, b, row0, acc_o, row_max, row_sum);
  else
    store_output<kHeadDim>(p, b, h, row0, acc_o, row_max, row_sum);
#else
  __trap();
#endif
}

template <int kHeadDim, int kConsumers, int kBlockN, bool kCausal>
void launch(const FlashParams& p, cudaStream_t stream) {
  using Tr = FwdWsTraits<kHeadDim, kConsumers, kBlockN>;
  FwdWsMaps maps;
  maps.q = flash_tma_rows(p.q, p.q_s, p.batch, p.heads, p.seqlen_q, kHeadDim, Tr::kBlockM);
  maps.k = flash_tma_rows(p.k, p.k_s, p.batch, p.heads, p.seqlen_k, kHeadDim, kBlockN);
  maps.v = flash_tma_rows(p.v, p.v_s, p.batch, p.heads, p.seqlen_k, kHeadDim, kBlockN);
  if constexpr (Tr::kStoreOutputByTma) maps.o = flash_tma_rows(p.o, p.o_s, p.batch, p.heads, p.seqlen_q, kHeadDim, 64);
  // Launched plainly, the one flash kernel not chained (cuda/chained_launch.cuh): the chained
  // prologue shifts its code by 32 bytes, the one shift that makes the d 64 forward slower
  // (docs/reports/2026-11-26_flash-forward-code-offset_h100.md); a change before the loop needs
  // the forward timed (ab-flash).
  launch_flash_kernel</*kChained=*/false>(flash_fwd_ws_kernel<kHeadDim, kConsumers, kBlockN, kCausal>,
                                          flash_grid(p, p.seqlen_q, Tr::kBlockM), Tr::kThreads, Tr::kSmemBytes, stream,
                                          maps, p);
}

}  // namespace
}  // namespace flash

// The compiled shapes: 2 or 3 math warpgroups × 128 keys per stage (WgmmaTiles::fwd_warp_specialized).
void flash_fwd_wgmma_ws(const FlashParams& p, cudaStream_t stream) {
  const int wg = p.tiles.fwd_warpgroups, bn = p.tiles.fwd_block_n;
  PT_CHECK(bn == 128 && (wg == 2 || wg == 3), "flash attention: no warp-specialised forward with " +
                                                  std::to_string(wg) + " warpgroups × " + std::to_string(bn) +
                                                  " keys (2 or 3 × 128)");
  flash_wgmma_switch(p, [&](auto d, auto causal) {
    constexpr int kD = decltype(d)::value;
    constexpr bool kCausal = decltype(causal)::value;
    if (wg == 2)
      flash::launch<kD, 2, 128, kCausal>(p, stream);
    else
      flash::launch<kD, 3, 128, kCausal>(p, stream);
  });
}

}  // namespace pt::cuda
