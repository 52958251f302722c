#pragma once
// `paratrain plan`: memory, communication and step time of a training job from its shape alone —
// any model on any cluster, instantly, on the CPU. Where paratrain runs the configuration itself
// the figures are its own accounting: the same parameter list (transformer_param_shapes), bucket
// plan and ZeRO-1 layout (parallel/), broadcast assignment (optim/) and allocator rounding the
// benchmarks measure with, so plan and `bench ddp` / `bench model` records agree
// (tests/cpu/test_plan.cpp holds them to the byte, activations within a tolerance). Layouts
// paratrain does not run (ZeRO-2, ZeRO-3/FSDP, tensor and pipeline parallelism) are estimated with
// the textbook formulas and marked as such.
#include <string>
#include <vector>

#include "core/accelerator_specs.h"
#include "core/device.h"
#include "model/transformer.h"

namespace pt::plan {

// Optimizer-state sharding. Zero2, Zero3 (FSDP): not implemented in paratrain (estimates).
enum class Sharding { None, Broadcast, Zero1, Zero2, Zero3 };
const char* sharding_name(Sharding s);
Sharding sharding_from_name(const std::string& name);
bool sharding_runs_in_paratrain(Sharding s);

struct Cluster {
  AcceleratorSpec device;  // per-device memory, peaks, HBM, intra-node link
  int gpus_per_node = 8;
  double inter_node_gbps = 50;  // one direction per device across nodes (400 Gb/s NIC per GPU)
  bool cpu = false;             // paratrain's CPU backend (64-byte allocation rounding, no workspace)
};

struct Job {
  TransformerConfig model;  // attention, recompute and fused are read from it
  Precision precision = Precision::BF16;
  int64_t batch = 4;                  // sequences per device per micro-batch
  int64_t grad_accum = 1;             // micro-batches per optimizer step
  int dp = 1, tp = 1, pp = 1;         // data-, tensor-, pipeline-parallel degrees
  std::string strategy = "bucketed";  // none | naive | flat | overlap | bucketed (gradient sync)
  double bucket_mb = 25;
  Sharding sharding = Sharding::None;
  bool grad_comm_bf16 = false;  // gradients on the wire in bf16
  bool grad_bf16 = false;       // bf16 gradients end to end (--grad-dtype bf16; bf16 precision only)
  bool residual_bf16 = false;   // the residual stream in bf16 (--residual-dtype bf16; bf16 precision only)
  int devices() const { return dp * tp * pp; }
};

// Memory::activations_by_choice's attention index.
inline constexpr AttentionImpl kAttentionChoices[] = {AttentionImpl::Flash, AttentionImpl::Naive};
inline constexpr int kNumAttentionChoices = sizeof(kAttentionChoices) / sizeof(kAttentionChoices[0]);

// Per device, bytes, as the tracking allocator counts them (each allocation rounded up to its
// granularity: 512 B on a GPU, 64 B on the CPU).
struct Memory {
  int64_t params = 0;       // fp32 master weights
  int64_t params_lowp = 0;  // bf16 copy (bf16 on a GPU)
  int64_t grads = 0;
  int64_t optstate = 0;           // AdamW exp_avg + exp_avg_sq
  int64_t activations = 0;        // peak of the training step
  int64_t activations_saved = 0;  // at the end of forward (what backward needs)
  int64_t workspace = 0;          // cuBLAS workspace
  // The peak activations of the same job under each choice of --recompute and --attention:
  // [kRecomputeChoices: on, swiglu, off] × [kAttentionChoices: flash, naive] (flash 0 where the
  // kernels lack the head dimension).
  int64_t activations_by_choice[kNumRecompute][kNumAttentionChoices] = {};
  int64_t total() const { return params + params_lowp + grads + optstate + activations + workspace; }
};

struct Collective {
  std::string name;       // all_reduce, reduce_scatter, all_gather, broadcast, p2p (pipeline), tp all_reduce
  std::string what;       // gradients, parameters, activations
  int64_t calls = 0;      // per optimizer step
  int64_t bytes = 0;      // this rank's buffer bytes per step (what bench ddp's comm_MB counts)
  double bus_factor = 1;  // bytes each rank sends on the wire per buffer byte (nccl-tests' busbw factor)
  double seconds = 0;     // bytes × factor / bandwidth
};

struct Result {
  Job job;
  Cluster cluster;
  bool implemented = true;  // false: the layout is an estimate of what paratrain does not run
  std::vector<std::string> notes;
  Memory memory;
  std::vector<Collective> comm;
  double flops_per_step = 0;      // per device: 6·N·tokens + attention (bench model's count)
  double fp8_flops_per_step = 0;  // the part of it in FP8 GEMMs (fp8 only)
  double compute_s = 0;           // flops / dense peak; fp8: the FP8 GEMMs' at the FP8 peak
  double hbm_s = 0;               // optimizer pass over its bytes at HBM bandwidth
  double comm_s = 0;              // sum of collectives
  double exposed_comm_s = 0;      // communication not hidden behind backward (2/3 of compute)
  double step_s = 0;              // roofline: compute + optimizer + exposed communication
  double mfu = 0;                 // flops / (step · peak), bf16's peak for fp8 (mfu_scale)
  double mfu_fp8 = 0;             // fp8: flops / (step · FP8 peak); NaN otherwise
  int64_t hiding_batch = 0;       // smallest per-device batch whose backward hides the gradient sync
  bool fits = false;
  int min_devices_to_fit = 0;  // smallest data-parallel device count (×tp·pp) that fits; 0: none up to 65536
};

// Throws pt::Error with one clear message for a layout that does not fit the model (tp not
// dividing the heads or d_ff, pp not dividing the layers), a device count that is not a
// multiple of tp·pp, or values out of range: more than kMaxPlanLayers layers, or memory too
// large to count in bytes (an absurd batch or context).
Result plan(const Job& job, const Cluster& cluster);
inline constexpr int64_t kMaxPlanLayers = 100000;

// Cluster presets by name: every accelerator of core/accelerators.tsv ("h100-sxm", "tpu-v5p",
// ...) with its node size and network; throws naming the known ones.
Cluster cluster_preset(const std::string& name);
std::vector<std::string> cluster_preset_names();

}  // namespace pt::plan
