#pragma once
// FlashAttention-2 forward and backward (CUDA), and the tiled CPU implementation of the same
// two algorithms (the readable reference). Same layout rules as ops/attention.h.
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// q (B, H, Tq, D); k, v (B, H, Tk, D); out (B, H, Tq, D): views with stride(3) == 1 and any
// other strides (a fused QKV buffer is read in place). A 3-D (B, T, D) tensor is the H = 1 case.
// lse (B, H, Tq) fp32 contiguous (or (B, Tq) for 3-D inputs): logsumexp of the scaled scores per
// query, kept for backward.
// D ∈ {16, 32, 64, 128}; bf16 or fp32 on the GPU (fp32|fp64 on the CPU); q, k, v, out share one
// dtype. On the GPU, bf16 rows must start on 16-byte boundaries (strides multiple of 8).
// Causal requires Tq == Tk; non-causal allows Tq != Tk. Scores are scaled by 1/sqrt(D); masked
// scores get -1e6 added (the convention of the PyTorch reference the course tests against).
void flash_attention_forward(Context& ctx, Tensor& out, Tensor& lse, const Tensor& q,
                             const Tensor& k, const Tensor& v, bool causal);
// Gradients written (not accumulated), same layout rules as the inputs. On the GPU the
// backward takes a (B, H, Tq) fp32 workspace from the tracking allocator for rowsum(O ∘ dO).
void flash_attention_backward(Context& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, bool causal);

// The tiled CPU algorithms themselves (the functions above call these for CPU tensors with
// 32 × 32 tiles). Tile sizes are parameters so tests can exercise partial and uneven tiles.
// Arguments are the 4-D views described above, already checked.
namespace flash_cpu {
void forward(Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
             bool causal, int block_q, int block_k);
void backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout, const Tensor& q,
              const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, bool causal,
              int block_q, int block_k);
}  // namespace flash_cpu

}  // namespace pt::ops
