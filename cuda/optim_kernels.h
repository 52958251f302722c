#pragma once
// CUDA launchers behind ops/optim_kernels.h (plain C++ header). One pass over a flat fp32
// range each; the norm and clip read and write device scalars only (no host sync).
#include <cuda_runtime_api.h>

#include "core/optim_params.h"
#include "core/tensor.h"

namespace pt::cuda {

// p, g, m, v fp32 1-D; p_lowp (optional) bf16; clip (optional) read on the device;
// device_scalars (optional): AdamWStepScalars / SgdStepScalars read on the device instead of
// sc / lr (CUDA graphs); runs: the kept FP8 weight runs in p (none: count 0), base p's flat index.
void adamw_step(cudaStream_t s, Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWStepScalars& sc,
                Tensor* p_lowp, const GradClip& clip, const void* device_scalars, const Fp8WeightRuns& runs);
void sgd_step(cudaStream_t s, Tensor& p, const Tensor& g, float lr, float weight_decay, Tensor* p_lowp,
              const GradClip& clip, const void* device_scalars, const Fp8WeightRuns& runs);
// x fp32|bf16; sumsq fp32|fp64 (one element). Block partial sums into partials (fp32, at least
// squared_norm_partials() elements, owned by the caller and used on s only), then one block
// adds them to sumsq in a fixed order: the same bits every run.
int64_t squared_norm_partials();
void squared_norm_accumulate(cudaStream_t s, Tensor& sumsq, const Tensor& x, Tensor& partials);
// x fp32|bf16; sumsq fp32|fp64 read on the device.
void clip_by_norm(cudaStream_t s, Tensor& x, const Tensor& sumsq, float max_norm);

}  // namespace pt::cuda
