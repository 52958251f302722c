// The tracking allocator's device counters (MemoryStats::device_mallocs, cache_flushes), which
// `bench model` reports for its measured steps: a block the cache holds costs no cudaMalloc, a
// new size does, and a request the device cannot supply gives the whole cache back once (a
// flush) before it throws OutOfMemory.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "common/test_util.h"
#include "core/allocator.h"
#include "core/error.h"

namespace pt {
namespace {

TEST(AllocatorGpu, CountsDeviceMallocsAndCacheFlushes) {
  PT_REQUIRE_GPU();
  auto& alloc = TrackingAllocator::instance();
  alloc.empty_cache();
  const MemoryStats s0 = alloc.stats(DeviceKind::CUDA);

  void* a = alloc.allocate(1 << 20, DeviceKind::CUDA, "a", MemCategory::Other);
  alloc.release(a);
  void* b = alloc.allocate(1 << 20, DeviceKind::CUDA, "b", MemCategory::Other);  // from the cache
  EXPECT_EQ(a, b);
  const MemoryStats s1 = alloc.stats(DeviceKind::CUDA);
  EXPECT_EQ(s1.device_mallocs - s0.device_mallocs, 1);
  EXPECT_EQ(s1.cache_flushes - s0.cache_flushes, 0);

  void* c = alloc.allocate(3 << 20, DeviceKind::CUDA, "c", MemCategory::Other);  // a size not cached
  alloc.release(c);
  const MemoryStats s2 = alloc.stats(DeviceKind::CUDA);
  EXPECT_EQ(s2.device_mallocs - s1.device_mallocs, 1);

  // More than the device has: cudaMalloc fails at once (nothing is touched), the cache (c's block)
  // goes back to the driver, and the second try fails too.
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  EXPECT_THROW(alloc.allocate(2 * total_b, DeviceKind::CUDA, "too_big", MemCategory::Other), OutOfMemory);
  const MemoryStats s3 = alloc.stats(DeviceKind::CUDA);
  EXPECT_EQ(s3.device_mallocs - s2.device_mallocs, 1);
  EXPECT_EQ(s3.cache_flushes - s2.cache_flushes, 1);
  EXPECT_LE(s3.reserved, s2.reserved - (3 << 20));  // c's cached block went back
  alloc.release(b);
}

}  // namespace
}  // namespace pt
