// `paratrain train`: the options of a training run, turned into one train::TrainConfig for
// train::Trainer (src/train/trainer.h), which runs it.

#include <cstdio>
#include <string>
#include <vector>

#include "cli/config_file.h"
#include "cli/ddp_options.h"
#include "cli/options.h"
#include "cli/run_log.h"
#include "cli/subcommands.h"
#include "cli/train_resume.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/input_file.h"
#include "parallel/runtime.h"
#include "train/resume.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace pt::cli {

namespace {

// The options given as words or as overrides of a named size, which fill_config turns into the
// configuration's typed fields; every other option is bound to its field of TrainConfig.
struct TrainWords {
  ModelSizeOptions size{train::TrainConfig{}.model_name};
  int64_t vocab_size = 10000;
  int64_t context_length = 128;
  std::string attention = "auto";  // auto: flash on the GPU, naive on the CPU
  std::string recompute = "on";
  std::string fused = "on";
  std::string cuda_graph = "off";
  std::string update_overlap = "auto";
  std::string sampling = io::sampling_name(train::TrainConfig{}.sampling);
  std::string bin_dtype = io::bin_tokens_name(train::TrainConfig{}.bin_dtype);
  std::string optimizer = optimizer_kind_name(train::TrainConfig{}.optimizer);
  std::string on_nonfinite = "stop";
};

constexpr const char* kUsage = "paratrain train [options]   (mpirun -np N paratrain train ... for data parallelism)";

void declare_options(po::options_description& desc, train::TrainConfig& c, TrainWords& w, RunOptions& run,
                     DdpOptions& ddp) {
  po::options_description model("Model"), data("Data"), optim("Optimisation"), ckpt("Checkpoints"),
      parallel("Data parallelism (mpirun/srun -n N: one rank per GPU)"), general("Run");
  add_model_size_options(model, w.size);
  // clang-format off
  model.add_options()
      ("vocab-size", po::value(&w.vocab_size)->default_value(w.vocab_size), "vocabulary size (token ids must be below it)")
      ("context-length", po::value(&w.context_length)->default_value(w.context_length), "sequence length T")
      ("attention", po::value(&w.attention)->default_value(w.attention),
       "naive | flash | auto (flash on the GPU, naive on the CPU)")
      ("recompute", po::value(&w.recompute)->default_value(w.recompute), kRecomputeHelp)
      ("fused", po::value(&w.fused)->default_value(w.fused), kFusedHelp)
      ("cuda-graph", po::value(&w.cuda_graph)->default_value(w.cuda_graph), kCudaGraphHelp)
      ("update-overlap", po::value(&w.update_overlap)->default_value(w.update_overlap), kUpdateOverlapHelp)
      ("update-sms", po::value(&c.update_sms)->default_value(c.update_sms), kUpdateSmsHelp);
  data.add_options()
      ("data", po::value(&c.data),
       "token data: a file, glob, directory or manifest, or a comma list of them (default: "
       "data/sample_tokens.npy)")
      ("val-data", po::value(&c.val_data),
       "validation data, as --data (a manifest: its val list; default with --eval-every: --data's)")
      ("eval-every", po::value(&c.eval_every)->default_value(c.eval_every),
       "validation loss every N steps and after the last (0: only after the last)")
      ("eval-tokens", po::value(&c.eval_tokens)->default_value(c.eval_tokens),
       "validation tokens per evaluation, in whole batches (0: 8 batches)")
      ("bin-dtype", po::value(&w.bin_dtype)->default_value(w.bin_dtype),
       "uint16 | uint32: the tokens of a headerless .bin (nanoGPT writes uint16)")
      ("sampling", po::value(&w.sampling)->default_value(w.sampling),
       "random (seeded random windows) | sequential (consecutive windows, deterministic)")
      ("batch-size", po::value(&c.batch_size)->default_value(c.batch_size),
       "global batch in sequences (of one micro-batch with --grad-accum); each rank takes its contiguous slice")
      ("grad-accum", po::value(&c.grad_accum)->default_value(c.grad_accum),
       "micro-batches of --batch-size per optimizer step, added into one update; gradients sync in "
       "the last only");
  optim.add_options()
      ("steps", po::value(&c.steps)->default_value(c.steps), "total training steps")
      ("optimizer", po::value(&w.optimizer)->default_value(w.optimizer), "adamw | sgd")
      ("lr", po::value(&c.lr)->default_value(c.lr), "peak learning rate")
      ("min-lr", po::value(&c.min_lr)->default_value(c.min_lr), "final learning rate (default lr/10)")
      ("warmup-steps", po::value(&c.warmup_steps)->default_value(c.warmup_steps), "linear warm-up steps")
      ("cosine-steps", po::value(&c.cosine_steps)->default_value(c.cosine_steps),
       "end of the cosine decay (0: --steps); a resumed run keeps its checkpoint's unless this is given "
       "again (a warning says so)")
      ("weight-decay", po::value(&c.weight_decay)->default_value(c.weight_decay), "AdamW/SGD weight decay")
      ("beta1", po::value(&c.beta1)->default_value(c.beta1), "AdamW beta1")
      ("beta2", po::value(&c.beta2)->default_value(c.beta2), "AdamW beta2")
      ("eps", po::value(&c.eps)->default_value(c.eps), "AdamW epsilon")
      ("grad-clip", po::value(&c.grad_clip)->default_value(c.grad_clip),
       "global gradient-norm clip (0 disables)")
      ("on-nonfinite", po::value(&w.on_nonfinite)->default_value(w.on_nonfinite),
       "a NaN or infinite loss or gradient norm never updates the weights: stop ends the run "
       "(exit 1), skip goes on");
  ckpt.add_options()
      ("save", po::value(&c.save), "write a checkpoint (HDF5) here at the end, and when a signal or a "
                                 "closed stdout stops the run early")
      ("save-every", po::value(&c.save_every)->default_value(0),
       "also every N steps (needs --save or --save-dir; 0: only at the end)")
      ("save-dir", po::value(&c.save_dir),
       "DIR/step_<N>.h5 per save, DIR/latest names the newest; a DIR with steps needs --resume auto "
       "or --overwrite (drops them)")
      ("keep-last", po::value(&c.keep_last)->default_value(c.keep_last),
       "with --save-dir: keep this run's newest K step checkpoints, remove its older ones (0: keep all)")
      ("init-from", po::value(&c.init_from), "start from this checkpoint's weights (a PyTorch state_dict "
                                             "saved with h5py in the same layout loads too)")
      ("resume", po::value(&c.resume),
       "continue this checkpoint's run exactly (options given must agree); auto: "
       "--save, or --save-dir's newest that loads");
  add_ddp_options(parallel, ddp);
  general.add_options()("log-every", po::value(&c.log_every)->default_value(c.log_every),
                        "progress line every N steps (rank 0)")
      ("peak-tflops", po::value(&c.peak_tflops)->default_value(c.peak_tflops),
       "one device's dense peak for the progress line's MFU (0: the device's; none on the CPU)");
  // clang-format on
  add_log_options(general, c.log);
  add_run_options(general, run, "fp32");
  add_storage_dtype_options(general, run);
  add_gemm_option(general, run);
  add_flash_options(general, run);
  desc.add(model).add(data).add(optim).add(ckpt).add(parallel).add(general);
}

// The words and overrides into the typed configuration (the device: collective).
void fill_config(train::TrainConfig& c, const TrainWords& w, const RunOptions& run, const DdpOptions& ddp,
                 const po::variables_map& vm) {
  auto& rt = parallel::Runtime::get();
  c.ddp = data_parallel_config(resolve_ddp_options(ddp, rt.world_size()));
  c.precision = precision_from_name(run.precision);
  c.device = resolve_device(run);
  c.device_banner = device_banner(c.device, run);
  c.grad_dtype = grad_dtype_for_precision(run);
  c.residual_dtype = residual_dtype_for_precision(run);
  TransformerConfig& m = c.model;
  c.model_name = w.size.model;
  m = w.size.config();
  m.vocab_size = w.vocab_size;
  m.context_length = w.context_length;
  m.attention =
      attention_impl_from_name(w.attention == "auto" ? (c.device.is_cuda() ? "flash" : "naive") : w.attention);
  m.recompute = recompute_from_name(w.recompute);
  m.fused = parse_on_off(w.fused, "fused");
  c.cuda_graph = parse_on_off(w.cuda_graph, "cuda-graph");
  c.update_overlap = update_overlap_from_name(w.update_overlap);
  c.optimizer = optimizer_kind_from_name(w.optimizer);
  c.on_nonfinite = train::on_nonfinite_from_name(w.on_nonfinite);
  c.sampling = io::sampling_from_name(w.sampling);
  c.bin_dtype = io::bin_tokens_from_name(w.bin_dtype);
  c.gemm = gemm_select_from_name(run.gemm);
  c.flash = flash_choice_of(run);
  c.seed = run.seed;
  c.out = run.out;
  c.overwrite = run.overwrite;
  c.options = options_as_strings(vm);
}

int train(const std::vector<std::string>& args, AdoptedOptions& adopted_from) {
  train::TrainConfig c;
  TrainWords w;
  RunOptions run;
  DdpOptions ddp;
  po::options_description desc("paratrain train options");
  declare_options(desc, c, w, run, ddp);
  auto vm = parse_or_help(desc, args, kUsage, PrintConfig::kByCaller);
  if (!vm) return 0;
  c.cosine_given = vm->count("cosine-steps") && !(*vm)["cosine-steps"].defaulted();

  // --resume: the checkpoint's configuration for every option not given again.
  PT_CHECK(c.init_from.empty() || c.resume.empty(), "--init-from and --resume contradict each other: pick one");
  if (!c.resume.empty()) {
    const bool root = parallel::Runtime::get().is_root();
    const std::string path = train::resume_path(c.resume, c.save, c.save_dir, [&](const std::string& line) {
      if (root) std::fprintf(stderr, "paratrain: warning: %s\n", line.c_str());
    });
    // Every rank must make the same choice (a --save on a file system the nodes do not share).
    if (c.resume == "auto")
      check_same_on_every_rank(path.empty() ? "absent" : path,
                               "the checkpoint --resume auto takes from " + (c.save.empty() ? c.save_dir : c.save));
    if (!path.empty()) {
      c.resumed = {path, io::read_checkpoint_info(path)};
      const std::vector<std::string> adopted = options_from_checkpoint(desc, *vm, c.resumed.info, path);
      if (!adopted.empty()) {
        adopted_from.set(path, adopted);
        std::vector<std::string> all = args;
        all.insert(all.end(), adopted.begin(), adopted.end());
        try {
          vm = parse_or_help(desc, all, kUsage, PrintConfig::kByCaller);
        } catch (const std::exception& e) {
          // The command line parsed; so what fails is a value the checkpoint holds.
          adopted_from.blame_checkpoint(e);
          PT_FAIL("--resume " + path + ": a config.* attribute of the checkpoint is not usable: " + error_text(e));
        }
      }
    }
  }
  if (print_config_if_asked(desc, *vm)) return 0;  // with what --resume adopted
  if (!c.init_from.empty())                        // read after the build: refused now if it can never be read
    io::require_regular_file(c.init_from, "--init-from '" + c.init_from + "'", "a checkpoint");
  fill_config(c, w, run, ddp, *vm);
  train::Trainer trainer(std::move(c));
  adopted_from.clear();  // errors from here on name their own files
  return trainer.run();
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
