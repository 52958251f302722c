#pragma once
// Tracking allocator: every byte of host-tensor and device memory, with peak, per-category
// breakdown, a tagged alloc/free timeline, and a size-keyed cache so steady-state training
// makes no cudaMalloc/cudaFree calls.
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device.h"

namespace pt {

// What memory holds, for the breakdown of the peak (issue: memory profile).
enum class MemCategory : uint8_t { Parameters, Gradients, OptimizerState, Activations, Workspace, Other, Count };
const char* mem_category_name(MemCategory c);
constexpr int kMemCategories = static_cast<int>(MemCategory::Count);

struct MemoryStats {
  int64_t in_use = 0;    // bytes handed out and not yet released (torch: memory_allocated)
  int64_t peak = 0;      // max of in_use since the last reset_peak
  int64_t reserved = 0;  // in_use plus cached blocks (torch: memory_reserved); = in_use on CPU
  std::array<int64_t, kMemCategories> in_use_by_category{};
  std::array<int64_t, kMemCategories> at_peak_by_category{};  // breakdown when peak was reached
  // Since the process started (reset_peak leaves them): device blocks the cache could not supply
  // (each a cudaMalloc), and times the whole cache went back to the driver because cudaMalloc
  // failed (each a cudaFree per cached block, which waits for the device). A steady-state step
  // adds to neither unless memory is near the device's capacity.
  int64_t device_mallocs = 0;
  int64_t cache_flushes = 0;
};

struct MemoryEvent {
  double time_s;   // seconds since the allocator was created
  int64_t in_use;  // bytes in use after this event
  int64_t delta;   // +size for alloc, -size for free
  MemCategory category;
  std::string tag;  // "<scope>/<name>", e.g. "layers.3.attn/scores"
};

class TrackingAllocator {
 public:
  static TrackingAllocator& instance();  // one per process: a rank drives one device

  // Throws OutOfMemory (with the requested size) when the device cannot supply the bytes
  // even after the cache has been emptied. Zero-byte requests return nullptr.
  void* allocate(size_t bytes, DeviceKind kind, const std::string& name, MemCategory category);
  void release(void* ptr);

  MemoryStats stats(DeviceKind kind) const;
  void reset_peak(DeviceKind kind);
  void empty_cache();  // give cached device blocks back to the driver

  void set_timeline_enabled(bool on);
  std::vector<MemoryEvent> timeline() const;  // a copy
  void clear_timeline();

  // Private pools for CUDA graphs: a graph's kernels read and write the same addresses at every
  // replay, so the device blocks it was captured with must never go to anything else. While a
  // PoolScope for pool P is active on a thread, its device allocations come from P's cache (or
  // the driver) and belong to P; a block of P released at any time returns to P's cache, never
  // to the shared one, and empty_cache() leaves pools alone. new_pool() returns a fresh id > 0.
  int new_pool();
  class PoolScope {
   public:
    explicit PoolScope(int pool);
    ~PoolScope();
    PoolScope(const PoolScope&) = delete;
    PoolScope& operator=(const PoolScope&) = delete;

   private:
    int previous_;
  };

  // Scope that names allocations and sets their default category (a thread-local stack).
  // Nested scopes join with '.', e.g. "layers.3" + "attn" → "layers.3.attn".
  class Scope {
   public:
    Scope(const std::string& name, MemCategory category);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };
  static std::string current_scope();
  static MemCategory current_category();

 private:
  TrackingAllocator();
  struct Block {
    size_t bytes;
    DeviceKind kind;
    MemCategory category;
    std::string tag;
    int pool = 0;  // 0: the shared cache
  };
  using Cache = std::unordered_map<size_t, std::vector<void*>>;  // rounded size → free blocks
  struct PerDevice {
    MemoryStats stats;
    Cache cache;
  };
  PerDevice& dev(DeviceKind k) { return per_device_[static_cast<int>(k)]; }
  const PerDevice& dev(DeviceKind k) const { return per_device_[static_cast<int>(k)]; }
  void record(DeviceKind kind, int64_t delta, MemCategory cat, const std::string& tag);
  void* raw_device_alloc(size_t bytes, const std::string& tag);

  mutable std::mutex mu_;
  std::unordered_map<void*, Block> live_;
  std::unordered_map<int, Cache> pools_;  // CUDA graph pools' free blocks
  int next_pool_ = 1;
  std::array<PerDevice, 2> per_device_;
  bool timeline_enabled_ = false;
  std::vector<MemoryEvent> timeline_;
  double t0_;
};

}  // namespace pt
