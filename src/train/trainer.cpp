#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "core/accelerator_specs.h"
#include "core/allocator.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/fault_injection.h"
#include "core/interrupt.h"
#include "io/checkpoint.h"
#include "io/input_file.h"
#include "optim/optimizer_state.h"
#include "parallel/host_collectives.h"
#include "train/evaluate.h"
#include "train/resume.h"
#include "train/train_outputs.h"

namespace pt::train {

namespace {

std::string default_data_path() {
  std::string local = "data/sample_tokens.npy";  // returned by move
  if (std::filesystem::exists(local)) return local;
  return sample_data_path();
}

// What the ranks agree on after each step, in one all-reduce: the mean loss, and whether any
// rank was asked to stop (a signal reaches one rank, or all; rank 0's standard output fails):
// they stop at the same step.
struct StepConsensus {
  double mean_loss = 0;
  bool stop = false;
};
StepConsensus agree_after_step(double loss, bool stop_requested) {
  // Bounded by --comm-timeout like every wait for the other ranks.
  const std::vector<double> sum = parallel::sum_over_ranks(std::vector<double>{loss, stop_requested ? 1.0 : 0.0});
  return {sum[0] / parallel::Runtime::get().world_size(), sum[1] > 0};
}

// The advice for a non-finite loss or gradient at `step` (1-based), fitting its likely cause.
std::string nonfinite_advice(int64_t step, int64_t first_step, bool from_checkpoint, double lr, double grad_clip) {
  if (step == first_step && from_checkpoint)
    return "it happened on the first step from the checkpoint: its weights are finite (checked at load), so "
           "look at the data and the options that differ from the run that saved it";
  if (step == first_step)
    return "it happened on the first step: look at the data (token ids, --vocab-size) and the model options";
  char buf[160];
  std::snprintf(buf, sizeof buf, "the run diverged: try a smaller --lr (this step's was %.3g)%s", lr,
                grad_clip > 0 ? "" : " or a --grad-clip (it is off)");
  return buf;
}

// Runs write() after an earlier failure `why`: "" when it works or fails the same way, else
// "; and <its error>" for the one error line.
std::string also_failed(const std::function<void()>& write, const std::string& why) {
  try {
    write();
  } catch (const std::exception& e) {
    if (error_text(e) != why) return "; and " + error_text(e);
  }
  return "";
}

// "12.3/45.6 MiB" (or GiB from 1 GiB on): memory in use now and at its peak.
std::string memory_text(int64_t in_use, int64_t peak) {
  const bool gib = peak >= (int64_t{1} << 30);
  const double unit = gib ? 1024.0 * 1024.0 * 1024.0 : 1024.0 * 1024.0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f/%.*f %s", gib ? 2 : 1, in_use / unit, gib ? 2 : 1, peak / unit,
                gib ? "GiB" : "MiB");
  return buf;
}

// Whether this rank asks to stop: a signal, or (rank 0) a standard output that no longer takes
// the progress lines (its reader has gone): both stop the run as cleanly as a time limit.
bool stop_wanted(io::RunLog& log) { return interrupt::requested() != 0 || !log.stdout_failure().empty(); }

}  // namespace

OnNonFinite on_nonfinite_from_name(const std::string& name) {
  PT_CHECK(name == "stop" || name == "skip", "--on-nonfinite must be stop or skip, not '" + name + "'");
  return name == "stop" ? OnNonFinite::Stop : OnNonFinite::Skip;
}

Trainer::Trainer(TrainConfig cfg)
    : cfg_(std::move(cfg)), rt_(parallel::Runtime::get()), log_(cfg_.log, rt_.is_root()), last_loss_(NAN) {
  start_step_ = cfg_.resumed.step();
  last_step_ = start_step_;
  if (!cfg_.resumed.empty() && start_step_ >= cfg_.steps) {
    // A requeued job whose run had already finished has nothing to do; asking for that by hand is
    // a mistake worth an error.
    PT_CHECK(cfg_.resume == "auto", "--resume: the checkpoint is at step " + std::to_string(start_step_) +
                                        ", nothing left to do for --steps " + std::to_string(cfg_.steps));
    complete_ = true;
    return;
  }
  validate();
  plan_schedule();
  open_data();
  open_val_data();
  take_outputs();
}

