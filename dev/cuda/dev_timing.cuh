// The dev programs' timer: the median of `iters` launches of f on the default stream, each between
// two events, after three untimed ones (first-launch costs and clocks settling left out).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "dev_check.h"

template <typename F>
float dev_median_ms(F&& f, int iters = 20) {
  cudaEvent_t a, b;
  DEV_CHECK_CUDA(cudaEventCreate(&a));
  DEV_CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    DEV_CHECK_CUDA(cudaEventRecord(a));
    f();
    DEV_CHECK_CUDA(cudaEventRecord(b));
    DEV_CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    DEV_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  DEV_CHECK_CUDA(cudaGetLastError());
  DEV_CHECK_CUDA(cudaEventDestroy(a));
  DEV_CHECK_CUDA(cudaEventDestroy(b));
  std::nth_element(t.begin(), t.begin() + iters / 2, t.end());
  return t[iters / 2];
}
