#pragma once
// The roofline of `bench model --breakdown`: how far each phase and op family, and the whole
// step, is from what the hardware allows. The ops count what they must do (OpCost, in their
// OpScopes); this file measures the memory side of the ceiling (a large device copy), and turns
// the kernel timer's sums into the table's rows.
#include <string>
#include <vector>

#include "core/context.h"
#include "core/profiler.h"

namespace pt::bench {

// Device-memory copy rate of ctx's device, bytes read + written per second: the fastest of a
// few device-to-device cudaMemcpyAsync of 1 GiB (halved down to 64 MiB while that does not
// fit) timed with events on the compute stream; on the CPU, the fastest of a few memcpy of 256
// MiB. Measured once per process and device, then remembered.
double copy_bytes_per_s(Context& ctx);

// The rates a KernelTimer floors ops at: the dense peak (FLOP/s; 0 or NaN: no compute side),
// the FP8 peak for FP8 GEMMs' FLOPs (0 or NaN: at the dense peak) and copy_bytes_per_s(ctx).
RooflineRates roofline_rates(Context& ctx, double peak_flops_per_s, double fp8_peak_flops_per_s = 0);

// One row of /model_roofline, per step.
struct RooflineRow {
  std::string phase, family;  // "step", "all" for the whole pass
  double flops = 0, bytes = 0;
  double fp8_flops = 0;         // the part of flops in FP8 GEMMs
  double achieved_ms = 0;       // kernel time (a family), or the whole pass's time (the step row)
  double floor_ms = 0;          // Σ over ops of max(RooflineRates::compute_s, bytes / copy rate)
  double compute_floor_ms = 0;  // the part of floor_ms from compute-bound ops
  double ratio() const;         // achieved / floor; NaN without a floor
  const char* bound() const;    // "compute" or "memory": the larger part of the floor; "none" without one
};

// Rows of one pass from a KernelTimer's entries collected over `steps` steps and the pass's
// mean time per step (kernels and the gaps between them): one per entry (phase, family), in the
// timer's order, then the step row with the entries' sums and step_ms as its achieved time.
std::vector<RooflineRow> roofline_rows(const std::vector<KernelTimer::Entry>& entries, int steps, double step_ms);

}  // namespace pt::bench
