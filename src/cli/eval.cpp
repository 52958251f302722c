// `paratrain eval`: the validation loss of a checkpoint alone, over the same fixed batches that
// `train --eval-every` evaluates (train/evaluate.h). Prints the loss; writes a record only with
// --out. With the run's batch size and --eval-tokens (the checkpoint's, unless given) and the
// same validation data, it gives the loss the run's /eval table holds for that step (a run in
// fp32 on the same kind of device).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/hf_export.h"
#include "io/input_file.h"
#include "io/run_record.h"
#include "io/token_shards.h"
#include "parallel/runtime.h"
#include "train/evaluate.h"

namespace pt::cli {

namespace {

// An option of the run the checkpoint holds (config.<name>), or `fallback`.
std::string run_option(const io::CheckpointInfo& info, const std::string& name, const std::string& fallback) {
  const auto it = info.text.find("config." + name);
  return it == info.text.end() ? fallback : it->second;
}

int64_t run_int_option(const io::CheckpointInfo& info, const std::string& name, int64_t fallback,
                       const std::string& checkpoint) {
  const std::string text = run_option(info, name, std::to_string(fallback));
  const auto v = parse_number(text, /*integer=*/true);
  PT_CHECK(v && *v >= 0, "checkpoint '" + checkpoint + "': its config." + name + " '" + text + "' is not a count");
  return static_cast<int64_t>(*v);
}

}  // namespace

int run_eval(const std::vector<std::string>& args) {
  std::string checkpoint, data, bin_dtype;
  int64_t batch_size = 0, eval_tokens = -1;
  RunOptions run;
  po::options_description desc("eval options");
  // clang-format off
  desc.add_options()
      ("checkpoint", po::value(&checkpoint)->required(), "the checkpoint to evaluate (train --save's file)")
      ("data", po::value(&data)->required(),
       "validation data, named as train's --data (a manifest: its val list)")
      ("batch-size", po::value(&batch_size), "global batch in sequences (default: the run's --batch-size)")
      ("eval-tokens", po::value(&eval_tokens),
       "input tokens, in whole batches (default: the run's --eval-tokens; 0: 8 batches; at most the whole set)")
      ("bin-dtype", po::value(&bin_dtype), "uint16 | uint32: the tokens of a headerless .bin (default: the run's)");
  // clang-format on
  add_run_options(desc, run, "fp32");
  auto vm = parse_or_help(desc, args, "paratrain eval --checkpoint ck.h5 --data SPEC [options]   (validation loss)");
  if (!vm) return 0;
  io::require_regular_file(checkpoint, "--checkpoint '" + checkpoint + "'", "a checkpoint");
  const io::CheckpointInfo info = io::read_checkpoint_info(checkpoint);
  const TransformerConfig cfg = io::model_config_of(info, checkpoint);
  if (!vm->count("batch-size")) batch_size = run_int_option(info, "batch-size", 16, checkpoint);
  if (!vm->count("eval-tokens")) eval_tokens = run_int_option(info, "eval-tokens", 0, checkpoint);
  if (!vm->count("bin-dtype")) bin_dtype = run_option(info, "bin-dtype", "uint16");
  auto& rt = parallel::Runtime::get();
  PT_CHECK(batch_size >= 1 && batch_size % rt.world_size() == 0, "--batch-size " + std::to_string(batch_size) +
                                                                     " is not divisible by the " +
                                                                     std::to_string(rt.world_size()) + " ranks");

  const io::TokenShards val(io::data_specs(data), cfg.vocab_size, io::bin_tokens_from_name(bin_dtype),
                            io::ShardSplit::Val);
  check_same_on_every_rank(val.identity(), "the validation " + val.what());
  const io::ValidationBatches batches(val, batch_size, cfg.context_length,
                                      train::eval_token_budget(eval_tokens, batch_size, cfg.context_length), rt.rank(),
                                      rt.world_size());
  std::unique_ptr<io::RunRecord> record;  // taken before any work
  if (vm->count("out")) record = std::make_unique<io::RunRecord>("eval", run.out, run.overwrite);

  const Device device = resolve_device(run);
  PT_CHECK(!(run.precision == "bf16" && device.is_cpu()), "--precision bf16 needs a GPU");
  Context ctx(device, precision_from_name(run.precision));
  TransformerLM lm(cfg, ctx);
  io::load_weights(checkpoint, lm.store(), ctx);
  const train::EvalResult r = train::evaluate(lm, ctx, batches);
  if (rt.is_root())
    std::printf("eval: %s at step %lld: val loss %.6f over %lld tokens (%lld batches of %lld × %lld) of %s, %.1f ms\n",
                checkpoint.c_str(), static_cast<long long>(info.step), r.loss, static_cast<long long>(r.tokens),
                static_cast<long long>(r.batches), static_cast<long long>(batch_size),
                static_cast<long long>(cfg.context_length), data.c_str(), r.ms);
  if (record) {
    io::ResultTable evals = train::eval_table(), shards = train::data_shards_table();
    evals.add_row().set("step", info.step).set("val_loss", r.loss).set("tokens", r.tokens).set("ms", r.ms);
    train::add_shards(shards, "val", val);
    record->collect_environment(ctx);
    record->set_options(options_as_strings(*vm));
    record->set_attr("checkpoint", checkpoint);
    record->set_attr("val_loss", r.loss);
    record->add_table(evals);
    record->add_table(shards);
    if (rt.is_root()) record->commit();
    if (rt.is_root()) std::printf("results: %s\n", record->path().c_str());
  }
  return 0;
}

}  // namespace pt::cli
