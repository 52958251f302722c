#pragma once
// NVTX ranges and the kernel-time breakdown: GPU time per (phase, op family) from CUDA events,
// so the program answers "which kernels take the time" without an external profiler.
#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <vector>

namespace pt {

class Context;
class Tensor;

enum class OpFamily : uint8_t {
  Matmul,
  Attention,
  Softmax,
  Norm,
  Elementwise,
  Loss,
  Optimizer,
  Communication,
  Other,
  Count
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

// What an op must do, from its shapes: the multiply-add work of matrix products (2 FLOPs each;
// elementwise arithmetic is not counted: it never bounds these ops) and the fewest bytes its
// kernels must move through memory — every input read once, every output written once (an
// output also read, as C with beta ≠ 0 or a gradient accumulated into, counts twice). Each op
// computes its own in its OpScope (src/ops/*.cpp); a tensor's bytes are numel × element size,
// so a strided view counts the elements it names, not the buffer it lies in. An FP8 GEMM's
// FLOPs are also fp8_flops: the roofline floors them at the FP8 peak.
struct OpCost {
  double flops = 0;
  double bytes = 0;
  double fp8_flops = 0;             // the part of flops on FP8 tensor cores
  OpCost& read(const Tensor& t);    // + t's bytes
  OpCost& write(const Tensor& t);   // + t's bytes
  OpCost& update(const Tensor& t);  // read and written: + twice t's bytes
  OpCost& operator+=(const OpCost& o) {
    flops += o.flops;
    fp8_flops += o.fp8_flops;
    bytes += o.bytes;
    return *this;
  }
};

// The ceilings a roofline compares an op with: dense matrix throughput at the run's precision
// (bf16's for an fp8 run), the FP8 tensor cores' for an op's fp8_flops, and the measured
// device-memory copy rate (bytes read + written per second). A zero rate leaves that side out
// of the floor; a zero fp8 rate floors fp8_flops at flops_per_s.
struct RooflineRates {
  double flops_per_s = 0;
  double bytes_per_s = 0;
  double fp8_flops_per_s = 0;
  // max(compute_s, bytes / bytes_per_s), in milliseconds
  double floor_ms(const OpCost& c) const;
  // (flops - fp8_flops) / flops_per_s + fp8_flops / fp8_flops_per_s; 0 without a compute rate
  double compute_s(const OpCost& c) const;
  // Whether the compute side of floor_ms is the larger (false with no compute rate, or a tie).
  bool compute_bound(const OpCost& c) const;
};

// Records an event pair around each timed op on the stream it runs on (host clock on the
// CPU). Only the outermost of nested ops is timed, so nothing is counted twice; its OpCost is
// summed with it, and its roofline floor at `rates`.
class KernelTimer {
 public:
  explicit KernelTimer(const Context& ctx, RooflineRates rates = {});
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  void set_phase(const std::string& phase);  // e.g. "forward", "backward", "optimizer"
  const std::string& phase() const { return phases_[phase_]; }
  void begin(OpFamily family, cudaStream_t stream, const OpCost& cost = {});
  void end(cudaStream_t stream);

  struct Entry {
    std::string phase;
    OpFamily family;
    double ms;                    // summed over every timed op of this phase and family
    int64_t count;                // number of ops
    double flops = 0, bytes = 0;  // their OpCosts, summed
    double floor_ms = 0;          // their roofline floors at the timer's rates, summed
    double compute_floor_ms = 0;  // the part of floor_ms from compute-bound ops (the rest: memory-bound)
    double fp8_flops = 0;         // the part of flops in FP8 GEMMs
  };
  // Waits for outstanding events, returns the sums since the last collect, and resets them.
  std::vector<Entry> collect();

 private:
  struct Pending {
    int start_event, end_event, phase;
    OpFamily family;
  };
  struct Sums {
    double ms = 0, flops = 0, fp8_flops = 0, bytes = 0, floor_ms = 0, compute_floor_ms = 0;
    int64_t count = 0;
  };
  int next_event();
  bool cuda_;
  RooflineRates rates_;
  int depth_ = 0;
  int phase_ = 0;
  OpFamily open_family_ = OpFamily::Other;
  int open_start_ = -1;
  std::chrono::steady_clock::time_point open_t0_;
  std::vector<std::string> phases_{"default"};
  std::vector<cudaEvent_t> events_;
  int events_used_ = 0;
  std::vector<Pending> pending_;
  std::vector<std::vector<Sums>> sums_;  // [phase][family]
};

// One op: an NVTX range named `name`, timed under `family` (with what it must do, `cost`) when
// the context has a timer.
class OpScope {
 public:
  OpScope(const Context& ctx, const char* name, OpFamily family, const OpCost& cost = {});
  OpScope(const Context& ctx, const char* name, OpFamily family, cudaStream_t stream, const OpCost& cost = {});
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  NvtxRange range_;
  KernelTimer* timer_;
  cudaStream_t stream_;
};

}  // namespace pt
