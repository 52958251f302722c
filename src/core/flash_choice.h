#pragma once
// Which flash-attention kernels run, held per Context (set once from the command line) — plain
// data, so the context can carry it; the kernels themselves live in cuda/, the choice logic in
// ops/flash_attention.cpp.
#include <cstdint>
#include <optional>
#include <string>

namespace pt {

// The bf16 kernel family: Hopper warpgroup MMA (wgmma: sm_90a images, head dims 64 and 128) or
// the mma.sync FlashAttention-2 kernels (every GPU from sm_80, every head dim). Auto: wgmma where
// the device runs an sm_90a image and the kernels cover the head dimension, else mma.sync.
enum class FlashKernels : uint8_t { Auto, MmaSync, Wgmma };

// Tile shapes of the wgmma kernels (compiled variants; see flash_fwd_wgmma.cu, flash_bwd_wgmma.cu):
// forward warpgroups per block (64 query rows each) × keys per step; warpgroups per block of the
// dK/dV pass (64 keys each) and of the dQ pass (64 queries each). dq_accumulate: no dQ pass; the
// dK/dV pass also adds each tile's dS·K into an fp32 dQ buffer (FlashAttention-2's single pass,
// with FlashAttention-3's bulk reductions; dq_warpgroups is then unused). dq_fixed_point (with
// dq_accumulate, in the warp-specialised dK/dV pass only): the buffer holds dQ as 32-bit fixed point
// and the pass adds by integer reductions, whose sum does not depend on their order, so dQ is the
// same bit for bit from run to run (cuda/flash/flash_dq_fixed.cuh). *_warp_specialized:
// that pass in FlashAttention-3's design (cuda/flash/flash_fwd_ws.cu, flash_bwd_ws.cu): a TMA producer
// warpgroup and that many math warpgroups (forward 2 or 3 with 128 keys per stage; backward 2).
struct WgmmaTiles {
  int fwd_warpgroups = 2, fwd_block_n = 64, dkdv_warpgroups = 2, dq_warpgroups = 2;
  bool dq_accumulate = false, dq_fixed_point = false;
  bool fwd_warp_specialized = false, dkdv_warp_specialized = false, dq_warp_specialized = false;
};

struct FlashChoice {
  FlashKernels kernels = FlashKernels::Auto;
  std::optional<WgmmaTiles> tiles;  // nullopt: each head dimension's default shape
  // The defaults pick only kernels whose results are the same bit for bit from run to run (--deterministic
  // on); off also lets them pick the single pass in fp32, which sums dQ in a varying order. Named tiles run
  // as named.
  bool deterministic = true;
};

// The GPU a context drives, as far as kernel choice goes.
struct CudaTarget {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int cc_major = 0, cc_minor = 0;
  bool sm90a_features = false;  // the image it runs has wgmma (core/cuda_arch.h)
  std::string compiled;         // the architectures compiled in
};
// The error for an explicit wgmma request on a target without sm_90a features: names the GPU,
// its compute capability and the architectures compiled in.
std::string wgmma_unavailable_message(const CudaTarget& t);

}  // namespace pt
