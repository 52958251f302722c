#pragma once
// `paratrain bench model`: time the Transformer per phase over sizes × contexts × precisions ×
// attention implementations × warm-up counts, with optional kernel-time breakdown and memory
// profile. Results are ResultTables (printed and written to the run's HDF5 file).
#include <functional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/device.h"
#include "io/run_record.h"
#include "io/table.h"
#include "model/transformer.h"
#include "optim/deferred_update.h"

namespace pt::bench {

enum class ModelBenchMode { Forward, ForwardBackward, TrainStep };
ModelBenchMode model_bench_mode_from_name(const std::string& name);
const char* model_bench_mode_name(ModelBenchMode m);

struct ModelBenchOptions {
  std::vector<std::string> sizes{"small"};
  std::vector<int64_t> contexts{128, 256, 512, 1024};
  std::vector<Precision> precisions{Precision::FP32, Precision::BF16};
  std::vector<std::string> attention{"naive", "flash"};
  std::vector<int64_t> warmups{5};
  int64_t batch_size = 4;
  int grad_accum = 1;  // micro-batches of batch_size per step (train-step, forward-backward)
  int64_t vocab_size = 10000;
  int steps = 10;
  ModelBenchMode mode = ModelBenchMode::TrainStep;
  Recompute recompute = Recompute::All;                // TransformerConfig::recompute
  bool fused = true;                                   // TransformerConfig::fused and OptimizerConfig::fused
  bool cuda_graph = false;                             // train-step mode: the step captured and replayed (TrainStep)
  UpdateOverlap update_overlap = UpdateOverlap::Auto;  // train-step mode: the update under the next forward
  int update_sms = 0;                                  // Context::set_update_sms where the update is deferred
  GemmSelect gemm = GemmSelect::Autotune;              // Context::set_gemm_select (--gemm)
  DType grad_dtype = DType::F32;                       // of the bf16 configurations (--grad-dtype); others fp32
  DType residual_dtype = DType::F32;                   // likewise (--residual-dtype)
  FlashChoice flash;                                   // Context::set_flash (--flash-kernels, --wgmma-tiles)
  bool breakdown = false;       // kernel-time breakdown and roofline per phase and op family (at the largest warm-up)
  bool memory_profile = false;  // peak/forward/step memory, breakdown and timeline (likewise)
  bool profile_steps = false;   // cudaProfilerStart/Stop around the measured steps
  double peak_tflops = 0;       // override of the device's dense peak (0: from the device name)
  uint64_t seed = 1337;
};

struct ModelBenchResults {
  io::ResultTable timings{"model"};
  io::ResultTable breakdown{"model_breakdown"};
  io::ResultTable memory{"model_memory"};
  io::ResultTable roofline{"model_roofline"};  // with the breakdown: what each phase and family must do
};

// After each configuration: the tables so far, the configuration's name
// ("small_ctx512_bf16_flash_w2") and a one-line summary of what was measured.
using ModelBenchProgress =
    std::function<void(const ModelBenchResults&, const std::string& name, const std::string& summary)>;

// How many configurations run_model_bench runs for `opt` (sizes × contexts × precisions ×
// attention × warm-up counts).
int64_t model_bench_configurations(const ModelBenchOptions& opt);

// Runs every configuration on `device`; an out-of-memory configuration is recorded with
// status "oom" and the bytes it asked for, and the sweep goes on. Memory timelines go to
// `record` (datasets under /memory_timeline/) when memory_profile is on. `after_each` (if set)
// is told of each configuration as it finishes — the CLI reports progress and commits the HDF5
// file there, so a sweep cut short keeps what it measured.
ModelBenchResults run_model_bench(const ModelBenchOptions& opt, Device device, io::RunRecord* record,
                                  const ModelBenchProgress& after_each = {});

}  // namespace pt::bench
