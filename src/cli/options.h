#pragma once
// Boost.Program_options plumbing shared by the subcommands: parse with --help handling,
// options every run shares (device, precision, output file), and list-valued flags.
#include <boost/program_options.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/device.h"
#include "model/transformer.h"
#include "parallel/host_collectives.h"

namespace pt::cli {

namespace po = boost::program_options;

// Who prints the configuration that --print-config asks for: parse_or_help at once, or the caller,
// after it has filled in options from elsewhere (train --resume: the checkpoint's).
enum class PrintConfig { kNow, kByCaller };

// Parses the arguments given against desc. Returns nullopt after printing help, or the
// configuration (--print-config, with PrintConfig::kNow): exit 0 is then correct.
// Unknown or malformed options throw po::error, which main() reports with exit code 2. Then
// --config's file (cli/config_file.h: every option it sets that the command line does not),
// cli/option_rules.h's rules (spellings, stray words, empty values, numeric ranges), the
// --comm-timeout of add_run_options, and check_ranks_agree.
std::optional<po::variables_map> parse_or_help(const po::options_description& desc,
                                               const std::vector<std::string>& given, const std::string& usage_line,
                                               PrintConfig print = PrintConfig::kNow);

// With several ranks (collective: every rank calls it, parse_or_help does): the job ends at
// once, on every rank, when any rank's options differ from rank 0's, naming the first option
// that differs.
void check_ranks_agree(const po::variables_map& vm);
// The same for one value every rank must share: parallel::check_same_on_every_rank.
using parallel::check_same_on_every_rank;

// Options every run shares (and --config, --print-config); filled by add_run_options and read by resolve_run_options.
struct RunOptions {
  std::string device = "auto";     // auto | cpu | cuda
  std::string precision = "fp32";  // fp32 | tf32 | bf16 | fp8
  std::string out;                 // HDF5 results file; "" → default name
  bool overwrite = false;
  uint64_t seed = 1337;
  std::string gemm = "autotune";        // autotune | cublas | lt (GPU GEMM library call; add_gemm_option)
  std::string flash_kernels = "auto";   // auto | mma | wgmma (bf16 flash attention on the GPU; add_flash_options)
  std::string wgmma_tiles;              // F/K/Q, "" = each head dimension's default
  std::string deterministic = "on";     // on | off: the flash defaults' reproducibility (FlashChoice)
  bool allow_gpu_sharing = false;       // several ranks of a node on one GPU (tests, debugging)
  std::string grad_dtype = "fp32";      // fp32 | bf16 (Context::grad_dtype; add_storage_dtype_options)
  std::string residual_dtype = "fp32";  // fp32 | bf16 (Context::residual_dtype; add_storage_dtype_options)
};
// default_precision == nullptr leaves --precision out (sweeps take a list flag instead).
void add_run_options(po::options_description& desc, RunOptions& o, const char* default_precision = "fp32");
// --gemm (subcommands that run GEMMs on the GPU), and its value applied to a context.
void add_gemm_option(po::options_description& desc, RunOptions& o);
void apply_gemm_option(Context& ctx, const RunOptions& o);
// --grad-dtype and --residual-dtype (subcommands that train the model): what bf16 mixed precision
// may store in bf16 beyond the GEMM operands, and their values (Context::set_grad_dtype and
// set_residual_dtype take them).
void add_storage_dtype_options(po::options_description& desc, RunOptions& o);
DType grad_dtype_of(const RunOptions& o);
DType residual_dtype_of(const RunOptions& o);
// The same for subcommands with one --precision: bf16 refused unless it is bf16.
DType grad_dtype_for_precision(const RunOptions& o);
DType residual_dtype_for_precision(const RunOptions& o);
// --flash-kernels, --wgmma-tiles, --deterministic (subcommands that run the model), and their values
// applied to a context: an explicit wgmma request the GPU or binary cannot run fails there, named.
void add_flash_options(po::options_description& desc, RunOptions& o);
// --deterministic alone (bench attention, which takes lists of kernels and tiles), and its value.
void add_deterministic_option(po::options_description& desc, RunOptions& o);
bool deterministic_of(const RunOptions& o);
FlashChoice flash_choice_of(const RunOptions& o);
void apply_flash_options(Context& ctx, const RunOptions& o);
// The device of this rank: cpu; cuda (a GPU, or an error); auto (a GPU when one is visible, else
// the CPU). Which GPU: parallel::choose_gpu's rule over the visible GPUs and the node's local
// ranks. Collective (every rank calls it at start-up): two ranks of one host on one GPU are
// refused unless o.allow_gpu_sharing. An auto that finds no GPU warns on rank 0's stderr: a GPU
// job that landed on a node without one would otherwise spend its whole time limit on the CPU.
Device resolve_device(const RunOptions& o);
// The device as a run's first line names it: d.str(), and loudly so when auto fell back to the CPU.
std::string device_banner(const Device& d, const RunOptions& o);

// Every option's value as text (defaults included), for the HDF5 record's attributes.
std::map<std::string, std::string> options_as_strings(const po::variables_map& vm);
// One option's value as text: one item, or a list option's items; nothing for a value of a type
// no option of paratrain has.
std::optional<std::vector<std::string>> option_value_texts(const boost::any& value);

// "1,10,100" or repeated flags → list (po's multitoken vectors also accept "1 10 100").
std::vector<std::string> split_list(const std::vector<std::string>& words);
// The whole of `s` as a number (an integer when `integer`), or nothing.
std::optional<double> parse_number(const std::string& s, bool integer);
std::vector<int64_t> parse_int_list(const std::vector<std::string>& words, const char* flag);
std::vector<double> parse_double_list(const std::vector<std::string>& words, const char* flag);
// Whether an error message names `flag` ("--lr 5 ...", "--data 'x': ...") or quotes `value`: an
// option the error is about, when the option came from a file (a checkpoint, a config file).
bool error_names_option(const std::string& why, const std::string& flag, const std::string& value);
// "on" → true, "off" → false; anything else throws naming --flag.
bool parse_on_off(const std::string& word, const char* flag);
// --model and the overrides of its dimensions (train, plan, bench ddp): a named size, with each
// of --d-model, --num-layers, --num-heads and --d-ff that is given in place of the size's own.
struct ModelSizeOptions {
  std::string model;
  int64_t d_model = 0, num_layers = 0, num_heads = 0, d_ff = 0;  // 0: the named size's
  bool overridden() const { return d_model || num_layers || num_heads || d_ff; }
  TransformerConfig config() const;  // TransformerConfig::named(model) with the overrides
};
void add_model_size_options(po::options_description& desc, ModelSizeOptions& o);
// --recompute's help (train, bench model and plan).
inline constexpr const char* kRecomputeHelp =
    "on: backward recomputes norm outputs and the SwiGLU product; swiglu: only the product; off: "
    "keeps all";
// --fused's help (train and bench model).
inline constexpr const char* kFusedHelp =
    "on: stacked q/k/v GEMM, adds in GEMM epilogues, clip in AdamW; off: one kernel per op, as "
    "PyTorch eager";

// --cuda-graph's help (train, bench model).
inline constexpr const char* kCudaGraphHelp =
    "on: replay the whole step as a CUDA graph after two warm-up steps, bit for bit the same; one "
    "process on a GPU";

// --update-overlap's help (train, bench model).
inline constexpr const char* kUpdateOverlapHelp =
    "on: each update runs under the next forward (same results); off: at its step's end; auto: on "
    "in one GPU process";

// --update-sms's help (train, bench model).
inline constexpr const char* kUpdateSmsHelp =
    "with --update-overlap: GEMMs keep off N SMs while the update runs; results may round "
    "differently";

// --grad-dtype's help (train, bench model, bench ddp).
inline constexpr const char* kGradDtypeHelp =
    "weight-gradient type: fp32, or bf16 with --precision bf16 on a GPU (master weights and "
    "optimizer state stay fp32)";

// --residual-dtype's help (train, bench model, bench ddp).
inline constexpr const char* kResidualDtypeHelp =
    "residual stream type: fp32, or bf16 with --precision bf16 on a GPU, as llm.c keeps it "
    "(gradient: fp32)";

// --gemm's help (train, bench model, bench gemm, bench ddp).
inline constexpr const char* kGemmHelp =
    "GEMMs: autotune (fastest of cuBLAS and cuBLASLt, timed once per shape), cublas, or lt "
    "(cuBLASLt's pick)";

}  // namespace pt::cli
