#pragma once
// Row softmax over the last dimension with scale and optional causal mask (naive attention).
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// scores, probs: (R, Tq, Tk) contiguous; probs = softmax(scale · scores + mask) per row, where
// with causal the mask hides key j > query i + (Tk - Tq) (bottom-right aligned, as PyTorch's
// is_causal with Tq == Tk). Computed in fp32 (fp64 for fp64); probs may alias scores and may
// be bf16 when scores are (mixed precision).
void softmax_forward(Context& ctx, Tensor& probs, const Tensor& scores, double scale, bool causal);
// dscores = scale · probs ⊙ (dprobs − rowsum(dprobs ⊙ probs)); dscores may alias dprobs.
void softmax_backward(Context& ctx, Tensor& dscores, const Tensor& dprobs, const Tensor& probs,
                      double scale);

}  // namespace pt::ops
