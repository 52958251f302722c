// `paratrain train`: train the Transformer LM on a token file, one rank per GPU (or CPU ranks),
// with a progress line per step and every step's figures in the run's HDF5 file.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>

#include "cli/ddp_options.h"
#include "cli/options.h"
#include "cli/run_log.h"
#include "cli/subcommands.h"
#include "cli/train_outputs.h"
#include "cli/train_record.h"
#include "cli/train_resume.h"
#include "core/build_info.h"
#include "core/context.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/fault_injection.h"
#include "core/interrupt.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/input_file.h"
#include "io/token_data.h"
#include "model/transformer.h"
#include "optim/deferred_update.h"
#include "optim/optimizer_state.h"
#include "optim/sharded_optimizer.h"
#include "parallel/communicator.h"
#include "parallel/grad_sync.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"
#include "train/injected_faults.h"
#include "train/train_step.h"

namespace pt::cli {

namespace {

struct TrainOptions {
  std::string model = "tiny";
  int64_t d_model = 0, num_layers = 0, num_heads = 0, d_ff = 0;  // 0: from --model
  int64_t vocab_size = 10000;
  int64_t context_length = 128;
  std::string attention = "auto";
  std::string recompute = "on";
  std::string fused = "on";
  std::string cuda_graph = "off";
  std::string update_overlap = "auto";
  int update_sms = 0;
  std::string data;
  std::string sampling = "random";
  std::string bin_dtype = "uint16";
  int64_t batch_size = 16;
  int64_t grad_accum = 1;
  int64_t steps = 200;
  std::string optimizer = "adamw";
  double lr = 3e-3, min_lr = -1, weight_decay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t warmup_steps = 20, cosine_steps = 0;
  double grad_clip = 1.0;
  std::string save, init_from, resume;
  int64_t save_every = 0;
  int64_t log_every = 1;
  std::string on_nonfinite = "stop";
};

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

int train(const std::vector<std::string>& args, AdoptedOptions& adopted_from) {
  TrainOptions t;
  RunOptions run;
  DdpOptions ddp_opt;
  po::options_description model("Model"), data("Data"), optim("Optimisation"), ckpt("Checkpoints"),
      parallel("Data parallelism (mpirun/srun -n N: one rank per GPU)"), general("Run");
  // clang-format off
  model.add_options()
      ("model", po::value(&t.model)->default_value(t.model), "named size: tiny small medium large xl 2.7b")
      ("d-model", po::value(&t.d_model), "override the size's d_model")
      ("num-layers", po::value(&t.num_layers), "override the size's layer count")
      ("num-heads", po::value(&t.num_heads), "override the size's head count")
      ("d-ff", po::value(&t.d_ff), "override the size's feed-forward width")
      ("vocab-size", po::value(&t.vocab_size)->default_value(t.vocab_size), "vocabulary size (token ids must be below it)")
      ("context-length", po::value(&t.context_length)->default_value(t.context_length), "sequence length T")
      ("attention", po::value(&t.attention)->default_value(t.attention),
       "naive | flash | auto (flash on the GPU, naive on the CPU)")
      ("recompute", po::value(&t.recompute)->default_value(t.recompute), kRecomputeHelp)
      ("fused", po::value(&t.fused)->default_value(t.fused), kFusedHelp)
      ("cuda-graph", po::value(&t.cuda_graph)->default_value(t.cuda_graph), kCudaGraphHelp)
      ("update-overlap", po::value(&t.update_overlap)->default_value(t.update_overlap), kUpdateOverlapHelp)
      ("update-sms", po::value(&t.update_sms)->default_value(t.update_sms), kUpdateSmsHelp);
  data.add_options()
      ("data", po::value(&t.data), "token file: .npy, llm.c's .bin, or a headerless .bin of raw tokens "
                                   "(default: data/sample_tokens.npy)")
      ("bin-dtype", po::value(&t.bin_dtype)->default_value(t.bin_dtype),
       "uint16 | uint32: the tokens of a headerless .bin (nanoGPT writes uint16)")
      ("sampling", po::value(&t.sampling)->default_value(t.sampling),
       "random (seeded random windows) | sequential (consecutive windows, deterministic)")
      ("batch-size", po::value(&t.batch_size)->default_value(t.batch_size),
       "global batch in sequences (of one micro-batch with --grad-accum); each rank takes its contiguous slice")
      ("grad-accum", po::value(&t.grad_accum)->default_value(t.grad_accum),
       "micro-batches of --batch-size per optimizer step, added into one update; gradients sync in "
       "the last only");
  optim.add_options()
      ("steps", po::value(&t.steps)->default_value(t.steps), "total training steps")
      ("optimizer", po::value(&t.optimizer)->default_value(t.optimizer), "adamw | sgd")
      ("lr", po::value(&t.lr)->default_value(t.lr), "peak learning rate")
      ("min-lr", po::value(&t.min_lr)->default_value(t.min_lr), "final learning rate (default lr/10)")
      ("warmup-steps", po::value(&t.warmup_steps)->default_value(t.warmup_steps), "linear warm-up steps")
      ("cosine-steps", po::value(&t.cosine_steps)->default_value(t.cosine_steps),
       "end of the cosine decay (0: --steps); a resumed run keeps its checkpoint's unless this is given "
       "again (a warning says so)")
      ("weight-decay", po::value(&t.weight_decay)->default_value(t.weight_decay), "AdamW/SGD weight decay")
      ("beta1", po::value(&t.beta1)->default_value(t.beta1), "AdamW beta1")
      ("beta2", po::value(&t.beta2)->default_value(t.beta2), "AdamW beta2")
      ("eps", po::value(&t.eps)->default_value(t.eps), "AdamW epsilon")
      ("grad-clip", po::value(&t.grad_clip)->default_value(t.grad_clip),
       "global gradient-norm clip (0 disables)")
      ("on-nonfinite", po::value(&t.on_nonfinite)->default_value(t.on_nonfinite),
       "a NaN or infinite loss or gradient norm never updates the weights: stop ends the run "
       "(exit 1), skip goes on");
  ckpt.add_options()
      ("save", po::value(&t.save), "write a checkpoint (HDF5) here at the end, and when a signal or a "
                                 "closed stdout stops the run early")
      ("save-every", po::value(&t.save_every)->default_value(0), "also every N steps (needs --save; 0: only at the end)")
      ("init-from", po::value(&t.init_from), "start from this checkpoint's weights (a PyTorch state_dict "
                                             "saved with h5py in the same layout loads too)")
      ("resume", po::value(&t.resume),
       "continue the run in this checkpoint exactly (options given again must agree); auto: --save "
       "if it exists");
  add_ddp_options(parallel, ddp_opt);
  general.add_options()("log-every", po::value(&t.log_every)->default_value(t.log_every),
                        "progress line every N steps (rank 0)");
  // clang-format on
  LogOptions log_opt;
  add_log_options(general, log_opt);
  add_run_options(general, run, "fp32");
  add_storage_dtype_options(general, run);
  add_gemm_option(general, run);
  add_flash_options(general, run);
  po::options_description desc("paratrain train options");
  desc.add(model).add(data).add(optim).add(ckpt).add(parallel).add(general);
  const std::string usage = "paratrain train [options]   (mpirun -np N paratrain train ... for data parallelism)";
  auto vm = parse_or_help(desc, args, usage);
  if (!vm) return 0;
  const bool cosine_given = vm->count("cosine-steps") && !(*vm)["cosine-steps"].defaulted();

  // ---- --resume: the checkpoint's configuration for every option not given again ---------------
  auto& rt = parallel::Runtime::get();
  PT_CHECK(t.init_from.empty() || t.resume.empty(), "--init-from and --resume contradict each other: pick one");
  std::string resume_from;  // the checkpoint this run continues; "" for a fresh start
  io::CheckpointInfo resumed;
  if (!t.resume.empty()) {
    resume_from = resume_path(t.resume, t.save);
    // Every rank must make the same choice (a --save on a file system the nodes do not share).
    if (t.resume == "auto")
      check_same_on_every_rank(resume_from.empty() ? "absent" : "present",
                               "whether the checkpoint " + t.save + " exists (--resume auto)");
    if (!resume_from.empty()) {
      resumed = io::read_checkpoint_info(resume_from);
      const std::vector<std::string> adopted = options_from_checkpoint(desc, *vm, resumed, resume_from);
      if (!adopted.empty()) {
        adopted_from.set(resume_from, adopted);
        std::vector<std::string> all = args;
        all.insert(all.end(), adopted.begin(), adopted.end());
        try {
          vm = parse_or_help(desc, all, usage);
        } catch (const std::exception& e) {
          // The command line parsed; so what fails is a value the checkpoint holds.
          adopted_from.blame_checkpoint(e);
          PT_FAIL("--resume " + resume_from +
                  ": a config.* attribute of the checkpoint is not usable: " + error_text(e));
        }
      }
    }
  }
  if (!t.init_from.empty())  // read after the build: refused now if it can never be read
    io::require_regular_file(t.init_from, "--init-from '" + t.init_from + "'", "a checkpoint");
  RunLog log(log_opt, rt.is_root());
  const int64_t start_step = resume_from.empty() ? 0 : resumed.step;
  if (!resume_from.empty() && start_step >= t.steps) {
    // A requeued job whose run had already finished has nothing to do; asking for that by hand is
    // a mistake worth an error.
    PT_CHECK(t.resume == "auto", "--resume: the checkpoint is at step " + std::to_string(start_step) +
                                     ", nothing left to do for --steps " + std::to_string(t.steps));
    log.event("end", {{"status", std::string("completed")}, {"last_step", start_step}},
              "train: the checkpoint " + resume_from + " is at step " + std::to_string(start_step) + " of --steps " +
                  std::to_string(t.steps) + ": the run is complete");
    return kExitOk;
  }

  // ---- validate everything before any work -------------------------------------------------
  PT_CHECK(t.steps >= 1, "--steps must be at least 1");
  PT_CHECK(t.batch_size >= 1, "--batch-size must be at least 1");
  PT_CHECK(t.log_every >= 1, "--log-every must be at least 1");
  PT_CHECK(t.lr > 0, "--lr must be positive");
  PT_CHECK(t.warmup_steps >= 0 && t.save_every >= 0, "--warmup-steps and --save-every must be non-negative");
  PT_CHECK(t.save_every == 0 || !t.save.empty(), "--save-every needs --save FILE");
  PT_CHECK(t.batch_size % rt.world_size() == 0, "--batch-size " + std::to_string(t.batch_size) +
                                                    " is not divisible by the " + std::to_string(rt.world_size()) +
                                                    " ranks");
  const DdpOptions ddp = resolve_ddp_options(ddp_opt, rt.world_size());
  const Precision precision = precision_from_name(run.precision);
  const Device device = resolve_device(run);
  PT_CHECK(!(precision == Precision::BF16 && device.is_cpu()), "--precision bf16 needs a GPU");
  const DType grad_dtype = grad_dtype_for_precision(run);
  const DType residual_dtype = residual_dtype_for_precision(run);
  TransformerConfig cfg = TransformerConfig::named(t.model);
  if (t.d_model) cfg.d_model = t.d_model;
  if (t.num_layers) cfg.num_layers = t.num_layers;
  if (t.num_heads) cfg.num_heads = t.num_heads;
  if (t.d_ff) cfg.d_ff = t.d_ff;
  cfg.vocab_size = t.vocab_size;
  cfg.context_length = t.context_length;
  const std::string attn = t.attention == "auto" ? (device.is_cuda() ? "flash" : "naive") : t.attention;
  cfg.attention = attention_impl_from_name(attn);
  cfg.recompute = recompute_from_name(t.recompute);
  cfg.fused = parse_on_off(t.fused, "fused");
  try {
    cfg.validate();
  } catch (const std::exception& e) {
    if (resume_from.empty()) throw;
    PT_FAIL("--resume " + resume_from + ": the checkpoint's model configuration is not usable: " + error_text(e));
  }
  int64_t step_rows = 0;  // sequences per step: grad-accum micro-batches of --batch-size
  PT_CHECK(!__builtin_mul_overflow(t.batch_size, t.grad_accum, &step_rows),
           "--batch-size " + std::to_string(t.batch_size) + " × --grad-accum " + std::to_string(t.grad_accum) +
               " sequences per step is too many to count");
  // Before anything is built or read: an absurd size fails here, at once.
  check_memory_floor(cfg, t.batch_size / rt.world_size(), dtype_size(grad_dtype),
                     precision == Precision::BF16 && device.is_cuda(), device,
                     resume_from.empty()
                         ? "the size comes from --num-layers, --d-model, --d-ff, --vocab-size, --batch-size and "
                           "--context-length"
                         : "the size comes from the configuration of the checkpoint " + resume_from);
  const bool use_graph = parse_on_off(t.cuda_graph, "cuda-graph");
  PT_CHECK(!use_graph || device.is_cuda(), "--cuda-graph on needs a GPU (this run is on the CPU)");
  PT_CHECK(!use_graph || rt.world_size() == 1,
           "--cuda-graph on cannot capture data parallelism yet: run one process, or --cuda-graph off");
  const UpdateOverlap update_overlap = update_overlap_from_name(t.update_overlap);
  if (shard_mode_from_name(ddp.shard) == ShardMode::None)
    defers_update(update_overlap, device.is_cuda(), cfg.fused, use_graph);  // refuses `on` where it cannot run
  OptimizerConfig oc;
  oc.kind = optimizer_kind_from_name(t.optimizer);
  oc.adamw.lr = static_cast<float>(t.lr);
  oc.adamw.beta1 = static_cast<float>(t.beta1);
  oc.adamw.beta2 = static_cast<float>(t.beta2);
  oc.adamw.eps = static_cast<float>(t.eps);
  oc.adamw.weight_decay = static_cast<float>(t.weight_decay);
  oc.sgd_weight_decay = static_cast<float>(t.weight_decay);
  oc.fused = cfg.fused;
  const double min_lr = t.min_lr < 0 ? t.lr / 10 : t.min_lr;
  PT_CHECK(min_lr <= t.lr, "--min-lr " + std::to_string(t.min_lr) + " is above --lr " + std::to_string(t.lr) +
                               ": the schedule decays from --lr down to --min-lr");
  const ScheduleLength schedule =
      schedule_length(t.cosine_steps, cosine_given, t.steps, resume_from.empty() ? nullptr : &resumed);
  const int64_t cosine_steps = schedule.steps;
  if (rt.is_root() && !resume_from.empty()) {
    const std::string note = schedule_notice(schedule, start_step, t.steps, resumed, [&](int64_t step, int64_t end) {
      return cosine_lr(step, t.lr, min_lr, t.warmup_steps, end);
    });
    if (!note.empty()) std::fprintf(stderr, "paratrain: %s\n", note.c_str());
  }
  if (t.data.empty()) t.data = default_data_path();
  PT_CHECK(t.on_nonfinite == "stop" || t.on_nonfinite == "skip",
           "--on-nonfinite must be stop or skip, not '" + t.on_nonfinite + "'");

  io::TokenFile tokens(t.data, cfg.vocab_size, io::bin_tokens_from_name(t.bin_dtype));
  // One path may name different files on different nodes: the ranks compare what they read.
  check_same_on_every_rank(tokens.identity(), "the token file '" + t.data + "'");
  io::SamplerConfig sc;
  sc.global_batch = step_rows;  // micro-batch i takes its i-th share
  sc.context_length = cfg.context_length;
  sc.sampling = io::sampling_from_name(t.sampling);
  sc.seed = run.seed;
  sc.rank = rt.rank();
  sc.world = rt.world_size();
  if (!resume_from.empty()) {
    check_same_data(resumed, tokens.identity(), t.data, resume_from);
    io::restore_sampler_state(resumed, sc);
    const auto w = resumed.ints.find("run.world_size");
    if (rt.is_root() && w != resumed.ints.end() && w->second != rt.world_size())
      std::printf("train: resuming on %d ranks a run saved by %lld: the same global batch and data order, but sums "
                  "over ranks round in another order, so losses agree closely rather than bit for bit\n",
                  rt.world_size(), static_cast<long long>(w->second));
  }
  io::BatchSampler sampler(tokens, sc);
  // Every file this run writes, checked (and on rank 0 taken: io::OutputLock) before any work: a
  // long run never finds out at its end, and never replaces a file that is not its own.
  const std::string out = run.out.empty() ? io::default_output_name("train") : run.out;
  refuse_shared_names({t.data, resume_from, t.init_from, t.save, out, log_opt.file});
  const std::string resumed_run_id = resume_from.empty() ? "" : run_id_of(resumed);
  const std::string run_id = resumed_run_id.empty() ? new_run_id() : resumed_run_id;
  TrainRecord rec(out, run.overwrite, !t.resume.empty(), start_step, resume_from, resumed_run_id, run_id,
                  rt.world_size());
  std::unique_ptr<io::OutputLock> save_lock;
  bool replace_save = run.overwrite;  // whether the first checkpoint may replace a file at --save
  if (!t.save.empty() && rt.is_root()) {
    save_lock = std::make_unique<io::OutputLock>(t.save, "checkpoint (--save)");
    replace_save = check_save_target(t.save, run.overwrite, resume_from, resumed_run_id);
  }

  // ---- build ---------------------------------------------------------------------------------
  adopted_from.clear();                                            // errors from here on name their own files
  fault::pause_if_asked("pause-in-start-up", "train's start-up");  // PARATRAIN_FAULT only
  Context ctx(device, precision);
  ctx.set_grad_dtype(grad_dtype);
  ctx.set_residual_dtype(residual_dtype);
  apply_gemm_option(ctx, run);
  apply_flash_options(ctx, run);
  ctx.set_update_sms(t.update_sms);
  io::RunRecord& record = rec.record();
  record.collect_environment(ctx);
  record.set_options(options_as_strings(*vm));
  TransformerLM lm(cfg, ctx);
  if (!resume_from.empty())
    io::load_weights(resume_from, lm.store(), ctx);
  else if (!t.init_from.empty())
    io::load_weights(t.init_from, lm.store(), ctx);
  else
    lm.init_weights(ctx, run.seed);
  std::unique_ptr<parallel::Communicator> comm;
  if (rt.world_size() > 1)
    comm = parallel::make_communicator(parallel::backend_for(device), ctx, parse_comm_sms(ddp.comm_sms),
                                       parallel::comm_engine_from_name(ddp.comm_engine));
  // Rank 0's weights become everyone's here (the strategy broadcasts them at construction).
  DataParallel dp =
      make_data_parallel(ctx, lm.store(), comm.get(), ddp.ddp, ddp.bucket_mb, shard_mode_from_name(ddp.shard), oc,
                         parallel::grad_comm_from_name(ddp.grad_comm),
                         parse_on_off(ddp.zero1_prefetch, "zero1-prefetch"), update_overlap, use_graph);
  Optimizer* optimizer = dp.optimizer.get();
  PT_CHECK(t.update_sms == 0 || dynamic_cast<const DeferredUpdateOptimizer*>(optimizer) != nullptr,
           "--update-sms keeps SMs for the update under the forward, and this run has none: it needs "
           "--update-overlap on or auto (one process, a GPU, --fused on, no --cuda-graph, no sharded optimizer)");
  // The checkpoint holds the whole optimizer state; each rank reads the part it updates.
  if (!resume_from.empty()) {
    io::load_optimizer_state(resume_from, *optimizer, ctx, lm.store().grad_numel());
    // train makes one update a step (a skipped non-finite step counts too): the counts agree.
    PT_CHECK(optimizer->steps_taken() == start_step,
             "--resume " + resume_from + ": the optimizer's 'step' (" + std::to_string(optimizer->steps_taken()) +
                 " updates) differs from the run's 'step' (" + std::to_string(start_step) +
                 "); train makes one update a step, so the file is damaged or pieced together");
  }
  TrainStep step_fn(lm, *optimizer, *dp.sync, static_cast<float>(t.grad_clip));
  if (use_graph) step_fn.enable_cuda_graph(ctx);
  NanGradInjector injected_fault(ctx, lm.store());  // PARATRAIN_FAULT=nan-grad:STEP:PARAM only

  record.set_attr("model.parameters", lm.config().num_params());
  record.set_attr("model.attention", std::string(attention_impl_name(cfg.attention)));
  auto save = [&](int64_t steps_done) {
    io::CheckpointInfo info;
    info.step = steps_done;
    info.ints = {{"model.vocab_size", cfg.vocab_size},
                 {"model.context_length", cfg.context_length},
                 {"model.d_model", cfg.d_model},
                 {"model.num_layers", cfg.num_layers},
                 {"model.num_heads", cfg.num_heads},
                 {"model.d_ff", cfg.d_ff},
                 {"run.world_size", static_cast<int64_t>(rt.world_size())}};
    info.reals = {{"model.rope_theta", cfg.rope_theta}};
    io::add_sampler_state(info, sc);
    add_run_config(info, *vm);
    info.text["config.cosine-steps"] = std::to_string(cosine_steps);  // resolved: a resumed run keeps it
    info.text["config.data"] = t.data;  // the resolved path (the default when --data was left out)
    info.text["data.identity"] = tokens.identity();
    info.text["run.id"] = run_id;
    // Every rank takes part: a sharded optimizer's state is gathered to rank 0.
    const WholeOptimizerState state =
        gather_optimizer_state(*optimizer, ctx, lm.store().grad_numel(), ddp.shard == "none");
    if (rt.is_root()) io::save_checkpoint(t.save, lm.store(), ctx, &optimizer->config(), &state, info, replace_save);
    replace_save = true;  // the file is this run's now
    log.event("checkpoint", {{"step", steps_done}, {"path", t.save}}, "");
  };

  const std::string banner =
      "train: " + t.model + " (" + std::to_string(cfg.num_params()) + " parameters) on " +
      std::to_string(rt.world_size()) + " × " + device_banner(device, run) + ", " + precision_name(precision) + ", " +
      attn + " attention, ddp " + ddp.ddp + ", sharding " + ddp.shard + ", grad comm " + ddp.grad_comm +
      (dynamic_cast<DeferredUpdateOptimizer*>(optimizer) ? ", update under the next forward" : "") + ", batch " +
      std::to_string(t.batch_size) + " × " + std::to_string(cfg.context_length) + " tokens" +
      (t.grad_accum > 1 ? " × " + std::to_string(t.grad_accum) + " micro-batches" : "") + ", " + t.sampling +
      " sampling of " + t.data + " (" + std::to_string(tokens.size()) + " tokens)" +
      (resume_from.empty() ? "" : "; resuming " + resume_from + " after step " + std::to_string(start_step));
  log.event("start",
            {{"command", std::string("train")},
             {"model", t.model},
             {"parameters", cfg.num_params()},
             {"world_size", static_cast<int64_t>(rt.world_size())},
             {"device", device.str()},
             {"precision", std::string(precision_name(precision))},
             {"steps", t.steps},
             {"start_step", start_step},
             {"resumed_from", resume_from},
             {"out", rec.path()},
             {"save", t.save}},
            banner);

  // ---- train ---------------------------------------------------------------------------------
  const int64_t local_rows = sampler.local_batch();
  Tensor h_ids = Tensor::empty({local_rows, cfg.context_length}, DType::I32, Device::cpu(), "batch_ids");
  Tensor h_tg = Tensor::empty({local_rows, cfg.context_length}, DType::I32, Device::cpu(), "batch_targets");
  const double tokens_per_step = static_cast<double>(step_rows) * static_cast<double>(cfg.context_length);
  double last_loss = NAN;
  int64_t last_step = start_step;  // the last step completed
  int64_t stopped_after = 0;       // a signal stopped the run after this step (when `stopped`)
  bool stopped = false;
  int64_t saved_step = -1;  // the step of the checkpoint written last by this process
  // Whether this rank asks to stop: a signal, or (rank 0) a standard output that no longer takes
  // the progress lines (its reader has gone): both stop the run as cleanly as a time limit.
  auto stop_wanted = [&] { return interrupt::requested() != 0 || !log.stdout_failure().empty(); };
  Eta eta(start_step, t.steps);
  // Called while `e` is being handled: keeps what was measured (the record of the completed steps,
  // marked as failed) and rethrows e. A record or log that cannot be written either (the same
  // full disk) is named in the one error, after e.
  auto fail = [&](const std::exception& e, const std::string& during) {
    const std::string why = error_text(e), status = "failed: " + during + why;
    const std::string also =
        also_failed(
            [&] {
              log.event("end", {{"status", status}, {"last_step", last_step}, {"final_loss", last_loss}}, "");
            },
            why) +
        also_failed([&] { rec.commit(status, last_step, last_loss); }, why);
    if (!also.empty()) PT_FAIL(why + also);
    throw;
  };
  // Start-up ends here. Until now a signal ended the process at once (nothing to save, and
  // start-up may be blocked); from here a first SIGTERM/SIGINT/SIGUSR1/SIGHUP asks for a stop at
  // the next step boundary, a second ends it at once (core/interrupt.h).
  raise_injected_signal(0, rt.is_root());  // PARATRAIN_FAULT=signal:0:NAME only
  const interrupt::GracefulScope graceful;
  try {
    for (int64_t s = start_step; s < t.steps; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      sampler.fill(s, h_ids.data_as<int32_t>(), h_tg.data_as<int32_t>());
      Tensor ids = device.is_cuda() ? h_ids.to(device, ctx) : h_ids;
      Tensor tg = device.is_cuda() ? h_tg.to(device, ctx) : h_tg;
      const double lr = cosine_lr(s + 1, t.lr, min_lr, t.warmup_steps, cosine_steps);
      injected_fault.before_step(s + 1);
      StepOutputs out = step_fn.run(ctx, ids, tg, static_cast<float>(lr), static_cast<int>(t.grad_accum));
      raise_injected_signal(s + 1, rt.is_root());  // PARATRAIN_FAULT=signal:STEP:NAME only
      const StepConsensus agreed = agree_after_step(out.loss.to_host_f64(ctx)[0], stop_wanted());
      const double loss = agreed.mean_loss;  // waits for the step
      const double gnorm = std::sqrt(out.grad_sumsq.to_host_f64(ctx)[0]);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      // The row first: a step that stops the run is in the record too.
      rec.add_step(s + 1, loss, lr, gnorm, ms, tokens_per_step / (ms * 1e-3));
      last_step = s + 1;
      eta.unit_done();
      if (!std::isfinite(loss) || !std::isfinite(gnorm)) {
        // The update read the same norm and changed nothing (GradClip's guard).
        const ParamStore::NonFinite bad = lm.store().first_nonfinite(ctx, /*grads=*/true);
        const std::string what = "step " + std::to_string(s + 1) + ": the loss is " + std::to_string(loss) +
                                 " and the gradient norm " + std::to_string(gnorm) +
                                 (bad.param ? "; the first non-finite gradient is '" + bad.param->name + "' (" +
                                                  std::to_string(bad.value) + ")"
                                            : std::string()) +
                                 ". The update was not applied";
        const std::string advice =
            nonfinite_advice(s + 1, start_step + 1, !resume_from.empty() || !t.init_from.empty(), lr, t.grad_clip);
        if (t.on_nonfinite == "stop")
          PT_FAIL(what + ": the parameters are those after step " + std::to_string(s) + "; " + advice);
        if (rt.is_root()) std::printf("warning: %s (--on-nonfinite skip; %s)\n", what.c_str(), advice.c_str());
      }
      if (std::isfinite(loss)) last_loss = loss;
      if ((s + 1) % t.log_every == 0 || s + 1 == t.steps) {
        const double elapsed = log.elapsed_s();
        char line[256];
        std::snprintf(line, sizeof line,
                      "step %6lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %8.0f tok/s | %.1f ms | %s",
                      static_cast<long long>(s + 1), static_cast<long long>(t.steps), loss, lr, gnorm,
                      tokens_per_step / (ms * 1e-3), ms, eta.text(elapsed).c_str());
        log.event("step",
                  {{"step", s + 1},
                   {"steps", t.steps},
                   {"loss", loss},
                   {"lr", lr},
                   {"grad_norm", gnorm},
                   {"step_ms", ms},
                   {"tokens_per_s", tokens_per_step / (ms * 1e-3)},
                   {"eta_s", eta.eta_s(elapsed)}},
                  line);
      }
      if (agreed.stop && s + 1 < t.steps) {
        stopped = true;
        stopped_after = s + 1;
        break;
      }
      if (t.save_every > 0 && (s + 1) % t.save_every == 0 && s + 1 < t.steps) {
        save(s + 1);
        saved_step = s + 1;
        rec.commit("running", last_step, last_loss);
        // A signal during that write stops the run here, on the checkpoint just written.
        if (agree_after_step(0, stop_wanted()).stop) {
          stopped = true;
          stopped_after = s + 1;
          break;
        }
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    fail(e, "");
  }
  if (!t.save.empty() && saved_step != last_step) {
    try {
      save(last_step);
    } catch (const std::exception& e) {
      fail(e, "final checkpoint: ");  // the steps ran: their record is kept
    }
  }
  const std::string stdout_failure = log.stdout_failure();
  const std::string stop_reason = interrupt::requested() ? interrupt::signal_name(interrupt::requested())
                                  : !stdout_failure.empty()
                                      ? "a write error on standard output (" + stdout_failure + ")"
                                      : std::string("a signal on another rank");
  const std::string status = stopped ? "interrupted: " + stop_reason + " after step " + std::to_string(stopped_after) +
                                           " of " + std::to_string(t.steps)
                                     : std::string("completed");
  rec.commit(status, last_step, last_loss);
  std::string summary;
  if (stopped)
    summary = "stopped by " + stop_reason + " after step " + std::to_string(stopped_after) + " of " +
              std::to_string(t.steps) + "\n";
  summary += "results: " + rec.path() + (t.save.empty() ? "" : ", checkpoint: " + t.save);
  if (stopped && !t.save.empty()) summary += "\ncontinue with: --resume " + t.save + " (or --resume auto)";
  log.event("end",
            {{"status", status},
             {"last_step", last_step},
             {"final_loss", last_loss},
             {"out", rec.path()},
             {"save", t.save},
             {"exit_code", static_cast<int64_t>(stopped ? kExitStopped : kExitOk)}},
            summary);
  // Standard output has gone: the summary (where the results are, how to continue) goes to stderr.
  if (!stdout_failure.empty()) std::fprintf(stderr, "paratrain: %s\n", summary.c_str());
  return stopped ? kExitStopped : kExitOk;
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  AdoptedOptions adopted_from;  // the options taken from a --resume checkpoint
  try {
    return train(args, adopted_from);
  } catch (const std::exception& e) {
    adopted_from.blame_checkpoint(e);
    throw;
  }
}

}  // namespace pt::cli
