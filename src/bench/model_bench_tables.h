#pragma once
// The run record's tables of bench model: /model (one row per configuration: step times, MFU,
// memory), /model_breakdown, /model_roofline and /model_memory; their columns are declared here
// and filled by run_model_bench.
#include <string>

#include "bench/model_bench.h"
#include "core/accelerator_specs.h"

namespace pt::bench {

// The phases /model times: <name>_ms_mean and <name>_ms_sd per step.
struct TimedPhase {
  const char* name;
  const char* description;  // of the mean
  const char* sd_note;      // in the standard deviation's description
};
inline constexpr TimedPhase kTimedPhases[] = {
    {"forward", "forward (and loss) per step, ms", " over the measured steps"},
    {"backward", "backward per step, ms", ""},
    {"optimizer", "clip + AdamW per step, ms", ""},
    {"step", "whole step, ms", ""}};

// Declares the columns of every table r holds.
void define_model_bench_tables(ModelBenchResults& r);

// The peak and MFU columns of a /model row (core/accelerator_specs.h's mfu_peaks says which
// peaks): peak_tflops and mfu on the bf16 scale for bf16 and fp8 runs (the run precision's own
// for fp32 and tf32), peak_tflops_fp8 and mfu_fp8 for fp8 runs only (NaN otherwise, and without
// an FP8 peak). The MFUs are NaN for a step not measured (tflops NaN).
struct MfuReport {
  Precision scale = Precision::FP32;  // the precision peak_tflops is the peak of
  double peak_tflops, mfu, peak_tflops_fp8, mfu_fp8;
  // "MFU 0.412 of the bf16 peak, 0.206 of the FP8 peak"; "" without a peak.
  std::string text() const;
  // Whether the step ran faster than the highest peak its GEMMs can reach (the FP8 one for fp8).
  bool impossible() const;
};
MfuReport mfu_report(Precision p, const MfuPeaks& peaks, double tflops);

}  // namespace pt::bench
