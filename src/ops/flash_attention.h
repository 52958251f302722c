#pragma once
// FlashAttention-2 forward and backward (CUDA), and the tiled CPU implementation of the same
// two algorithms (the readable reference). Same layout rules as ops/attention.h.
#include <optional>
#include <string>

#include "core/context.h"
#include "core/tensor.h"
#include "cuda/flash/flash_params.h"
#include "ops/rope.h"

namespace pt::ops {

// q (B, H, Tq, D); k, v (B, H, Tk, D); out (B, H, Tq, D): views with stride(3) == 1 and any
// other strides (a fused QKV buffer is read in place). A 3-D (B, T, D) tensor is the H = 1 case.
// lse (B, H, Tq) fp32 contiguous (or (B, Tq) for 3-D inputs): logsumexp of the scaled scores per
// query, kept for backward.
// D ∈ cuda::kFlashHeadDims (16, 32, 64, 80, 128; 80 is the 2.7b model's, mma.sync and FFMA kernels only); bf16
// or fp32 on the GPU (fp32|fp64 on the CPU); q, k, v, out share one dtype. On the GPU, bf16
// rows must start on 16-byte boundaries (strides multiple of 8).
// Causal requires Tq == Tk; non-causal allows Tq != Tk. Scores are scaled by 1/sqrt(D); masked
// scores get -1e6 added (the convention of the PyTorch reference the course tests against).
void flash_attention_forward(Context& ctx, Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             bool causal);
// Whether the kernels cover head dimension d (an entry of cuda::kFlashHeadDims), and the list as
// text for messages ("16, 32, 64, 80 and 128"; wgmma_only: the wgmma kernels' entries).
bool flash_attention_supports_head_dim(int64_t d);
std::string flash_head_dims_text(bool wgmma_only = false);
// Gradients written (not accumulated), same layout rules as the inputs. On the GPU the
// backward takes a (B, H, Tq) fp32 workspace from the tracking allocator for rowsum(O ∘ dO).
// unrotate (optional; q and k were rotated by RoPE at positions 0..T-1): dq and dk come out
// rotated back, as rope(inverse) on them would leave them — the gradients with respect to the
// un-rotated q and k. The bf16 GPU kernels turn each pair as they store it (one rounding, no pass
// over dq and dk); the fp32 kernels and the CPU run rope() after. The table covers max(Tq, Tk)
// positions at head dimension D.
void flash_attention_backward(Context& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
                              const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, bool causal,
                              const RopeTable* unrotate = nullptr);

using ::pt::FlashChoice;
using ::pt::FlashKernels;
using ::pt::WgmmaTiles;

// Which bf16 GPU kernels run is the Context's FlashChoice (core/flash_choice.h), set once from
// `--flash-kernels` / `--wgmma-tiles`. The family for a call: an explicit request as asked
// (wgmma refused, with the GPU, its compute capability and the compiled architectures named,
// where the device runs no sm_90a image, or for a head dimension the wgmma kernels lack); Auto
// gives wgmma where the device runs an sm_90a image and the kernels cover the head dimension,
// mma.sync everywhere else (every GPU from sm_80). Never returns Auto.
FlashKernels choose_flash_kernels(FlashKernels requested, const CudaTarget& target, int64_t head_dim);
const char* flash_kernels_name(FlashKernels kernels);           // "auto", "mma.sync", "wgmma"
FlashKernels flash_kernels_from_name(const std::string& name);  // auto | mma | wgmma; throws otherwise
// Tile shapes of the wgmma kernels, written "F/K/Q": forward "<warpgroups>x<keys per step>"
// (1|2 x 64|128), then the warpgroups per block of the dK/dV pass and of the dQ pass (1|2), e.g.
// "2x64/2/2"; Q = "acc" drops the dQ pass: the dK/dV pass adds dS·K into an fp32 (B, H, Tq, D)
// workspace with bulk reductions (no longer bit-for-bit deterministic in dQ), e.g. "1x64/1/acc".
// A field prefixed "ws" selects that pass's warp-specialised TMA kernel (a producer warpgroup and
// that many math warpgroups of 64 rows): forward "ws2x128" or "ws3x128", backward passes "ws2",
// e.g. "ws2x128/ws2/ws2"; "ws2x128/ws2/acc" is the single pass in the warp-specialised dK/dV kernel,
// and "ws2x128/ws2/fxp" the same adding dQ in 32-bit fixed point: reproducible bit for bit.
// Unless the choice names tiles, each head dimension, sequence length (the longer of Tq, Tk) and
// batch × heads runs its default shape: the fastest measured on an H100 among the reproducible
// ones, or among all with choice.deterministic off (the single pass from 2048 keys).
WgmmaTiles flash_wgmma_tiles(const FlashChoice& choice, int64_t head_dim, int64_t seqlen, int64_t batch_heads);
std::string wgmma_tiles_name(const WgmmaTiles& tiles);
WgmmaTiles wgmma_tiles_from_name(const std::string& name);  // throws for shapes not compiled
// The kernels that run for these arguments: "wgmma <tiles>" or "mma.sync" (bf16 on the GPU),
// "simt" (fp32 on the GPU), "cpu".
std::string flash_kernel_used(const Context& ctx, DType dtype, int64_t head_dim, int64_t seqlen, int64_t batch_heads);

// The tiled CPU algorithms themselves (the functions above call these for CPU tensors with
// 32 × 32 tiles). Tile sizes are parameters so tests can exercise partial and uneven tiles.
// Arguments are the 4-D views described above, already checked.
namespace flash_cpu {
void forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, int block_q,
             int block_k);
void backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
              const Tensor& out, const Tensor& lse, bool causal, int block_q, int block_k);
}  // namespace flash_cpu

}  // namespace pt::ops
