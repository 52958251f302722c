#pragma once
// Row softmax over the last dimension with scale and optional causal mask (naive attention).
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// scores, probs: (..., Tq, Tk) contiguous (e.g. (R, Tq, Tk) or (B, H, Tq, Tk)); probs =
// softmax(scale · scores + mask) per row, where with causal the mask hides key j > query
// i + (Tk - Tq) (bottom-right aligned, as PyTorch's is_causal with Tq == Tk). A row with no
// visible key (Tq > Tk) comes out all zeros (PyTorch gives NaN). Computed in fp32 (fp64 for
// fp64); probs may alias scores. GPU: scores and probs each fp32 or bf16; CPU: one type.
// scale is a double so that the fp64 path is exact (1/sqrt(D) is not a float).
void softmax_forward(Context& ctx, Tensor& probs, const Tensor& scores, double scale, bool causal);
// dscores = scale · probs ⊙ (dprobs − rowsum(dprobs ⊙ probs)); dscores may alias dprobs.
// Same shapes; GPU: each fp32 or bf16 (typically dprobs fp32, probs bf16, dscores bf16).
void softmax_backward(Context& ctx, Tensor& dscores, const Tensor& dprobs, const Tensor& probs, double scale);

}  // namespace pt::ops
