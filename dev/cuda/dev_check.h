// The dev programs' error check (they build alone, without the project's core/error.h): a failed
// CUDA call prints where and what, and ends the program.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

inline void dev_check(bool ok, const char* call, const char* what, const char* file, int line) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, what);
  std::exit(1);
}

#define DEV_CHECK_CUDA(x)                                                         \
  do {                                                                            \
    const cudaError_t e_ = (x);                                                   \
    dev_check(e_ == cudaSuccess, #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)

// The properties of GPU `device`, or the program ends saying why.
inline cudaDeviceProp dev_properties(int device = 0) {
  cudaDeviceProp prop;
  DEV_CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  return prop;
}