Trainer::~Trainer() = default;

// Everything that can be refused before any work, so an absurd request fails at once.
void Trainer::validate() {
  const TrainConfig& c = cfg_;
  PT_CHECK(c.steps >= 1, "--steps must be at least 1");
  PT_CHECK(c.batch_size >= 1, "--batch-size must be at least 1");
  PT_CHECK(c.log_every >= 1, "--log-every must be at least 1");
  PT_CHECK(c.lr > 0, "--lr must be positive");
  PT_CHECK(std::isfinite(c.peak_tflops) && c.peak_tflops >= 0 && c.peak_tflops < 1e9,
           "--peak-tflops must be a TFLOP/s figure from 0 (the device's) up, not " + std::to_string(c.peak_tflops));
  PT_CHECK(c.warmup_steps >= 0 && c.save_every >= 0, "--warmup-steps and --save-every must be non-negative");
  PT_CHECK(c.save.empty() || c.save_dir.empty(),
           "--save and --save-dir contradict each other: --save keeps one checkpoint file, --save-dir a history "
           "of them; pick one");
  PT_CHECK(c.save_every == 0 || saves(), "--save-every needs --save FILE or --save-dir DIR");
  PT_CHECK(c.keep_last >= 0, "--keep-last must be non-negative (0 keeps every checkpoint)");
  PT_CHECK(c.keep_last == 0 || !c.save_dir.empty(), "--keep-last needs --save-dir DIR");
  PT_CHECK(c.batch_size % rt_.world_size() == 0, "--batch-size " + std::to_string(c.batch_size) +
                                                     " is not divisible by the " + std::to_string(rt_.world_size()) +
                                                     " ranks");
  PT_CHECK(!(c.precision == Precision::BF16 && c.device.is_cpu()), "--precision bf16 needs a GPU");
  PT_CHECK(!(c.precision == Precision::FP8 && c.device.is_cpu()),
           "--precision fp8 needs a GPU with FP8 tensor cores (compute capability 8.9 or newer); this run is on the "
           "CPU");
  try {
    c.model.validate();
  } catch (const std::exception& e) {
    if (c.resumed.empty()) throw;
    PT_FAIL("--resume " + c.resumed.path + ": the checkpoint's model configuration is not usable: " + error_text(e));
  }
  PT_CHECK(!__builtin_mul_overflow(c.batch_size, c.grad_accum, &step_rows_),
           "--batch-size " + std::to_string(c.batch_size) + " × --grad-accum " + std::to_string(c.grad_accum) +
               " sequences per step is too many to count");
  // Before anything is built or read: an absurd size fails here, at once.
  check_memory_floor(c.model, c.batch_size / rt_.world_size(), dtype_size(c.grad_dtype),
                     is_bf16_mixed(c.precision) && c.device.is_cuda(), c.device,
                     c.resumed.empty()
                         ? "the size comes from --num-layers, --d-model, --d-ff, --vocab-size, --batch-size and "
                           "--context-length"
                         : "the size comes from the configuration of the checkpoint " + c.resumed.path);
  PT_CHECK(!c.cuda_graph || c.device.is_cuda(), "--cuda-graph on needs a GPU (this run is on the CPU)");
  PT_CHECK(!c.cuda_graph || rt_.world_size() == 1,
           "--cuda-graph on cannot capture data parallelism yet: run one process, or --cuda-graph off");
  if (c.ddp.shard == ShardMode::None)  // refuses `on` where it cannot run
    defers_update(c.update_overlap, c.device.is_cuda(), c.model.fused, c.cuda_graph);
}

