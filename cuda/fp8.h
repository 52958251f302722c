#pragma once
// Current-scaling FP8 kernels behind the FP8 GEMMs (plain C++ header): the amax of a tensor,
// and its cast to E4M3 or E5M2 with the scale computed on the device from that amax, so a
// tensor goes amax → cast → GEMM on one stream without the host reading anything.
#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace pt::cuda {

// amax (device, 1 float) = max |x| over every element of x (fp32|bf16, contiguous). NaN
// elements are skipped (fmaxf); ±inf gives inf. Exact and deterministic: the maximum does not
// depend on the order, and the blocks combine by an integer atomicMax on the float's bits
// (non-negative floats order as their bit patterns). amax is zeroed first on s.
void fp8_amax(cudaStream_t s, float* amax, const Tensor& x);

// out (x's shape, F8E4M3|F8E5M2) = fp8(x · scale) with scale = fp8_max / *amax (1 for amax 0),
// both read on the device; x·scale is rounded once in fp32, then to fp8 (satfinite: ±max for
// what lands beyond it). scale_inv (device, 1 float; may be null) = 1 / scale, the factor the
// GEMM multiplies back. x fp32|bf16, contiguous.
void fp8_cast(cudaStream_t s, Tensor& out, float* scale_inv, const Tensor& x, const float* amax);
// The same cast of x (rows, cols) written transposed, out (cols, rows): Hopper's FP8 GEMMs take
// both operands K-major, so a weight gradient's operands (K = tokens) and the input gradient's
// weight are cast this way. Through 64×64 tiles in shared memory: both global sides coalesced.
// plain (may be null; x's shape, out's type): the same values as x is laid out, from the same
// read of x (fp8_cast's result).
void fp8_cast_transpose(cudaStream_t s, Tensor& out, Tensor* plain, float* scale_inv, const Tensor& x,
                        const float* amax);

// A weight's E4M3 casts from its fp32 master values w (rows, cols), each value rounded to bf16
// first — the values the bf16 mirror holds, so the casts are bit for bit those of fp8_amax and
// fp8_cast_transpose on the mirror: *amax = max |bf16(w)|, then `transposed` (cols, rows) and
// `stored` (rows, cols) from one read of w, *scale_inv = 1 / scale. amax_measured: *amax holds
// that max already (the update measured it: Fp8WeightRuns), and no amax pass runs.
void fp8_cast_weight(cudaStream_t s, Tensor& stored, Tensor& transposed, float* scale_inv, float* amax, const Tensor& w,
                     bool amax_measured);

}  // namespace pt::cuda
