// `paratrain export`: a checkpoint for other programs. --format hf writes a Hugging Face
// LlamaForCausalLM folder (io/hf_export.h); --format logits writes paratrain's own fp32 logits
// on the CPU for a few tokens as .npy, which scripts/hf_check.py and the export test compare with
// the export's.
#include <filesystem>
#include <iostream>

#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/hf_export.h"
#include "io/token_shards.h"
#include "model/transformer.h"

namespace pt::cli {

namespace {

// The model's logits (T, V) for `tokens` as one sequence, fp32 on the CPU.
void write_logits(const std::string& checkpoint, const std::vector<int64_t>& tokens, const std::string& out,
                  bool overwrite) {
  PT_CHECK(!tokens.empty(), "--tokens: give the token ids to run (e.g. --tokens 1,2,3)");
  io::check_output_path(out, overwrite, "logits file");
  const TransformerConfig cfg = io::model_config_of(io::read_checkpoint_info(checkpoint), checkpoint);
  const auto T = static_cast<int64_t>(tokens.size());
  PT_CHECK(T <= cfg.context_length, "--tokens: " + std::to_string(T) + " tokens, more than the model's context (" +
                                        std::to_string(cfg.context_length) + ")");
  for (const int64_t id : tokens)
    PT_CHECK(id >= 0 && id < cfg.vocab_size, "--tokens: id " + std::to_string(id) + " is outside the vocabulary 0.." +
                                                 std::to_string(cfg.vocab_size - 1));
  Context ctx(Device::cpu());
  TransformerLM lm(cfg, ctx);
  io::load_weights(checkpoint, lm.store(), ctx);
  Tensor ids = Tensor::empty({1, T}, DType::I32, Device::cpu(), "export_ids");
  for (int64_t t = 0; t < T; ++t) ids.data_as<int32_t>()[t] = static_cast<int32_t>(tokens[size_t(t)]);
  const Tensor logits = lm.forward_logits(ctx, ids);
  io::write_npy_f32(out, {T, cfg.vocab_size}, logits.to_host_f32(ctx), overwrite);
}

}  // namespace

int run_export(const std::vector<std::string>& args) {
  io::HfExportOptions o;
  std::string format = "hf", dtype = "fp32";
  std::vector<std::string> tokens;
  po::options_description desc("export options");
  // clang-format off
  desc.add_options()
      ("checkpoint", po::value(&o.checkpoint)->required(), "the checkpoint to export (train --save's file)")
      ("format", po::value(&format)->default_value(format),
       "hf: a Hugging Face LlamaForCausalLM folder; logits: the model's fp32 logits on --tokens (.npy, CPU)")
      ("out", po::value(&o.out)->required(), "the folder (hf) or .npy file (logits) to write")
      ("dtype", po::value(&dtype)->default_value(dtype), "fp32 or bf16 weights in model.safetensors")
      ("tokenizer", po::value(&o.tokenizer), "a tokenizers JSON to put beside the weights as tokenizer.json (default: the one the run's data manifest names)")
      ("tokens", po::value(&tokens)->multitoken(), "logits: the token ids, one sequence (1,2,3)")
      ("overwrite", po::bool_switch(&o.overwrite), "replace --out if it exists");
  // clang-format on
  auto vm = parse_or_help(desc, args,
                          "paratrain export --checkpoint ck.h5 --out DIR [options]   (weights for other programs)");
  if (!vm) return 0;
  PT_CHECK(format == "hf" || format == "logits", "--format must be hf or logits (got '" + format + "')");
  PT_CHECK(dtype == "fp32" || dtype == "bf16", "--dtype must be fp32 or bf16 (got '" + dtype + "')");
  o.bf16 = dtype == "bf16";
  if (format == "logits") {
    PT_CHECK(!vm->count("tokenizer") && !o.bf16, "--tokenizer and --dtype bf16 are for --format hf");
    write_logits(o.checkpoint, parse_int_list(tokens, "tokens"), o.out, o.overwrite);
    std::cout << "export: logits of " << o.checkpoint << " written to " << o.out << "\n";
    return 0;
  }
  PT_CHECK(tokens.empty(), "--tokens is for --format logits");
  if (o.tokenizer.empty()) {  // a run on prepared data: the tokenizer its manifest names
    const io::CheckpointInfo info = io::read_checkpoint_info(o.checkpoint);
    const auto data = info.text.find("config.data");
    if (data != info.text.end()) o.tokenizer = io::manifest_tokenizer(data->second);
    if (!o.tokenizer.empty())
      PT_CHECK(std::filesystem::is_regular_file(o.tokenizer),
               "the run's manifest names the tokenizer '" + o.tokenizer + "', which is not there: pass --tokenizer");
  }
  const int64_t n = io::export_hf(o);
  std::cout << "export: " << n << " tensors of " << o.checkpoint << " written to " << o.out << " (" << dtype
            << (o.tokenizer.empty() ? ", no tokenizer" : ", with tokenizer.json") << ")\n";
  return 0;
}

}  // namespace pt::cli
