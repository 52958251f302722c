#pragma once
// The parameters the optimizer update kernels take, shared by ops/optim_kernels.h (which checks
// and forms them), its CPU loops and the CUDA launchers (cuda/optim_kernels.h): plain data over
// core types, so the kernels depend on nothing above core.
#include "core/tensor.h"

namespace pt {

// One AdamW step's scalars as the kernels use them, formed on the host in double as torch
// forms them. A CUDA graph's update reads them from device memory (written before each replay:
// Optimizer::stage_step) instead of keeping the captured step's values.
struct AdamWStepScalars {
  float decay;      // 1 − lr·wd
  float step_size;  // lr / (1 − β1^t)
  float bc2_sqrt;   // sqrt(1 − β2^t)
  float one_minus_beta1, beta2, one_minus_beta2, eps;
};
// SGD's: the learning rate (weight decay is fixed).
struct SgdStepScalars {
  float lr;
};

// Global-norm clipping folded into an update: when sumsq is set, every gradient is read as
// g · min(1, max_norm / (sqrt(sumsq) + 1e-6)), the value clip_by_norm would have stored, and
// the gradient buffer is left as it is (one pass over it fewer than clip_by_norm + update).
// max_norm = +inf folds no clip (the coefficient is 1) but keeps the guard: when sumsq is set
// and not finite the update changes nothing (no parameter, moment or bf16 copy is written),
// so a non-finite gradient never reaches the parameters; the caller, which reads the norm
// after the step, reports it.
struct GradClip {
  const Tensor* sumsq = nullptr;  // 1-element fp32|fp64 on the device of the update
  float max_norm = 0;             // > 0 (+inf: guard only) when sumsq is set
};
inline constexpr float kNoClip = __builtin_huge_valf();  // GradClip::max_norm: guard, no clip

// The kept FP8 weight runs an update meets (ParamStore::fp8_update_runs; GPU only). Their
// elements get no bf16 copy (the mirror's bytes hold their E4M3 casts), and the update folds
// the largest |value| of each run's updated elements, rounded to bf16, into the run's amax slot
// (zeroed before the run's first range): the casts after the run's last range then need no
// amax pass of their own. A guarded update that changes nothing (GradClip) still measures.
struct Fp8WeightRuns {
  const int64_t* bounds = nullptr;  // device: (begin, end) flat parameter indices per run, ascending
  float* amax = nullptr;            // device: run j's amax at amax[j · amax_stride]
  int count = 0;                    // 0: no runs (the update writes every bf16 copy)
  int amax_stride = 0;
  int zero_from = 0;     // runs [zero_from, count) begin in the range: the update zeroes their amax first
  int64_t base = 0;      // the flat index of the updated range's element 0
  int64_t elements = 0;  // of the range's elements, those inside the runs (the op's cost)
};

}  // namespace pt