// The optimizer and its learning-rate schedule (a resumed run keeps its checkpoint's length).
void Trainer::plan_schedule() {
  const TrainConfig& c = cfg_;
  OptimizerConfig& oc = optimizer_cfg_;
  oc.kind = c.optimizer;
  oc.adamw.lr = static_cast<float>(c.lr);
  oc.adamw.beta1 = static_cast<float>(c.beta1);
  oc.adamw.beta2 = static_cast<float>(c.beta2);
  oc.adamw.eps = static_cast<float>(c.eps);
  oc.adamw.weight_decay = static_cast<float>(c.weight_decay);
  oc.sgd_weight_decay = static_cast<float>(c.weight_decay);
  oc.fused = c.model.fused;
  min_lr_ = c.min_lr < 0 ? c.lr / 10 : c.min_lr;
  PT_CHECK(min_lr_ <= c.lr, "--min-lr " + std::to_string(c.min_lr) + " is above --lr " + std::to_string(c.lr) +
                                ": the schedule decays from --lr down to --min-lr");
  const ScheduleLength schedule =
      schedule_length(c.cosine_steps, c.cosine_given, c.steps, c.resumed.empty() ? nullptr : &c.resumed.info);
  cosine_steps_ = schedule.steps;
  if (rt_.is_root() && !c.resumed.empty()) {
    const std::string note =
        schedule_notice(schedule, start_step_, c.steps, c.resumed.info,
                        [&](int64_t step, int64_t end) { return cosine_lr(step, c.lr, min_lr_, c.warmup_steps, end); });
    if (!note.empty()) std::fprintf(stderr, "paratrain: %s\n", note.c_str());
  }
}

// The token data and this rank's sampler (a resumed run continues the checkpoint's data order).
void Trainer::open_data() {
  TrainConfig& c = cfg_;
  if (c.data.empty()) c.data = default_data_path();
  tokens_ = std::make_unique<io::TokenShards>(io::data_specs(c.data), c.model.vocab_size, c.bin_dtype);
  // One path may name different files on different nodes: the ranks compare what they read.
  parallel::check_same_on_every_rank(tokens_->identity(), "the " + tokens_->what());
  io::SamplerConfig& sc = sampler_cfg_;
  sc.global_batch = step_rows_;  // micro-batch i takes its i-th share
  sc.context_length = c.model.context_length;
  sc.sampling = c.sampling;
  sc.seed = c.seed;
  sc.rank = rt_.rank();
  sc.world = rt_.world_size();
  if (!c.resumed.empty()) {
    check_same_data(c.resumed.info, tokens_->identity(), c.data, c.resumed.path);
    io::restore_sampler_state(c.resumed.info, sc);
    const auto w = c.resumed.info.ints.find("run.world_size");
    if (rt_.is_root() && w != c.resumed.info.ints.end() && w->second != rt_.world_size())
      std::printf("train: resuming on %d ranks a run saved by %lld: the same global batch and data order, but sums "
                  "over ranks round in another order, so losses agree closely rather than bit for bit\n",
                  rt_.world_size(), static_cast<long long>(w->second));
  }
  sampler_ = std::make_unique<io::BatchSampler>(*tokens_, sc);
}

// The validation set and this rank's rows of its batches: --val-data, or the val list of a
// --data manifest when --eval-every asks for evaluations without naming a set.
void Trainer::open_val_data() {
  TrainConfig& c = cfg_;
  if (c.val_data.empty() && c.eval_every > 0) {
    PT_CHECK(!tokens_->manifest().empty(),
             "--eval-every needs validation data: --val-data, or a --data manifest with a \"val\" list");
    c.val_data = tokens_->manifest();
  }
  if (c.val_data.empty()) return;
  val_tokens_ = std::make_unique<io::TokenShards>(io::data_specs(c.val_data), c.model.vocab_size, c.bin_dtype,
                                                  io::ShardSplit::Val);
  parallel::check_same_on_every_rank(val_tokens_->identity(), "the validation " + val_tokens_->what());
  val_batches_ = std::make_unique<io::ValidationBatches>(
      *val_tokens_, c.batch_size, c.model.context_length,
      eval_token_budget(c.eval_tokens, c.batch_size, c.model.context_length), rt_.rank(), rt_.world_size());
}

