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

namespace pt::cli {

namespace po = boost::program_options;

// Parses the arguments given against desc. Returns nullopt after printing help (exit 0 is then correct).
// Unknown or malformed options throw po::error, which main() reports with exit code 2. Then
// cli/option_rules.h's rules (spellings, stray words, empty values, numeric ranges), the
// --comm-timeout of add_run_options, and check_ranks_agree.
std::optional<po::variables_map> parse_or_help(const po::options_description& desc,
                                               const std::vector<std::string>& given, const std::string& usage_line);

// With several ranks (collective: every rank calls it, parse_or_help does): the job ends at
// once, on every rank, when any rank's options differ from rank 0's, naming the first option
// that differs.
void check_ranks_agree(const po::variables_map& vm);
// The same for one value every rank must share (collective): `what` names it in the error,
// e.g. "the token file 'data.npy'".
void check_same_on_every_rank(const std::string& value, const std::string& what);

// Options every run shares; filled by add_run_options and read by resolve_run_options.
struct RunOptions {
  std::string device = "auto";     // auto | cpu | cuda
  std::string precision = "fp32";  // fp32 | tf32 | bf16
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
// refused unless o.allow_gpu_sharing.
Device resolve_device(const RunOptions& o);

// Every option's value as text (defaults included), for the HDF5 record's attributes.
std::map<std::string, std::string> options_as_strings(const po::variables_map& vm);

// "1,10,100" or repeated flags → list (po's multitoken vectors also accept "1 10 100").
std::vector<std::string> split_list(const std::vector<std::string>& words);
// The whole of `s` as a number (an integer when `integer`), or nothing.
std::optional<double> parse_number(const std::string& s, bool integer);
std::vector<int64_t> parse_int_list(const std::vector<std::string>& words, const char* flag);
std::vector<double> parse_double_list(const std::vector<std::string>& words, const char* flag);
// "on" → true, "off" → false; anything else throws naming --flag.
bool parse_on_off(const std::string& word, const char* flag);
// --recompute's help (train, bench model and plan).
inline constexpr const char* kRecomputeHelp =
    "on: backward recomputes the RMSNorm outputs and the SwiGLU product instead of keeping them "
    "(2·d_model + d_ff fewer saved values per token and layer); swiglu: only the SwiGLU product "
    "(remade inside its backward's pass), the norm outputs kept (2·d_model more values than on, "
    "two passes a layer fewer); off: keep them all. The same gradients in every mode";
// --fused's help (train and bench model).
inline constexpr const char* kFusedHelp =
    "on: the fused step (one stacked q/k/v GEMM, residual adds inside the projection GEMMs, "
    "backward's inverse RoPE inside flash attention's stores, the gradient clip and the bf16 "
    "parameter copy inside the AdamW/SGD pass); off: one kernel per primitive as PyTorch eager "
    "runs the model (three q/k/v GEMMs, GEMM then add for each residual, inverse RoPE, clip and "
    "bf16 copy as passes of their own). RMSNorm, SwiGLU, the fused softmax-cross-entropy and "
    "flash attention are the same in both; so are the results up to rounding";

// --cuda-graph's help (train, bench model).
inline constexpr const char* kCudaGraphHelp =
    "on: after uncaptured warm-up steps (train: two; bench model: all but the last of --warmup, which "
    "must be 2 or more) capture the whole training step (forward, backward, clip, optimizer) "
    "in a CUDA graph and replay it, one launch a step, with the same results bit for bit; one process "
    "on a GPU only (data parallelism is not captured yet); off: launch every kernel";

// --update-overlap's help (train, bench model).
inline constexpr const char* kUpdateOverlapHelp =
    "on: each step's optimizer update runs under the next step's forward, on a low-priority stream, "
    "chunk by chunk as the forward reaches the parameters (the same parameters bit for bit; a GPU, "
    "--fused on, no CUDA graph, no sharded optimizer); off: the update ends its own step; auto: on "
    "where it can run in one process (several ranks: off until measured there)";

// --update-sms's help (train, bench model).
inline constexpr const char* kUpdateSmsHelp =
    "with the update under the forward (--update-overlap): GEMMs keep off N SMs until the forward has "
    "waited for the update, so it streams on SMs of its own beside them, not only in their gaps (XL: "
    "-2 to -3 % a step; the small model +16 %: docs/BENCHMARKS.md). Those GEMMs may take other cuBLAS "
    "algorithms: runs stay reproducible, not bit for bit those with 0; 0: every SM to GEMMs";

// --grad-dtype's help (train, bench model, bench ddp).
inline constexpr const char* kGradDtypeHelp =
    "weight-gradient type: fp32, or bf16 with --precision bf16 on a GPU (backward's GEMMs write bf16 "
    "gradients, the collectives move them as they are, AdamW/SGD read them; master weights and optimizer "
    "state stay fp32; the embedding's and RMSNorm's gradients are summed in fp32 and rounded once; with "
    "--grad-accum the micro-batches add into the bf16 gradients, one rounding each)";

// --residual-dtype's help (train, bench model, bench ddp).
inline constexpr const char* kResidualDtypeHelp =
    "residual stream type (the activations between blocks): fp32 (as PyTorch autocast keeps it), or bf16 with "
    "--precision bf16 on a GPU, as llm.c keeps it (the output projection and w2 add into it in their GEMMs' "
    "epilogue and round to bf16 there, RMSNorm reads bf16; its gradient stays fp32; XL at 16 x 1024: "
    "1-2 % faster a step and 5 GB less, which lets --recompute off fit on 80 GB; docs/BENCHMARKS.md)";

// --gemm's help (train, bench model, bench gemm, bench ddp).
inline constexpr const char* kGemmHelp =
    "GEMM library call on the GPU: autotune (time cuBLAS and cuBLASLt's heuristic candidates once "
    "per shape, keep the fastest; where two are within a few per cent, runs may keep different ones: "
    "at llm.c's point two runs' GEMM time differed by about 1 %), cublas (cublasGemmStridedBatchedEx "
    "always) or lt (cuBLASLt's first heuristic choice, the same every run)";

}  // namespace pt::cli
