#pragma once
// Token embedding lookup and its gradient (scatter-add).
#include "core/context.h"
#include "core/tensor.h"

namespace pt::ops {

// ids (N) int32, each in [0, V) (checked on the CPU; on the GPU an id out of range is a
// caller bug: the data reader validates tokens). weight (V, C); out (N, C), same float dtype.
void embedding_forward(Context& ctx, Tensor& out, const Tensor& ids, const Tensor& weight);
// dweight (V, C) += scatter of dout (N, C) rows by ids. fp32 accumulation.
void embedding_backward(Context& ctx, Tensor& dweight, const Tensor& dout, const Tensor& ids);

}  // namespace pt::ops