// Every file this run writes, checked (and on rank 0 taken: io::OutputLock) before any work: a
// long run never finds out at its end, and never replaces a file that is not its own.
void Trainer::take_outputs() {
  TrainConfig& c = cfg_;
  if (c.out.empty()) c.out = io::default_output_name("train");
  refuse_shared_names({c.data, c.resumed.path, c.init_from, c.save, c.out, c.log.file});
  const std::string resumed_run_id = c.resumed.empty() ? "" : run_id_of(c.resumed.info);
  run_id_ = resumed_run_id.empty() ? new_run_id() : resumed_run_id;
  rec_ = std::make_unique<TrainRecord>(c.out, c.overwrite, !c.resume.empty(), start_step_, c.resumed.path,
                                       resumed_run_id, run_id_, rt_.world_size());
  rec_->set_data(*tokens_, val_tokens_.get());
  replace_save_ = c.overwrite;
  if (!c.save.empty() && rt_.is_root()) {
    save_lock_ = std::make_unique<io::OutputLock>(c.save, "checkpoint (--save)");
    replace_save_ = check_save_target(c.save, c.overwrite, c.resumed.path, resumed_run_id);
  }
  if (!c.save_dir.empty() && rt_.is_root())
    save_dir_ = std::make_unique<CheckpointDir>(c.save_dir, c.keep_last, c.overwrite, c.resumed.path, start_step_,
                                                c.resume == "auto", run_id_);
}

int Trainer::run() {
  if (complete_) {
    log_.event("end", {{"status", std::string("completed")}, {"last_step", start_step_}},
               "train: the checkpoint " + cfg_.resumed.path + " is at step " + std::to_string(start_step_) +
                   " of --steps " + std::to_string(cfg_.steps) + ": the run is complete");
    return kExitOk;
  }
  build();
  log_start();
  train_loop();
  return finish();
}

// The context, the model (its weights from the checkpoint, --init-from or the seed), the
// communicator, the sync strategy and optimizer, the step.
void Trainer::build() {
  const TrainConfig& c = cfg_;
  fault::pause_if_asked("pause-in-start-up", "train's start-up");  // PARATRAIN_FAULT only
  ctx_ = std::make_unique<Context>(c.device, c.precision);
  Context& ctx = *ctx_;
  ctx.set_grad_dtype(c.grad_dtype);
  ctx.set_residual_dtype(c.residual_dtype);
  ctx.set_gemm_select(c.gemm);
  ctx.set_flash(c.flash);
  ctx.set_update_sms(c.update_sms);
  io::RunRecord& record = rec_->record();
  record.collect_environment(ctx);
  record.set_options(c.options);
  lm_ = std::make_unique<TransformerLM>(c.model, ctx);
  if (!c.resumed.empty())
    io::load_weights(c.resumed.path, lm_->store(), ctx);
  else if (!c.init_from.empty())
    io::load_weights(c.init_from, lm_->store(), ctx);
  else
    lm_->init_weights(ctx, c.seed);
  if (rt_.world_size() > 1)
    comm_ = parallel::make_communicator(
        parallel::backend_for(c.device), ctx, c.ddp.comm_sms,
        comm_engine_for(c.ddp.comm_engine, *c.ddp.ddp, c.ddp.shard,
                        gradients_in_bf16(ctx.grad_dtype(), c.ddp.grad_comm), rt_.world_size()));
  // Rank 0's weights become everyone's here (the strategy broadcasts them at construction).
  dp_ = make_data_parallel(ctx, lm_->store(), comm_.get(), c.ddp, optimizer_cfg_, c.update_overlap, c.cuda_graph);
  Optimizer& optimizer = *dp_.optimizer;
  PT_CHECK(c.update_sms == 0 || dynamic_cast<const DeferredUpdateOptimizer*>(&optimizer) != nullptr,
           "--update-sms keeps SMs for the update under the forward, and this run has none: it needs "
           "--update-overlap on or auto (one process, a GPU, --fused on, no --cuda-graph, no sharded optimizer)");
  // The checkpoint holds the whole optimizer state; each rank reads the part it updates.
  if (!c.resumed.empty()) {
    io::load_optimizer_state(c.resumed.path, optimizer, ctx, lm_->store().grad_numel());
    // train makes one update a step (a skipped non-finite step counts too): the counts agree.
    PT_CHECK(optimizer.steps_taken() == start_step_,
             "--resume " + c.resumed.path + ": the optimizer's 'step' (" + std::to_string(optimizer.steps_taken()) +
                 " updates) differs from the run's 'step' (" + std::to_string(start_step_) +
                 "); train makes one update a step, so the file is damaged or pieced together");
  }
  step_fn_ = std::make_unique<TrainStep>(*lm_, optimizer, *dp_.sync, static_cast<float>(c.grad_clip));
  if (c.cuda_graph) step_fn_->enable_cuda_graph(ctx);
  injected_fault_ = std::make_unique<NanGradInjector>(ctx, lm_->store());  // PARATRAIN_FAULT=nan-grad:STEP:PARAM only
  record.set_attr("model.parameters", lm_->config().num_params());
  record.set_attr("model.attention", std::string(attention_impl_name(c.model.attention)));
}

