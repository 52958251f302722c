#pragma once
// Chained launches: programmatic dependent launch (Hopper and later) for the short memory-bound
// kernels between the step's GEMMs. A kernel launched by launch_chained may be scheduled before
// the kernel ahead of it on the stream has finished; its blocks then wait at
// wait_for_prior_grids(), which returns once that kernel has completed and its writes are
// visible. So the launch, the block scheduling and the kernel's index arithmetic overlap the
// previous kernel's tail instead of following it, where a kernel trace of the XL step found the
// GPU idle (docs/reports/2026-11-26_kernel-trace-chained-launch_h100.md).
//
// The rule for every kernel launched this way: wait_for_prior_grids() before its first read or
// write of global memory (a write can race a previous kernel still reading), and
// allow_dependent_grids() as soon as the block no longer needs its SM to itself (early: the
// next chained kernel's blocks only take SM space left free, and wait for this grid to complete).
// Without the launch attribute both calls return at once, so a chained kernel may also be
// launched plainly: on devices before Hopper, while a CUDA graph is being captured, and with
// PT_CHAINED_LAUNCH=off in the environment (an A/B switch, and a way to rule the feature out when
// debugging). Under capture launches stay plain: a graph's launches are close together already,
// and chained ones made it slower (same report).
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/env.h"
#include "core/error.h"
#include "cuda/common.cuh"

namespace pt::cuda {

__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// The two at a kernel's top, what the memory-bound kernels do: they hold no SM to themselves.
__device__ __forceinline__ void begin_chained_kernel() {
  wait_for_prior_grids();
  allow_dependent_grids();
}

// Whether the current device takes chained launches: compute capability 9.0 or later, and not
// switched off by PT_CHAINED_LAUNCH=off.
inline bool chained_launch_available() {
  static const bool env_off = !env::choice("PT_CHAINED_LAUNCH", "on", "off").value_or(true);
  return !env_off && device_attribute<cudaDevAttrComputeCapabilityMajor>() >= 9;
}

// kernel<<<grid, block, smem, stream>>>(args...), chained when `chained` and the device allows it
// and the stream is not being captured (above); plain otherwise.
template <typename... Params, typename... Args>
void launch_kernel(bool chained, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  if (chained && chained_launch_available()) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    PT_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    cfg.numAttrs = capture == cudaStreamCaptureStatusNone ? 1 : 0;
  }
  PT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}
// The kernel begins with begin_chained_kernel() (or wait_for_prior_grids()).
template <typename... Params, typename... Args>
void launch_chained(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                    Args&&... args) {
  launch_kernel(true, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

}  // namespace pt::cuda
