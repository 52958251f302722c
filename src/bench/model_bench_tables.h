#pragma once
// The run record's tables of bench model: /model (one row per configuration: step times, MFU,
// memory), /model_breakdown, /model_roofline and /model_memory; their columns are declared here
// and filled by run_model_bench.
#include "bench/model_bench.h"

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

}  // namespace pt::bench
