#include "cli/options.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <type_traits>

#include "cli/config_file.h"
#include "cli/option_rules.h"
#include "core/error.h"
#include "ops/flash_attention.h"
#include "parallel/communicator.h"
#include "parallel/gpu_binding.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"

namespace pt::cli {

std::optional<po::variables_map> parse_or_help(const po::options_description& desc,
                                               const std::vector<std::string>& given, const std::string& usage_line,
                                               PrintConfig print) {
  for (const auto& a : given)
    if (a == "--help" || a == "-h") {
      std::cout << "usage: " << usage_line << "\n\n" << desc << "\n";
      return std::nullopt;
    }
  refuse_retired_spellings(desc, given);
  // No prefix guessing: `--over` is not --overwrite, nor `--warmup` --warmup-steps. Every option is
  // spelled out, in the one spelling its concept has in every subcommand.
  namespace style = po::command_line_style;
  const po::parsed_options parsed =
      po::command_line_parser(given).options(desc).style(style::default_style & ~style::allow_guessing).run();
  refuse_stray_words(po::collect_unrecognized(parsed.options, po::include_positional));
  check_integer_words(desc, parsed);
  po::variables_map vm;
  po::store(parsed, vm);
  // Stored second, so the command line's values stay and the file's fill in the rest.
  if (vm.count("config")) store_config_file(vm["config"].as<std::string>(), desc, vm);
  po::notify(vm);
  check_option_values(vm);
  if (vm.count("comm-timeout")) parallel::set_comm_timeout_s(vm["comm-timeout"].as<double>());
  parallel::comm_timeout_s();  // PARATRAIN_COMM_TIMEOUT_S: malformed is an error here, on one rank or many
  check_ranks_agree(vm);
  if (print == PrintConfig::kNow && print_config_if_asked(desc, vm)) return std::nullopt;
  return vm;
}

void check_ranks_agree(const po::variables_map& vm) {
  const auto& rt = parallel::Runtime::get();
  if (rt.world_size() <= 1) return;
  // Every rank's options as "name=value" lines; the same on every rank or the job ends here,
  // before a collective could wait on a rank that runs another configuration.
  std::string mine;
  for (const auto& [name, value] : options_as_strings(vm)) mine += name + "=" + value + "\n";
  const std::vector<std::string> all = parallel::all_gather_strings(mine);
  auto parse = [](const std::string& text) {
    std::map<std::string, std::string> m;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      const size_t eq = line.find('=');
      m[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return m;
  };
  const auto root = parse(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const auto other = parse(all[r]);
    std::string differs;
    for (const auto& [name, value] : root) {
      const auto it = other.find(name);
      const std::string theirs = it == other.end() ? "(not given)" : it->second;
      if (theirs != value) {
        differs = "--" + name + " is '" + value + "' on rank 0 and '" + theirs + "' on rank " + std::to_string(r);
        break;
      }
    }
    if (differs.empty())
      for (const auto& [name, value] : other)
        if (!root.count(name)) {
          differs = "--" + name + " is given on rank " + std::to_string(r) + " only";
          break;
        }
    PT_FAIL("the ranks were started with different options: " + differs + "; every rank must run the same command");
  }
}

void add_run_options(po::options_description& desc, RunOptions& o, const char* default_precision) {
  // clang-format off
  desc.add_options()
      ("device", po::value(&o.device)->default_value(o.device),
       "auto (this rank's GPU, else the CPU), cpu or cuda; which GPU a rank drives: "
       "docs/CLUSTER.md")
      ("allow-gpu-sharing", po::bool_switch(&o.allow_gpu_sharing),
       "let several ranks of a node drive one GPU, for ranks that do not talk through NCCL (refused "
       "otherwise)");
  if (default_precision) {
    o.precision = default_precision;
    desc.add_options()
        ("precision", po::value(&o.precision)->default_value(o.precision),
         "fp32 (true FP32 GEMMs), tf32, bf16 (bf16 GEMM operands, fp32 master weights) or fp8 (bf16 with FP8 Linear "
         "GEMMs; sm_89+)");
  }
  desc.add_options()
      ("comm-timeout", po::value<double>(),
       "seconds to wait for the other ranks before the job is aborted (default: "
       "PARATRAIN_COMM_TIMEOUT_S, else 300)")
      ("out", po::value(&o.out), "HDF5 results file (default: <subcommand>-<time>.h5)")
      ("overwrite", po::bool_switch(&o.overwrite), "replace --out if it exists")
      ("seed", po::value(&o.seed)->default_value(o.seed), "random seed");
  // clang-format on
  add_config_options(desc);
}

void add_model_size_options(po::options_description& desc, ModelSizeOptions& o) {
  std::string sizes;
  for (const auto& n : TransformerConfig::size_names()) sizes += " " + n;
  // clang-format off
  desc.add_options()
      ("model", po::value(&o.model)->default_value(o.model), ("named size:" + sizes).c_str())
      ("d-model", po::value(&o.d_model), "override the size's d_model")
      ("num-layers", po::value(&o.num_layers), "override the size's layer count")
      ("num-heads", po::value(&o.num_heads), "override the size's head count")
      ("d-ff", po::value(&o.d_ff), "override the size's feed-forward width");
  // clang-format on
}

TransformerConfig ModelSizeOptions::config() const {
  TransformerConfig c = TransformerConfig::named(model);
  if (d_model) c.d_model = d_model;
  if (num_layers) c.num_layers = num_layers;
  if (num_heads) c.num_heads = num_heads;
  if (d_ff) c.d_ff = d_ff;
  return c;
}

void add_gemm_option(po::options_description& desc, RunOptions& o) {
  desc.add_options()("gemm", po::value(&o.gemm)->default_value(o.gemm), kGemmHelp);
}

void apply_gemm_option(Context& ctx, const RunOptions& o) { ctx.set_gemm_select(gemm_select_from_name(o.gemm)); }

void add_storage_dtype_options(po::options_description& desc, RunOptions& o) {
  desc.add_options()("grad-dtype", po::value(&o.grad_dtype)->default_value(o.grad_dtype), kGradDtypeHelp)(
      "residual-dtype", po::value(&o.residual_dtype)->default_value(o.residual_dtype), kResidualDtypeHelp);
}

DType grad_dtype_of(const RunOptions& o) { return grad_dtype_from_name(o.grad_dtype); }
DType residual_dtype_of(const RunOptions& o) { return residual_dtype_from_name(o.residual_dtype); }

namespace {
DType bf16_only_with_bf16_precision(DType d, const char* flag, const RunOptions& o) {
  PT_CHECK(d == DType::F32 || is_bf16_mixed(precision_from_name(o.precision)),
           std::string(flag) + " bf16 needs --precision bf16 or fp8 (this run's is " + o.precision + ")");
  return d;
}
}  // namespace

DType grad_dtype_for_precision(const RunOptions& o) {
  return bf16_only_with_bf16_precision(grad_dtype_of(o), "--grad-dtype", o);
}
DType residual_dtype_for_precision(const RunOptions& o) {
  return bf16_only_with_bf16_precision(residual_dtype_of(o), "--residual-dtype", o);
}

void add_flash_options(po::options_description& desc, RunOptions& o) {
  // clang-format off
  desc.add_options()
      ("flash-kernels", po::value(&o.flash_kernels)->default_value(o.flash_kernels),
       "bf16 flash attention kernels: auto (wgmma where the GPU runs the sm_90a image, else "
       "mma.sync), mma, or wgmma")
      ("wgmma-tiles", po::value(&o.wgmma_tiles)->default_value(o.wgmma_tiles),
       "wgmma tile shapes F/K/Q, e.g. 1x64/1/1 or ws2x128/ws2/fxp; empty: the default table "
       "(docs/FLASH_ATTENTION.md)");
  // clang-format on
  add_deterministic_option(desc, o);
}

void add_deterministic_option(po::options_description& desc, RunOptions& o) {
  desc.add_options()("deterministic", po::value(&o.deterministic)->default_value(o.deterministic),
                     "on: the default kernels give the same bits every run; off: from 2048 keys dQ may "
                     "add up in any order");
}

bool deterministic_of(const RunOptions& o) { return parse_on_off(o.deterministic, "deterministic"); }

FlashChoice flash_choice_of(const RunOptions& o) {
  FlashChoice c;
  c.kernels = ops::flash_kernels_from_name(o.flash_kernels);
  if (!o.wgmma_tiles.empty()) c.tiles = ops::wgmma_tiles_from_name(o.wgmma_tiles);
  c.deterministic = deterministic_of(o);
  return c;
}

void apply_flash_options(Context& ctx, const RunOptions& o) { ctx.set_flash(flash_choice_of(o)); }

Device resolve_device(const RunOptions& o) {
  const std::string& device = o.device;
  PT_CHECK(device == "auto" || device == "cpu" || device == "cuda" || device == "gpu",
           "--device must be auto, cpu or cuda (got '" + device + "')");
  const int n = device == "cpu" ? 0 : cuda_device_count();
  PT_CHECK(!(device == "cuda" || device == "gpu") || n > 0, "--device cuda: no CUDA device is visible to this rank");
  // Every rank takes part in the check below, also the ones that run on the CPU.
  Device chosen = Device::cpu();
  std::string bus_id = "cpu";
  const auto& rt = parallel::Runtime::get();
  if (n > 0) {
    chosen = Device::cuda(parallel::choose_gpu(n, rt.local_rank(), rt.local_size()).index);
    char buf[64] = {0};
    PT_CUDA_CHECK(cudaDeviceGetPCIBusId(buf, sizeof(buf), chosen.index));
    bus_id = buf;
  }
  const auto hosts = parallel::all_gather_strings(rt.hostname());
  auto bus_ids = parallel::all_gather_strings(bus_id);
  for (size_t r = 0; r < bus_ids.size(); ++r)
    if (bus_ids[r] == "cpu") bus_ids[r] = "cpu:" + std::to_string(r);  // CPU ranks never collide
  parallel::check_distinct_gpus(hosts, bus_ids, o.allow_gpu_sharing);
  if (n == 0 && device == "auto" && rt.is_root())
    std::fprintf(stderr, "WARNING: no usable GPU: --device auto runs on the CPU (--device cuda stops instead)\n");
  return chosen;
}

std::string device_banner(const Device& d, const RunOptions& o) {
  return d.is_cpu() && o.device == "auto" ? "cpu (NO GPU: --device auto fell back to the CPU)" : d.str();
}

std::optional<std::vector<std::string>> option_value_texts(const boost::any& v) {
  std::vector<std::string> out;
  auto text = [&](const auto& x) {
    std::ostringstream o;
    o << std::setprecision(15) << x;  // doubles as typed: "0.01"
    out.push_back(o.str());
  };
  const bool known = visit_option_value<std::string, int, int64_t, uint64_t, double, float>(v, text) ||
                     visit_option_value<bool>(v, [&](bool b) { out.emplace_back(b ? "true" : "false"); }) ||
                     visit_option_value<std::vector<std::string>>(v, [&](const auto& vs) { out = vs; });
  if (!known) return std::nullopt;
  return out;
}

std::map<std::string, std::string> options_as_strings(const po::variables_map& vm) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : vm) {
    const auto texts = option_value_texts(value.value());
    if (!texts) continue;
    std::string joined;
    for (size_t i = 0; i < texts->size(); ++i) joined += (i ? " " : "") + (*texts)[i];
    out[name] = joined;
  }
  return out;
}

