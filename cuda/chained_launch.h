#pragma once
// Host-side hook for the tests of chained launches (cuda/chained_launch.cuh): nothing in the
// library calls it.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace pt::cuda {

// Copies `bytes` from src to dst on stream s, but only after spinning for spin_ns; its blocks
// allow dependent grids before they spin. A chained kernel launched next that reads dst without
// waiting for prior grids reads it before the copy.
void delayed_copy_for_tests(cudaStream_t s, void* dst, const void* src, int64_t bytes, int64_t spin_ns);

}  // namespace pt::cuda
