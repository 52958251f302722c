// The test hook of cuda/chained_launch.h: a copy that lets chained kernels launch before it has
// written anything.
#include "cuda/chained_launch.cuh"
#include "cuda/chained_launch.h"
#include "cuda/common.cuh"

namespace pt::cuda {
namespace {

// Every block allows dependents at once, then spins for `spin_ns` of global time before it
// copies its share: a chained kernel after it that read before wait_for_prior_grids() would see
// dst as it was.
__global__ void delayed_copy_kernel(unsigned char* dst, const unsigned char* src, int64_t bytes, int64_t spin_ns) {
  allow_dependent_grids();
  uint64_t t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (int64_t(t - t0) < spin_ns);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

void delayed_copy_for_tests(cudaStream_t s, void* dst, const void* src, int64_t bytes, int64_t spin_ns) {
  delayed_copy_kernel<<<2 * sm_count(), 256, 0, s>>>(static_cast<unsigned char*>(dst),
                                                     static_cast<const unsigned char*>(src), bytes, spin_ns);
  PT_CUDA_CHECK_LAUNCH();
}

}  // namespace pt::cuda
