#include "core/allocator.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdlib>

#include "core/error.h"

namespace pt {

namespace {
double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
// Device blocks are cached by size rounded up to 512 B: steady-state steps ask for the
// same sizes again, so exact-size reuse hits every time.
size_t round_device_bytes(size_t b) { return (b + 511) / 512 * 512; }

struct ScopeFrame {
  std::string name;
  MemCategory category;
};
thread_local std::vector<ScopeFrame> tl_scopes;
thread_local int tl_pool = 0;  // the active PoolScope's pool (0: the shared cache)
}  // namespace

const char* mem_category_name(MemCategory c) {
  static const char* names[] = {"parameters", "gradients", "optimizer_state", "activations", "workspace", "other"};
  return names[static_cast<int>(c)];
}

TrackingAllocator& TrackingAllocator::instance() {
  static TrackingAllocator a;
  return a;
}

TrackingAllocator::TrackingAllocator() : t0_(now_s()) {}

int TrackingAllocator::new_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  const int id = next_pool_++;
  pools_[id];
  return id;
}

TrackingAllocator::PoolScope::PoolScope(int pool) : previous_(tl_pool) { tl_pool = pool; }
TrackingAllocator::PoolScope::~PoolScope() { tl_pool = previous_; }

TrackingAllocator::Scope::Scope(const std::string& name, MemCategory category) {
  std::string full = tl_scopes.empty() || tl_scopes.back().name.empty()
                         ? name
                         : (name.empty() ? tl_scopes.back().name : tl_scopes.back().name + "." + name);
  tl_scopes.push_back({std::move(full), category});
}
TrackingAllocator::Scope::~Scope() { tl_scopes.pop_back(); }

std::string TrackingAllocator::current_scope() { return tl_scopes.empty() ? std::string() : tl_scopes.back().name; }
MemCategory TrackingAllocator::current_category() {
  return tl_scopes.empty() ? MemCategory::Other : tl_scopes.back().category;
}

void TrackingAllocator::record(DeviceKind kind, int64_t delta, MemCategory cat, const std::string& tag) {
  MemoryStats& s = dev(kind).stats;
  s.in_use += delta;
  s.in_use_by_category[static_cast<int>(cat)] += delta;
  if (kind == DeviceKind::CPU) s.reserved = s.in_use;
  if (s.in_use > s.peak) {
    s.peak = s.in_use;
    s.at_peak_by_category = s.in_use_by_category;
  }
  if (timeline_enabled_) timeline_.push_back({now_s() - t0_, s.in_use, delta, cat, tag});
}

void* TrackingAllocator::raw_device_alloc(size_t bytes, const std::string& tag) {
  void* p = nullptr;
  MemoryStats& stats = dev(DeviceKind::CUDA).stats;
  ++stats.device_mallocs;
  cudaError_t rc = cudaMalloc(&p, bytes);
  if (rc == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    ++stats.cache_flushes;
    // Give the cache back and try once more before calling it out-of-memory.
    auto& cache = dev(DeviceKind::CUDA).cache;
    for (auto& [size, blocks] : cache)
      for (void* b : blocks) {
        PT_CUDA_CHECK(cudaFree(b));
        stats.reserved -= static_cast<int64_t>(size);
      }
    cache.clear();
    rc = cudaMalloc(&p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw OutOfMemory("CUDA out of memory: " + std::to_string(bytes) + " bytes requested for '" + tag + "', " +
                            std::to_string(stats.in_use) + " bytes in use",
                        bytes);
    }
  }
  PT_CUDA_CHECK(rc);
  return p;
}

void* TrackingAllocator::allocate(size_t bytes, DeviceKind kind, const std::string& name, MemCategory category) {
  if (bytes == 0) return nullptr;
  std::string scope = current_scope();
  std::string tag = scope.empty() ? name : (name.empty() ? scope : scope + "/" + name);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  size_t held = bytes;
  if (kind == DeviceKind::CPU) {
    held = (bytes + 63) / 64 * 64;
    p = std::aligned_alloc(64, held);
    if (!p) throw OutOfMemory("host out of memory: " + std::to_string(bytes) + " bytes for '" + tag + "'", bytes);
  } else {
    held = round_device_bytes(bytes);
    auto& cache = tl_pool ? pools_.at(tl_pool) : dev(kind).cache;
    auto it = cache.find(held);
    if (it != cache.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      p = raw_device_alloc(held, tag);
      dev(kind).stats.reserved += static_cast<int64_t>(held);
    }
  }
  live_.emplace(p, Block{held, kind, category, tag, kind == DeviceKind::CUDA ? tl_pool : 0});
  record(kind, static_cast<int64_t>(held), category, tag);
  return p;
}

void TrackingAllocator::release(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours: never happens for Tensor storage
  Block b = std::move(it->second);
  live_.erase(it);
  record(b.kind, -static_cast<int64_t>(b.bytes), b.category, b.tag);
  if (b.kind == DeviceKind::CPU)
    std::free(ptr);
  else  // stream-ordered reuse on the compute stream; a graph's block only by its graph
    (b.pool ? pools_.at(b.pool) : dev(b.kind).cache)[b.bytes].push_back(ptr);
}

MemoryStats TrackingAllocator::stats(DeviceKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  return dev(kind).stats;
}

void TrackingAllocator::reset_peak(DeviceKind kind) {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryStats& s = dev(kind).stats;
  s.peak = s.in_use;
  s.at_peak_by_category = s.in_use_by_category;
}

void TrackingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  auto& d = dev(DeviceKind::CUDA);
  for (auto& [size, blocks] : d.cache)
    for (void* b : blocks) {
      cudaFree(b);
      d.stats.reserved -= static_cast<int64_t>(size);
    }
  d.cache.clear();
}

void TrackingAllocator::set_timeline_enabled(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  timeline_enabled_ = on;
}
std::vector<MemoryEvent> TrackingAllocator::timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeline_;
}
void TrackingAllocator::clear_timeline() {
  std::lock_guard<std::mutex> lock(mu_);
  timeline_.clear();
}

}  // namespace pt
