#pragma once
// Losses: fused softmax cross-entropy over the vocabulary; mean squared error (toy models).
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// logits (N, V) fp32|fp64|bf16; targets (N) int32 in [0, V). loss: a 1-element tensor (fp32;
// fp64 for fp64 logits) on the same device receiving mean_i(−log softmax(logits_i)[t_i]).
// When dlogits is defined (N, V, logits' dtype; may alias logits) it receives the gradient
// of that mean times grad_scale: (softmax(logits_i) − onehot(t_i)) / N · grad_scale (1/M for one
// of M accumulated micro-batches: the gradient of the mean over all M·N rows). Everything is
// computed in fp32 or better; the loss stays on the device (no host synchronisation). Targets
// are checked on the CPU; on the GPU an out-of-range target makes the loss NaN. The GPU sums the
// rows' losses in a fixed order: the same inputs give the same loss bit for bit.
void cross_entropy(Context& ctx, Tensor& loss, Tensor* dlogits, const Tensor& logits, const Tensor& targets,
                   float grad_scale = 1.0f);

// MSE with mean (reduction="mean") or sum over all elements; loss: 1-element tensor (as for
// cross_entropy); dpred (optional, pred's dtype) = d loss / d pred.
enum class Reduction { Mean, Sum };
void mse_loss(Context& ctx, Tensor& loss, Tensor* dpred, const Tensor& pred, const Tensor& target, Reduction reduction);

}  // namespace pt::ops
