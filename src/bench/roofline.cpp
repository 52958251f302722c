#include "bench/roofline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "core/allocator.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/timing.h"

namespace pt::bench {

namespace {

constexpr int kCopyRepetitions = 5;

// The fastest of kCopyRepetitions copies of `bytes` after one untimed copy, as bytes read +
// written per second.
double measure_gpu(Context& ctx) {
  for (int64_t bytes = int64_t(1) << 30; bytes >= (int64_t(64) << 20); bytes /= 2) {
    try {
      TrackingAllocator::Scope scope("roofline_copy", MemCategory::Workspace);
      Tensor src = Tensor::empty({bytes / 4}, DType::U32, ctx.device(), "copy_src");
      Tensor dst = Tensor::empty({bytes / 4}, DType::U32, ctx.device(), "copy_dst");
      PT_CUDA_CHECK(cudaMemsetAsync(src.data(), 1, static_cast<size_t>(bytes), ctx.stream()));
      StreamClock clock(ctx);
      auto copy = [&] {
        PT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                      ctx.stream()));
      };
      clock.time_ms(copy);
      double best = std::numeric_limits<double>::infinity();
      for (int i = 0; i < kCopyRepetitions; ++i) best = std::min(best, clock.time_ms(copy));
      return best > 0 ? 2.0 * static_cast<double>(bytes) / (best * 1e-3) : 0.0;
    } catch (const OutOfMemory&) {
      ctx.synchronize();
    }
  }
  return 0.0;
}

double measure_cpu() {
  const size_t bytes = size_t(256) << 20;
  TrackingAllocator::Scope scope("roofline_copy", MemCategory::Workspace);
  Tensor src = Tensor::empty({static_cast<int64_t>(bytes / 4)}, DType::U32, Device::cpu(), "copy_src");
  Tensor dst = Tensor::empty({static_cast<int64_t>(bytes / 4)}, DType::U32, Device::cpu(), "copy_dst");
  std::memset(src.data(), 1, bytes);  // real pages: untouched memory would read as the zero page
  std::memcpy(dst.data(), src.data(), bytes);
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kCopyRepetitions; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Keep the copy observable so it is not optimised away.
    if (static_cast<const unsigned char*>(dst.data())[bytes / 2] != 1) PT_FAIL("copy bandwidth: memcpy lost data");
    best = std::min(best, s);
  }
  return best > 0 ? 2.0 * static_cast<double>(bytes) / best : 0.0;
}

}  // namespace

double copy_bytes_per_s(Context& ctx) {
  static std::mutex mutex;
  static std::map<std::string, double> measured;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string key = ctx.device().str();
  auto it = measured.find(key);
  if (it != measured.end()) return it->second;
  const double rate = ctx.is_cuda() ? measure_gpu(ctx) : measure_cpu();
  measured[key] = rate;
  return rate;
}

RooflineRates roofline_rates(Context& ctx, double peak_flops_per_s, double fp8_peak_flops_per_s) {
  auto rate = [](double v) { return std::isfinite(v) && v > 0 ? v : 0.0; };
  RooflineRates r;
  r.flops_per_s = rate(peak_flops_per_s);
  r.fp8_flops_per_s = rate(fp8_peak_flops_per_s);
  r.bytes_per_s = copy_bytes_per_s(ctx);
  return r;
}

double RooflineRow::ratio() const {
  return floor_ms > 0 ? achieved_ms / floor_ms : std::numeric_limits<double>::quiet_NaN();
}

const char* RooflineRow::bound() const {
  if (!(floor_ms > 0)) return "none";
  return compute_floor_ms > floor_ms - compute_floor_ms ? "compute" : "memory";
}

std::vector<RooflineRow> roofline_rows(const std::vector<KernelTimer::Entry>& entries, int steps, double step_ms) {
  PT_CHECK(steps >= 1, "roofline_rows: steps must be at least 1");
  const double n = static_cast<double>(steps);
  std::vector<RooflineRow> rows;
  RooflineRow step{"step", "all"};
  step.achieved_ms = step_ms;
  for (const KernelTimer::Entry& e : entries) {
    RooflineRow r{e.phase, op_family_name(e.family)};
    r.flops = e.flops / n;
    r.fp8_flops = e.fp8_flops / n;
    r.bytes = e.bytes / n;
    r.achieved_ms = e.ms / n;
    r.floor_ms = e.floor_ms / n;
    r.compute_floor_ms = e.compute_floor_ms / n;
    step.flops += r.flops;
    step.fp8_flops += r.fp8_flops;
    step.bytes += r.bytes;
    step.floor_ms += r.floor_ms;
    step.compute_floor_ms += r.compute_floor_ms;
    rows.push_back(r);
  }
  rows.push_back(step);
  return rows;
}

}  // namespace pt::bench
