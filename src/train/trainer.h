#pragma once
// The training run `paratrain train` starts: start-up checks, the model and data parallelism
// built, the loop, checkpoints, the record (train/train_record.h) and the progress log.
//
//   Trainer t(config);  // checks everything and takes the output files; builds nothing
//   return t.run();     // builds, trains; kExitOk, or kExitStopped after a signal
//
// Errors are pt::Error; one thrown by the constructor may still be blamed on the checkpoint
// that supplied an option (cli/train_resume.h), one thrown by run() names its own files.
// A signal or a closed standard output stops the run at the next step boundary, on every rank.
#include <cstdint>
#include <memory>
#include <string>

#include "core/context.h"
#include "io/atomic_file.h"
#include "io/run_log.h"
#include "io/token_data.h"
#include "io/token_shards.h"
#include "model/transformer.h"
#include "parallel/communicator.h"
#include "parallel/runtime.h"
#include "train/checkpoint_dir.h"
#include "train/data_parallel.h"
#include "train/injected_faults.h"
#include "train/train_config.h"
#include "train/train_record.h"
#include "train/train_step.h"

namespace pt::train {

class Trainer {
 public:
  explicit Trainer(TrainConfig cfg);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  int run();

 private:
  // Start-up (the constructor), in this order.
  void validate();
  void plan_schedule();
  void open_data();
  void open_val_data();
  void take_outputs();
  // run()
  void build();
  void log_start();
  void train_loop();
  bool train_step(int64_t s);  // step s+1; true when the ranks agreed to stop after it
  void check_finite(int64_t s, double loss, double gnorm, double lr);
  void log_step(int64_t s, double loss, double lr, double gnorm, double ms);
  bool after_step(int64_t s);  // periodic work after step s+1; true to stop
  void save_checkpoint(int64_t steps_done);
  void run_eval(int64_t steps_done);  // the validation loss after that step: record, log
  [[noreturn]] void fail(const std::exception& e, const std::string& during);
  int finish();
  double tokens_per_step() const {
    return static_cast<double>(step_rows_) * static_cast<double>(cfg_.model.context_length);
  }

  TrainConfig cfg_;
  parallel::Runtime& rt_;
  io::RunLog log_;
  int64_t start_step_ = 0;
  bool complete_ = false;  // the resumed checkpoint is at --steps already
  double min_lr_ = 0;
  int64_t cosine_steps_ = 0;  // the schedule's length
  int64_t step_rows_ = 0;     // sequences per step: grad-accum micro-batches of --batch-size
  std::unique_ptr<io::TokenShards> tokens_;
  std::unique_ptr<io::TokenShards> val_tokens_;  // null: no evaluation
  std::unique_ptr<io::ValidationBatches> val_batches_;
  io::SamplerConfig sampler_cfg_;
  std::unique_ptr<io::BatchSampler> sampler_;
  std::string run_id_;
  std::unique_ptr<TrainRecord> rec_;
  std::unique_ptr<io::OutputLock> save_lock_;
  bool replace_save_ = false;                // whether the next checkpoint may replace a file at --save
  std::unique_ptr<CheckpointDir> save_dir_;  // --save-dir (rank 0)
  bool saves() const { return !cfg_.save.empty() || !cfg_.save_dir.empty(); }
  std::string saved_path_;  // the checkpoint written last (for the summary)

  OptimizerConfig optimizer_cfg_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<TransformerLM> lm_;
  std::unique_ptr<parallel::Communicator> comm_;
  DataParallel dp_;
  std::unique_ptr<TrainStep> step_fn_;
  std::unique_ptr<NanGradInjector> injected_fault_;

  // The loop's state.
  Tensor h_ids_, h_tg_;
  double last_loss_;
  int64_t last_step_ = 0;      // the last step completed
  int64_t stopped_after_ = 0;  // a stop ended the run after this step (when stopped_)
  bool stopped_ = false;
  int64_t saved_step_ = -1;  // the step of the checkpoint this process wrote last
  std::unique_ptr<io::Eta> eta_;
  double flops_per_step_ = 0;  // the model's, of the whole step (all ranks)
  double peak_tflops_ = 0;     // one device's dense peak; 0: unknown (no MFU)
};

}  // namespace pt::train
