#pragma once
// CUDA launchers behind ops/elementwise.h (plain C++ header). Arguments arrive validated:
// contiguous, fp32 or bf16 storage (each tensor independently unless the op says otherwise).
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

void cast(cudaStream_t s, Tensor& dst, const Tensor& src, float scale);
void add(cudaStream_t s, Tensor& out, const Tensor& a, const Tensor& b);
void add_inplace(cudaStream_t s, Tensor& x, const Tensor& y, float alpha);
void scale_inplace(cudaStream_t s, Tensor& x, float alpha);
void add_bias(cudaStream_t s, Tensor& y, const Tensor& bias);         // y (N, C), bias (C)
void bias_backward(cudaStream_t s, Tensor& dbias, const Tensor& dy);  // dbias (C) fp32
void relu_forward(cudaStream_t s, Tensor& y, const Tensor& x);
void relu_backward(cudaStream_t s, Tensor& dx, const Tensor& dy, const Tensor& y);
// h1, h3 share a dtype; dh1, dh3, dg share a dtype. An amax pointer (device fp32, optional) is
// zeroed on s, then receives max |x| of the output(s) as stored (NaN skipped): g_amax one float,
// dh_amax two (dh1, dh3).
void swiglu_forward(cudaStream_t s, Tensor& g, const Tensor& h1, const Tensor& h3, float* g_amax = nullptr);
// g (optional, h1's type): the forward product written in the same pass.
void swiglu_backward(cudaStream_t s, Tensor& dh1, Tensor& dh3, const Tensor& dg, const Tensor& h1, const Tensor& h3,
                     Tensor* g = nullptr, float* dh_amax = nullptr);

}  // namespace pt::cuda