void Trainer::log_start() {
  const TrainConfig& c = cfg_;
  // MFU counts the model's FLOPs (bench model's count: recomputation is not useful work) against
  // the dense peak of one device for the precision, bf16's for fp8 (mfu_peaks); none on the CPU
  // unless --peak-tflops gives one.
  peak_tflops_ = mfu_peaks(c.device, c.precision, c.peak_tflops).peak.tflops;
  flops_per_step_ = c.model.train_flops_per_token(c.model.context_length) * tokens_per_step();
  const std::string banner =
      "train: " + c.model_name + " (" + std::to_string(c.model.num_params()) + " parameters) on " +
      std::to_string(rt_.world_size()) + " × " + (c.device_banner.empty() ? c.device.str() : c.device_banner) + ", " +
      precision_name(c.precision) + ", " + attention_impl_name(c.model.attention) + " attention, ddp " +
      c.ddp.ddp->name + ", sharding " + shard_mode_name(c.ddp.shard) + ", grad comm " +
      parallel::grad_comm_name(c.ddp.grad_comm) +
      (dynamic_cast<DeferredUpdateOptimizer*>(dp_.optimizer.get()) ? ", update under the next forward" : "") +
      ", batch " + std::to_string(c.batch_size) + " × " + std::to_string(c.model.context_length) + " tokens" +
      (c.grad_accum > 1 ? " × " + std::to_string(c.grad_accum) + " micro-batches" : "") + ", " +
      io::sampling_name(c.sampling) + " sampling of " + c.data + " (" + std::to_string(tokens_->size()) + " tokens)" +
      (val_batches_
           ? "; validation loss on " + std::to_string(val_batches_->count()) + " batches of " + c.val_data +
                 (c.eval_every > 0 ? " every " + std::to_string(c.eval_every) + " steps and" : "") + " at the end"
           : "") +
      (c.resumed.empty() ? "" : "; resuming " + c.resumed.path + " after step " + std::to_string(start_step_)) +
      (c.resumed.empty() && c.resume == "auto" ? "; --resume auto found no checkpoint: starting afresh" : "");
  log_.event("start",
             {{"command", std::string("train")},
              {"model", c.model_name},
              {"parameters", c.model.num_params()},
              {"world_size", static_cast<int64_t>(rt_.world_size())},
              {"device", c.device.str()},
              {"precision", std::string(precision_name(c.precision))},
              {"steps", c.steps},
              {"start_step", start_step_},
              {"resumed_from", c.resumed.path},
              {"out", rec_->path()},
              {"save", c.save.empty() ? c.save_dir : c.save},
              {"flops_per_step", flops_per_step_},
              {"peak_tflops", peak_tflops_ > 0 ? peak_tflops_ : NAN}},
             banner);
}