std::vector<std::string> split_list(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (const auto& w : words) {
    PT_CHECK(!w.empty() && w.front() != ',' && w.back() != ',' && w.find(",,") == std::string::npos,
             "the list '" + w + "' has an empty item");
    std::stringstream ss(w);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(item);
  }
  return out;
}

std::optional<double> parse_number(const std::string& s, bool integer) {
  size_t pos = 0;
  double v = 0;
  try {
    v = integer ? static_cast<double>(std::stoll(s, &pos)) : std::stod(s, &pos);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (pos == 0 || pos != s.size()) return std::nullopt;
  return v;
}

namespace {
// A comma list of numbers for --flag, each checked against the flag's range (check_numeric).
template <typename T>
std::vector<T> parse_number_list(const std::vector<std::string>& words, const char* flag) {
  constexpr bool integer = std::is_integral_v<T>;
  std::vector<T> out;
  for (const auto& s : split_list(words)) {
    const auto v = parse_number(s, integer);
    PT_CHECK(v.has_value(),
             std::string("--") + flag + ": '" + s + "' is not " +
                 (integer ? "an integer from " + std::to_string(INT64_MIN) + " to " + std::to_string(INT64_MAX)
                          : std::string("a number")));
    check_numeric(flag, *v);
    // An integer taken as parsed, not through the double (exact beyond 2^53).
    out.push_back(integer ? static_cast<T>(std::stoll(s)) : static_cast<T>(*v));
  }
  return out;
}
}  // namespace

std::vector<int64_t> parse_int_list(const std::vector<std::string>& words, const char* flag) {
  return parse_number_list<int64_t>(words, flag);
}

std::vector<double> parse_double_list(const std::vector<std::string>& words, const char* flag) {
  return parse_number_list<double>(words, flag);
}

bool error_names_option(const std::string& why, const std::string& flag, const std::string& value) {
  return why.find(flag + " ") != std::string::npos || why.find(flag + "'") != std::string::npos ||
         (!value.empty() && why.find("'" + value + "'") != std::string::npos);
}

bool parse_on_off(const std::string& word, const char* flag) {
  if (word == "on") return true;
  if (word == "off") return false;
  PT_FAIL(std::string("--") + flag + " must be on or off, got '" + word + "'");
}

}  // namespace pt::cli
