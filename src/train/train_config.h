#pragma once
// Everything a training run is, in one typed struct: each setting lives here once, with its
// default. `paratrain train` fills it from its options (cli/train.cpp) and hands it to
// train::Trainer; a new setting is a field here, its option in the CLI, and its use in the
// Trainer. The run's options as text (`options`) go into the record and each checkpoint, which is
// how `--resume` continues a run exactly.
#include <cstdint>
#include <map>
#include <string>

#include "core/context.h"
#include "core/device.h"
#include "core/flash_choice.h"
#include "io/checkpoint.h"
#include "io/run_log.h"
#include "io/token_data.h"
#include "model/transformer.h"
#include "optim/deferred_update.h"
#include "optim/optimizer.h"
#include "train/data_parallel.h"

namespace pt::train {

// What a NaN or infinite loss or gradient norm does (the update is never applied).
enum class OnNonFinite { Stop, Skip };
OnNonFinite on_nonfinite_from_name(const std::string& name);  // "stop" | "skip"

// The checkpoint a run continues (--resume), read before the configuration is complete: it
// supplies the options not given again.
struct ResumePoint {
  std::string path;  // "" for a fresh start
  io::CheckpointInfo info;
  bool empty() const { return path.empty(); }
  int64_t step() const { return path.empty() ? 0 : info.step; }
};

struct TrainConfig {
  // ---- model
  std::string model_name = "tiny";  // the named size, for the banner
  TransformerConfig model = TransformerConfig::named("tiny");

  // ---- data
  // The token data: a file, glob, directory or manifest, or several comma-separated
  // (io::data_specs); "" → data/sample_tokens.npy, else the installed sample.
  std::string data;
  io::BinTokens bin_dtype = io::BinTokens::U16;
  io::Sampling sampling = io::Sampling::Random;
  int64_t batch_size = 16;  // global sequences of one micro-batch
  int64_t grad_accum = 1;   // micro-batches per optimizer step

  // ---- validation (train/evaluate.h)
  std::string val_data;     // as --data; "" → the val list of a --data manifest when eval_every > 0
  int64_t eval_every = 0;   // steps; 0: only after the last step (with val_data)
  int64_t eval_tokens = 0;  // input tokens per evaluation; 0: kDefaultEvalBatches batches

  // ---- optimisation
  int64_t steps = 200;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  double lr = 3e-3;
  double min_lr = -1;  // negative: lr / 10
  double weight_decay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t warmup_steps = 20;
  int64_t cosine_steps = 0;   // 0: --steps (train/resume.h's schedule_length)
  bool cosine_given = false;  // given on this command line (a resumed run keeps its own otherwise)
  double grad_clip = 1.0;     // 0: off
  OnNonFinite on_nonfinite = OnNonFinite::Stop;

  // ---- checkpoints
  std::string save;        // "" : none
  std::string save_dir;    // step checkpoints and a pointer here (train/checkpoint_dir.h); "" : none
  int64_t keep_last = 0;   // the newest step checkpoints --save-dir keeps; 0: all
  int64_t save_every = 0;  // 0: only at the end
  std::string init_from;   // start from these weights
  std::string resume;      // as given: "", a file, or "auto"
  ResumePoint resumed;     // what `resume` resolved to

  // ---- data parallelism
  DataParallelConfig ddp;

  // ---- how it runs
  Device device = Device::cpu();
  std::string device_banner;  // how the first line names the device (loudly a CPU that auto fell back to)
  Precision precision = Precision::FP32;
  DType grad_dtype = DType::F32, residual_dtype = DType::F32;
  GemmSelect gemm = GemmSelect::Autotune;
  FlashChoice flash;
  bool cuda_graph = false;
  UpdateOverlap update_overlap = UpdateOverlap::Auto;
  int update_sms = 0;
  uint64_t seed = 1337;

  // ---- outputs
  std::string out;  // the run record; "" → a default name
  bool overwrite = false;
  int64_t log_every = 1;
  double peak_tflops = 0;  // one device's peak for MFU; 0: from the device (none on the CPU)
  io::LogOptions log;
  std::map<std::string, std::string> options;  // every option as text: the record's and the checkpoints'
};

}  // namespace pt::train