void Trainer::train_loop() {
  const int64_t local_rows = sampler_->local_batch();
  h_ids_ = Tensor::empty({local_rows, cfg_.model.context_length}, DType::I32, Device::cpu(), "batch_ids");
  h_tg_ = Tensor::empty({local_rows, cfg_.model.context_length}, DType::I32, Device::cpu(), "batch_targets");
  eta_ = std::make_unique<io::Eta>(start_step_, cfg_.steps);
  // Start-up ends here. Until now a signal ended the process at once (nothing to save, and
  // start-up may be blocked); from here a first SIGTERM/SIGINT/SIGUSR1/SIGHUP asks for a stop at
  // the next step boundary, a second ends it at once (core/interrupt.h).
  raise_injected_signal(0, rt_.is_root());  // PARATRAIN_FAULT=signal:0:NAME only
  const interrupt::GracefulScope graceful;
  try {
    // A run stopped right after a step due for evaluation skipped it: its resume makes it up.
    const bool eval_due = val_batches_ && cfg_.eval_every > 0 && start_step_ % cfg_.eval_every == 0;
    if (eval_due && start_step_ > 0 && !rec_->has_eval(start_step_)) run_eval(start_step_);
    for (int64_t s = start_step_; s < cfg_.steps; ++s) {
      if (train_step(s) || after_step(s)) {
        stopped_ = true;
        stopped_after_ = s + 1;
        break;
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    fail(e, "");
  }
  if (saves() && saved_step_ != last_step_) {
    try {
      save_checkpoint(last_step_);
    } catch (const std::exception& e) {
      fail(e, "final checkpoint: ");  // the steps ran: their record is kept
    }
  }
}

bool Trainer::train_step(int64_t s) {
  const TrainConfig& c = cfg_;
  Context& ctx = *ctx_;
  const auto t0 = std::chrono::steady_clock::now();
  sampler_->fill(s, h_ids_.data_as<int32_t>(), h_tg_.data_as<int32_t>());
  Tensor ids = c.device.is_cuda() ? h_ids_.to(c.device, ctx) : h_ids_;
  Tensor tg = c.device.is_cuda() ? h_tg_.to(c.device, ctx) : h_tg_;
  const double lr = cosine_lr(s + 1, c.lr, min_lr_, c.warmup_steps, cosine_steps_);
  injected_fault_->before_step(s + 1);
  StepOutputs out = step_fn_->run(ctx, ids, tg, static_cast<float>(lr), static_cast<int>(c.grad_accum));
  raise_injected_signal(s + 1, rt_.is_root());  // PARATRAIN_FAULT=signal:STEP:NAME only
  const StepConsensus agreed = agree_after_step(out.loss.to_host_f64(ctx)[0], stop_wanted(log_));
  const double loss = agreed.mean_loss;  // waits for the step
  const double gnorm = std::sqrt(out.grad_sumsq.to_host_f64(ctx)[0]);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // The row first: a step that stops the run is in the record too.
  rec_->add_step(s + 1, loss, lr, gnorm, ms, tokens_per_step() / (ms * 1e-3));
  last_step_ = s + 1;
  eta_->unit_done();
  check_finite(s, loss, gnorm, lr);
  if (std::isfinite(loss)) last_loss_ = loss;
  if ((s + 1) % c.log_every == 0 || s + 1 == c.steps) log_step(s, loss, lr, gnorm, ms);
  return agreed.stop && s + 1 < c.steps;
}

void Trainer::check_finite(int64_t s, double loss, double gnorm, double lr) {
  if (std::isfinite(loss) && std::isfinite(gnorm)) return;
  // The update read the same norm and changed nothing (GradClip's guard).
  const ParamStore::NonFinite bad = lm_->store().first_nonfinite(*ctx_, /*grads=*/true);
  const std::string what =
      "step " + std::to_string(s + 1) + ": the loss is " + std::to_string(loss) + " and the gradient norm " +
      std::to_string(gnorm) +
      (bad.param ? "; the first non-finite gradient is '" + bad.param->name + "' (" + std::to_string(bad.value) + ")"
                 : std::string()) +
      ". The update was not applied";
  const std::string advice =
      nonfinite_advice(s + 1, start_step_ + 1, !cfg_.resumed.empty() || !cfg_.init_from.empty(), lr, cfg_.grad_clip);
  if (cfg_.on_nonfinite == OnNonFinite::Stop)
    PT_FAIL(what + ": the parameters are those after step " + std::to_string(s) + "; " + advice);
  if (rt_.is_root()) std::printf("warning: %s (--on-nonfinite skip; %s)\n", what.c_str(), advice.c_str());
}

void Trainer::log_step(int64_t s, double loss, double lr, double gnorm, double ms) {
  const double elapsed = log_.elapsed_s();
  const double tokens_per_s = tokens_per_step() / (ms * 1e-3);
  // Per device: each rank computes its share of the step's FLOPs in the step's time.
  const double mfu = peak_tflops_ > 0 ? flops_per_step_ / rt_.world_size() / (ms * 1e-3) / (peak_tflops_ * 1e12) : NAN;
  const MemoryStats mem = TrackingAllocator::instance().stats(cfg_.device.kind);  // this rank's (rank 0)
  char mfu_text[48] = "";
  if (std::isfinite(mfu))
    std::snprintf(mfu_text, sizeof mfu_text, " | MFU %.1f%%%s", mfu * 100,
                  cfg_.precision == Precision::FP8 ? " of the bf16 peak" : "");
  char line[320];
  std::snprintf(line, sizeof line,
                "step %6lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %8.0f tok/s | %.1f ms%s | mem %s | %s",
                static_cast<long long>(s + 1), static_cast<long long>(cfg_.steps), loss, lr, gnorm, tokens_per_s, ms,
                mfu_text, memory_text(mem.in_use, mem.peak).c_str(), eta_->text(elapsed).c_str());
  log_.event("step",
             {{"step", s + 1},
              {"steps", cfg_.steps},
              {"loss", loss},
              {"lr", lr},
              {"grad_norm", gnorm},
              {"step_ms", ms},
              {"tokens_per_s", tokens_per_s},
              {"mfu", mfu},
              {"memory_bytes", mem.in_use},
              {"memory_peak_bytes", mem.peak},
              {"eta_s", eta_->eta_s(elapsed)}},
             line);
}

// The work every N steps, after a step that did not stop the run: each kind of periodic work
// with its own interval. The evaluation comes first, so the record committed with a checkpoint
// holds it.
bool Trainer::after_step(int64_t s) {
  const int64_t done = s + 1;
  if (val_batches_ && ((cfg_.eval_every > 0 && done % cfg_.eval_every == 0) || done == cfg_.steps)) run_eval(done);
  if (cfg_.save_every > 0 && done % cfg_.save_every == 0 && done < cfg_.steps) {
    save_checkpoint(done);
    rec_->commit("running", last_step_, last_loss_);
    // A signal during that write stops the run here, on the checkpoint just written.
    if (agree_after_step(0, stop_wanted(log_)).stop) return true;
  }
  return false;
}

void Trainer::save_checkpoint(int64_t steps_done) {
  const TrainConfig& c = cfg_;
  const TransformerConfig& m = c.model;
  io::CheckpointInfo info;
  info.step = steps_done;
  info.ints = {{"model.vocab_size", m.vocab_size},
               {"model.context_length", m.context_length},
               {"model.d_model", m.d_model},
               {"model.num_layers", m.num_layers},
               {"model.num_heads", m.num_heads},
               {"model.d_ff", m.d_ff},
               {"run.world_size", static_cast<int64_t>(rt_.world_size())}};
  info.reals = {{"model.rope_theta", m.rope_theta}};
  io::add_sampler_state(info, sampler_cfg_);
  add_run_config(info, c.options);
  info.text["config.cosine-steps"] = std::to_string(cosine_steps_);  // resolved: a resumed run keeps it
  info.text["config.data"] = c.data;  // the resolved path (the default when --data was left out)
  info.text["data.identity"] = tokens_->identity();
  info.text["run.id"] = run_id_;
  // Every rank takes part: a sharded optimizer's state is gathered to rank 0.
  Optimizer& optimizer = *dp_.optimizer;
  const WholeOptimizerState state =
      gather_optimizer_state(optimizer, *ctx_, lm_->store().grad_numel(), c.ddp.shard == ShardMode::None);
  // A step checkpoint of --save-dir replaces what CheckpointDir let the run replace at start-up.
  const std::string path =
      c.save_dir.empty() ? c.save : (std::filesystem::path(c.save_dir) / step_checkpoint_name(steps_done)).string();
  if (rt_.is_root()) {
    io::save_checkpoint(path, lm_->store(), *ctx_, &optimizer.config(), &state, info,
                        replace_save_ || save_dir_ != nullptr);
    if (save_dir_) save_dir_->saved(steps_done);
  }
  replace_save_ = true;  // the file is this run's now
  saved_step_ = steps_done;
  saved_path_ = path;
  log_.event("checkpoint", {{"step", steps_done}, {"path", path}}, "");
}

void Trainer::run_eval(int64_t steps_done) {
  const EvalResult r = evaluate(*lm_, *ctx_, *val_batches_);
  rec_->add_eval(steps_done, r.loss, r.tokens, r.ms);
  char line[192];
  std::snprintf(line, sizeof line, "eval %6lld/%lld | val loss %.4f | %lld tokens in %lld batches | %.1f ms",
                static_cast<long long>(steps_done), static_cast<long long>(cfg_.steps), r.loss,
                static_cast<long long>(r.tokens), static_cast<long long>(r.batches), r.ms);
  log_.event(
      "eval",
      {{"step", steps_done}, {"val_loss", r.loss}, {"tokens", r.tokens}, {"batches", r.batches}, {"eval_ms", r.ms}},
      line);
}

// Called while `e` is being handled: keeps what was measured (the record of the completed steps,
// marked as failed) and rethrows e. A record or log that cannot be written either (the same
// full disk) is named in the one error, after e.
void Trainer::fail(const std::exception& e, const std::string& during) {
  const std::string why = error_text(e), status = "failed: " + during + why;
  const std::string also =
      also_failed(
          [&] {
            log_.event("end", {{"status", status}, {"last_step", last_step_}, {"final_loss", last_loss_}}, "");
          },
          why) +
      also_failed([&] { rec_->commit(status, last_step_, last_loss_); }, why);
  if (!also.empty()) PT_FAIL(why + also);
  throw;
}

int Trainer::finish() {
  const TrainConfig& c = cfg_;
  const std::string stdout_failure = log_.stdout_failure();
  const std::string stop_reason = interrupt::requested() ? interrupt::signal_name(interrupt::requested())
                                  : !stdout_failure.empty()
                                      ? "a write error on standard output (" + stdout_failure + ")"
                                      : std::string("a signal on another rank");
  const std::string status = stopped_ ? "interrupted: " + stop_reason + " after step " +
                                            std::to_string(stopped_after_) + " of " + std::to_string(c.steps)
                                      : std::string("completed");
  rec_->commit(status, last_step_, last_loss_);
  std::string summary;
  if (stopped_)
    summary = "stopped by " + stop_reason + " after step " + std::to_string(stopped_after_) + " of " +
              std::to_string(c.steps) + "\n";
  summary += "results: " + rec_->path() + (saved_path_.empty() ? "" : ", checkpoint: " + saved_path_);
  if (stopped_ && !c.save.empty()) summary += "\ncontinue with: --resume " + c.save + " (or --resume auto)";
  if (stopped_ && !c.save_dir.empty()) summary += "\ncontinue with: --resume auto --save-dir " + c.save_dir;
  log_.event("end",
             {{"status", status},
              {"last_step", last_step_},
              {"final_loss", last_loss_},
              {"out", rec_->path()},
              {"save", c.save_dir.empty() ? c.save : saved_path_},
              {"exit_code", static_cast<int64_t>(stopped_ ? kExitStopped : kExitOk)}},
             summary);
  // Standard output has gone: the summary (where the results are, how to continue) goes to stderr.
  if (!stdout_failure.empty()) std::fprintf(stderr, "paratrain: %s\n", summary.c_str());
  return stopped_ ? kExitStopped : kExitOk;
}

}  // namespace pt::train
