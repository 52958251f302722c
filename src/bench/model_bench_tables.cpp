#include "bench/model_bench_tables.h"

#include <iomanip>
#include <limits>
#include <sstream>

namespace pt::bench {

void define_model_bench_tables(ModelBenchResults& r) {
  // The identity of a configuration, shared by the three tables (first columns).
  const char* kSize = "named model size (tiny, small, medium, large, xl, 2.7b)";
  const char* kContext = "sequence length T, tokens";
  const char* kPrecision = "fp32 (true FP32), tf32, or bf16 (mixed: bf16 GEMM operands, fp32 master weights)";
  const char* kAttention = "naive (materialised scores, cuBLAS) or flash (FlashAttention-2 kernels)";
  const char* kFused = "on (the fused step) or off (one kernel per primitive as PyTorch eager: three q/k/v "
                       "GEMMs, GEMM then add per residual, clip and bf16 parameter copy as own passes)";
  const char* kBatch = "sequences per step";
  const char* kStatus = "ok; oom (the configuration did not fit in device memory); or unsupported (flash "
                        "attention for this model's head dimension)";
  auto& t = r.timings;
  t.add_string("size", kSize)
      .add_int("d_model", "model width")
      .add_int("num_layers", "Transformer blocks")
      .add_int("context_length", kContext)
      .add_int("batch_size", kBatch)
      .add_int("grad_accum", "micro-batches of batch_size per step (--grad-accum; forward mode: 1)")
      .add_string("precision", kPrecision)
      .add_string("grad_dtype", "weight-gradient type: fp32, or bf16 (--grad-dtype bf16, bf16 configurations)")
      .add_string("residual_dtype", "residual stream type: fp32, or bf16 (--residual-dtype bf16, bf16 configurations)")
      .add_string("attention", kAttention)
      .add_string("fused", kFused)
      .add_string("cuda_graph",
                  "on: the train step captured in a CUDA graph and replayed (only step_ms is measured); off")
      .add_string("update_overlap",
                  "on: each step's optimizer update ran under the next step's forward (--update-overlap; "
                  "forward_ms then holds it and optimizer_ms the clip only); off")
      .add_int("update_sms", "SMs GEMMs kept off while the update ran under the forward (--update-sms; 0 without it)")
      .add_string("mode", "forward, forward-backward or train-step (forward, loss, backward, clip + AdamW)")
      .add_int("warmup_steps", "untimed steps before the measured ones")
      .add_int("measured_steps", "steps the means and standard deviations are over")
      .add_string("status", kStatus)
      .add_int("oom_requested_bytes", "bytes of the allocation that failed (0 unless oom)");
  for (const TimedPhase& p : kTimedPhases)
    t.add_double(std::string(p.name) + "_ms_mean", p.description)
        .add_double(std::string(p.name) + "_ms_sd",
                    std::string("standard deviation of ") + p.name + "_ms" + p.sd_note + ", ms");
  t.add_double("first_step_ms", "the first step of the run (warm-up effects)")
      .add_double("tokens_per_s", "batch_size · context_length / step time, tokens per second", 0)
      .add_double("tflops", "model FLOP/s achieved (6·N·tokens + attention term), TFLOP/s", 1)
      .add_double("peak_tflops", "dense peak of the device for the precision (bf16's for fp8), TFLOP/s", 1)
      .add_string("peak_source", "where peak_tflops came from: --peak-tflops, table:<preset> "
                                 "(core/accelerators.tsv), device-properties (SMs x clock x "
                                 "per-SM rate), none (CPU)")
      .add_double("mfu", "model FLOPs utilisation = tflops / peak_tflops", 4)
      .add_double("peak_tflops_fp8", "fp8: dense FP8 peak (--peak-tflops: twice it), TFLOP/s; else NaN", 1)
      .add_double("mfu_fp8", "fp8: tflops / peak_tflops_fp8; else NaN", 4)
      .add_int("peak_memory_bytes", "tracking allocator peak during the measured steps; with cuda_graph on, the "
                                    "bytes reserved from the device (a replay allocates nothing: the graph's "
                                    "buffers stay in its private pool)")
      .add_int("device_mallocs", "device blocks the allocator's cache could not supply during the measured "
                                 "steps, each a cudaMalloc (0 in a steady state; with --warmup 0 the first "
                                 "step's own)")
      .add_int("cache_flushes", "times during the measured steps the whole cache went back to the driver "
                                "because cudaMalloc failed: memory near the device's capacity, steps slowed");
  // The first columns of /model_breakdown and /model_roofline (config_row sets all but pass).
  for (io::ResultTable* pass_table : {&r.breakdown, &r.roofline})
    pass_table->add_string("size", kSize)
        .add_int("context_length", kContext)
        .add_string("precision", kPrecision)
        .add_string("attention", kAttention)
        .add_string("fused", kFused)
        .add_string("pass", "inference (forward only) or train-step");
  r.breakdown.add_string("phase", "forward, backward or optimizer")
      .add_string(
          "family",
          "op family: matmul, attention, softmax, normalization, elementwise, loss, optimizer, communication, other")
      .add_double("ms_per_step", "GPU time per step from CUDA events, ms")
      .add_double("ops_per_step", "ops of this family timed per step", 1)
      .add_double("percent_of_pass", "share of the pass's GPU time, %", 1);
  r.roofline.add_string("phase", "forward, backward or optimizer; step: the whole pass (row of sums)")
      .add_string("family", "op family as in model_breakdown; all in the step row")
      .add_double("gflop",
                  "matrix-multiply work the ops must do per step (2 FLOPs per multiply-add, from "
                  "the shapes; elementwise arithmetic not counted), GFLOP",
                  3)
      .add_double("gflop_fp8", "gflop's part in FP8 GEMMs, GFLOP", 3)
      .add_double("gbytes",
                  "bytes the ops' kernels must move per step (each input read once, each output "
                  "written once, an updated tensor twice), GB (1e9 bytes)",
                  3)
      .add_double(
          "achieved_ms",
          "time per step: the family's kernels from CUDA events (host clock on the "
          "CPU); in the step row the whole pass on the stream, gaps included, timed without the kernel timer, ms",
          3)
      .add_double("floor_ms",
                  "roofline floor per step: the sum over ops of max(FLOPs / peak_tflops (FP8 GEMMs: "
                  "peak_tflops_fp8), bytes / copy_GBps), ms",
                  4)
      .add_double("ratio", "achieved_ms / floor_ms: how many times the hardware's floor (NaN without a floor)", 2)
      .add_string("bound", "compute or memory: the side giving the larger part of floor_ms, decided per op "
                           "(none: no cost counted)")
      .add_double("peak_tflops", "dense peak as in /model, TFLOP/s; NaN on the CPU (memory-only floors)", 1)
      .add_double("peak_tflops_fp8", "fp8: dense FP8 peak, TFLOP/s; else NaN", 1)
      .add_double("copy_GBps",
                  "measured device-memory copy rate, bytes read + written per second (1 GiB "
                  "device-to-device copies; 256 MiB memcpy on the CPU), GB/s",
                  1);
  r.memory.add_string("size", kSize)
      .add_int("context_length", kContext)
      .add_int("batch_size", kBatch)
      .add_string("precision", kPrecision)
      .add_string("attention", kAttention)
      .add_string("fused", kFused)
      .add_string("status", kStatus)
      .add_int("peak_forward_bytes", "peak of a forward-only (inference) pass")
      .add_int("peak_train_step_bytes", "peak of a full train step")
      .add_int("before_backward_bytes", "in use when backward starts")
      .add_int("peak_parameters_bytes", "breakdown of the train-step peak: parameters (+bf16 mirror)")
      .add_int("peak_gradients_bytes", "breakdown of the train-step peak: gradients")
      .add_int("peak_optimizer_state_bytes", "breakdown of the train-step peak: optimizer state")
      .add_int("peak_activations_bytes", "activations saved for backward and their gradients")
      .add_int("peak_workspace_bytes", "breakdown of the train-step peak: cuBLAS workspace")
      .add_int("peak_other_bytes", "breakdown of the train-step peak: everything else (inputs, scalars)")
      .add_string("timeline", "HDF5 group holding the allocation timeline of the train step");
}

MfuReport mfu_report(Precision p, const MfuPeaks& peaks, double tflops) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  MfuReport m;
  m.scale = mfu_scale(p);
  m.peak_tflops = peaks.peak.tflops > 0 ? peaks.peak.tflops : kNaN;
  m.peak_tflops_fp8 = p == Precision::FP8 && peaks.fp8_tflops > 0 ? peaks.fp8_tflops : kNaN;
  m.mfu = mfu_of(tflops, m.peak_tflops);
  m.mfu_fp8 = mfu_of(tflops, m.peak_tflops_fp8);
  return m;
}

std::string MfuReport::text() const {
  if (!(mfu >= 0)) return "";
  std::ostringstream o;
  o << std::setprecision(3) << "MFU " << mfu << " of the " << precision_name(scale) << " peak";
  if (mfu_fp8 >= 0) o << ", " << mfu_fp8 << " of the FP8 peak";
  return o.str();
}

bool MfuReport::impossible() const { return (peak_tflops_fp8 > 0 ? mfu_fp8 : mfu) > 1; }

}  // namespace pt::bench
