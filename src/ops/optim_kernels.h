#pragma once
// Optimizer arithmetic over flat fp32 ranges (gradients fp32 or bf16): AdamW, SGD, gradient norm
// and clipping.
#include "core/context.h"
#include "core/optim_params.h"
#include "core/tensor.h"

namespace pt::ops {

struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  int64_t step = 1;  // 1-based count of updates including this one (bias correction)
};

// The scalars of one step as the update kernels read them (core/optim_params.h).
AdamWStepScalars adamw_step_scalars(const AdamWHyper& h);

// Update scalars in device memory (GPU only): when set, the update kernels read the step's
// scalars from here (AdamWStepScalars or SgdStepScalars, bytes at least their size) and ignore
// the lr/step arguments — the same arithmetic, so the results are bit for bit the same.
struct DeviceScalars {
  const Tensor* scalars = nullptr;
};

// torch.optim.AdamW exactly: p ← p·(1 − lr·wd); m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²;
// p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps). p, g, m, v: 1-D, same length and
// dtype (fp32; fp64 on the CPU), except that g may be bf16 on the GPU (--grad-dtype bf16: read
// as its fp32 value, the same arithmetic). When p_lowp is defined (bf16, same length) it receives the
// updated parameters rounded to bf16 in the same pass (mixed precision's GEMM copy).
// `stream`: where the GPU runs it; null is the compute stream. On another stream the caller
// orders it with events (optim/deferred_update.h) and the kernel timer does not see it.
// `runs`: the kept FP8 weight runs within p (core/optim_params.h; GPU, with p_lowp): their
// elements get their amax measured instead of a bf16 copy.
void adamw_step(Context& ctx, Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWHyper& h,
                Tensor* p_lowp = nullptr, const GradClip& clip = {}, DeviceScalars device = {},
                cudaStream_t stream = nullptr, const Fp8WeightRuns& runs = {});

// Plain SGD with optional weight decay (torch.optim.SGD, no momentum): p ← p − lr·(g + wd·p).
void sgd_step(Context& ctx, Tensor& p, const Tensor& g, float lr, float weight_decay = 0.0f, Tensor* p_lowp = nullptr,
              const GradClip& clip = {}, DeviceScalars device = {}, cudaStream_t stream = nullptr,
              const Fp8WeightRuns& runs = {});

// sumsq (1-element fp32|fp64 tensor, same device) += Σ x² (x any float storage type). No
// host synchronisation; on the GPU the blocks' partial sums are added in a fixed order, so the
// result has the same bits in every run.
void squared_norm_accumulate(Context& ctx, Tensor& sumsq, const Tensor& x);
// The same on `stream` instead of the compute stream (GPU; the CPU ignores it): the caller
// orders it against the compute stream with events (optim/grad_norm_overlap) and owns the
// partial sums' scratch (squared_norm_scratch), which only that stream may use meanwhile.
void squared_norm_accumulate(Context& ctx, Tensor& sumsq, const Tensor& x, cudaStream_t stream, Tensor& scratch);
Tensor squared_norm_scratch(Context& ctx);  // undefined on the CPU
// x ← x · min(1, max_norm / (sqrt(sumsq) + 1e-6)), reading sumsq on the device; max_norm > 0.
void clip_by_norm(Context& ctx, Tensor& x, const Tensor& sumsq, float max_norm);

}  // namespace pt::ops
