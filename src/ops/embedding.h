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
// dweight (V, C) += scatter of dout (N, C) rows by ids. GPU: dweight fp32 (atomic adds, so
// the summation order of repeated ids varies) or bf16 (each id's rows summed in fp32, then
// rounded into dweight once), dout fp32|bf16; CPU: one type.
void embedding_backward(Context& ctx, Tensor& dweight, const Tensor& dout, const Tensor& ids);

}  // namespace pt::ops
