#pragma once
// NVTX ranges and the kernel-time breakdown: GPU time per (phase, op family) from CUDA events,
// so the program answers "which kernels take the time" without an external profiler.
#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <vector>

namespace pt {

class Context;

enum class OpFamily : uint8_t {
  Matmul, Attention, Softmax, Norm, Elementwise, Loss, Optimizer, Communication, Other, Count
};
const char* op_family_name(OpFamily f);
constexpr int kOpFamilies = static_cast<int>(OpFamily::Count);

// RAII NVTX push/pop; costs nothing measurable when no profiler is attached.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  explicit NvtxRange(const std::string& name) : NvtxRange(name.c_str()) {}
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// Records an event pair around each timed op on the stream it runs on (host clock on the
// CPU). Only the outermost of nested ops is timed, so nothing is counted twice.
class KernelTimer {
 public:
  explicit KernelTimer(const Context& ctx);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  void set_phase(const std::string& phase);  // e.g. "forward", "backward", "optimizer"
  const std::string& phase() const { return phases_[phase_]; }
  void begin(OpFamily family, cudaStream_t stream);
  void end(cudaStream_t stream);

  struct Entry {
    std::string phase;
    OpFamily family;
    double ms;      // summed over every timed op of this phase and family
    int64_t count;  // number of ops
  };
  // Waits for outstanding events, returns the sums since the last collect, and resets them.
  std::vector<Entry> collect();

 private:
  struct Pending {
    int start_event, end_event, phase;
    OpFamily family;
  };
  int next_event();
  bool cuda_;
  int depth_ = 0;
  int phase_ = 0;
  OpFamily open_family_ = OpFamily::Other;
  int open_start_ = -1;
  std::chrono::steady_clock::time_point open_t0_;
  std::vector<std::string> phases_{"default"};
  std::vector<cudaEvent_t> events_;
  int events_used_ = 0;
  std::vector<Pending> pending_;
  std::vector<std::vector<double>> ms_;       // [phase][family]
  std::vector<std::vector<int64_t>> counts_;  // [phase][family]
};

// One op: an NVTX range named `name`, timed under `family` when the context has a timer.
class OpScope {
 public:
  OpScope(const Context& ctx, const char* name, OpFamily family);
  OpScope(const Context& ctx, const char* name, OpFamily family, cudaStream_t stream);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  NvtxRange range_;
  KernelTimer* timer_;
  cudaStream_t stream_;
};

}  // namespace pt
