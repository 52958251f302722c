#pragma once
// Token embedding lookup and its gradient (scatter-add).
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// ids (N) int32, each in [0, V) (checked on the CPU; on the GPU an id out of range is a
// caller bug the op cannot see without a host sync: the data reader validates tokens, and the
// kernel writes a NaN row for it rather than reading out of bounds). weight (V, C); out (N, C),
// same float dtype.
void embedding_forward(Context& ctx, Tensor& out, const Tensor& ids, const Tensor& weight);
// dweight (V, C) += scatter of dout (N, C) rows by ids, bit for bit the same on every run. GPU:
// dweight fp32|bf16, dout fp32|bf16; each id's rows are summed in fp32 in ascending row order
// and added to dweight once (a bf16 dweight rounds once). CPU: one type, rows added in order.
void embedding_backward(Context& ctx, Tensor& dweight, const Tensor& dout, const Tensor& ids);

}  // namespace pt::ops
