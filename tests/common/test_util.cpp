#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "core/error.h"
#include "core/fp8.h"

namespace pt::test {

namespace {
// The environment every test process needs (see tests/CMakeLists.txt), set before main().
const bool kEnvironmentSet = [] {
  const char* vars[][2] = {
      {"PARATRAIN_SOURCE_DIR", PT_TEST_SOURCE_DIR},
      {"PARATRAIN_BINARY", PT_TEST_PARATRAIN_BINARY},
      {"PARATRAIN_MPIEXEC", PT_TEST_MPIEXEC},
      {"OPENBLAS_NUM_THREADS", "1"},
      {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
      {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
      {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
      {"NCCL_NVLS_ENABLE", "0"},
  };
  for (const auto& v : vars) setenv(v[0], v[1], /*overwrite=*/0);
  return true;
}();
}  // namespace

std::vector<double> randn(int64_t n, uint64_t seed, double std) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, std);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<double> uniform(int64_t n, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<int32_t> random_ids(int64_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

Tensor make_tensor(Context& ctx, const Shape& shape, DType dtype, const std::vector<double>& values) {
  PT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "make_tensor: value count");
  Tensor host = Tensor::empty(shape, dtype, Device::cpu(), "test_input");
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::F32: host.data_as<float>()[i] = static_cast<float>(values[i]); break;
      case DType::F64: host.data_as<double>()[i] = values[i]; break;
      case DType::BF16: host.data_as<uint16_t>()[i] = float_to_bf16_bits(static_cast<float>(values[i])); break;
      case DType::F16: host.data_as<uint16_t>()[i] = float_to_half_bits(static_cast<float>(values[i])); break;
      case DType::I32: host.data_as<int32_t>()[i] = static_cast<int32_t>(values[i]); break;
      case DType::I64: host.data_as<int64_t>()[i] = static_cast<int64_t>(values[i]); break;
      case DType::U16: host.data_as<uint16_t>()[i] = static_cast<uint16_t>(values[i]); break;
      case DType::U32: host.data_as<uint32_t>()[i] = static_cast<uint32_t>(values[i]); break;
      case DType::F8E4M3:
      case DType::F8E5M2:
        host.data_as<uint8_t>()[i] = float_to_fp8_bits(static_cast<float>(values[i]), fp8_format(dtype));
        break;
    }
  }
  return ctx.is_cuda() ? host.to(ctx.device(), ctx) : host;
}

Tensor make_ids(Context& ctx, const Shape& shape, const std::vector<int32_t>& ids) {
  std::vector<double> v(ids.begin(), ids.end());
  return make_tensor(ctx, shape, DType::I32, v);
}

void poison(Context& ctx, Tensor& t) {
  PT_CHECK(is_floating(t.dtype()), "poison: float tensors only");
  std::vector<double> nan(static_cast<size_t>(t.numel()), std::numeric_limits<double>::quiet_NaN());
  Tensor src = make_tensor(ctx, t.shape(), t.dtype(), nan);
  if (t.is_contiguous()) {
    t.copy_from(src, ctx);
  } else {
    PT_FAIL("poison: non-contiguous tensors are not supported");
  }
}

double rel_error(const std::vector<double>& a, const std::vector<double>& ref) {
  if (a.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

double allclose_ratio(const std::vector<double>& a, const std::vector<double>& ref, double rtol, double atol) {
  if (a.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::fabs(a[i] - ref[i]) / (atol + rtol * std::fabs(ref[i])));
  }
  return worst;
}

std::vector<double> finite_difference(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
                                      double h) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    x[i] = xi + h;
    const double fp = f(x);
    x[i] = xi - h;
    const double fm = f(x);
    x[i] = xi;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

void write_npy_raw(const std::string& path, const std::string& dict, const std::string& payload, int major) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) out += std::string("\0\0", 2);
  out += header + payload;
  std::ofstream(path, std::ios::binary) << out;
}

std::string paratrain_binary() {
  const char* env = std::getenv("PARATRAIN_BINARY");  // set at start-up (kEnvironmentSet)
  PT_CHECK(env != nullptr, "PARATRAIN_BINARY is not set");
  return env;
}

namespace {
CliResult run_shell(const std::string& command) {
  CliResult r;
  const std::string cmd = command + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  PT_CHECK(pipe != nullptr, "popen failed for: " + cmd);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}
}  // namespace

CliResult run_paratrain(const std::string& args) { return run_shell(paratrain_binary() + " " + args); }

CliResult run_paratrain_mpi(int ranks, const std::string& args) {
  return run_shell(std::string(std::getenv("PARATRAIN_MPIEXEC")) + " -n " + std::to_string(ranks) + " " +
                   paratrain_binary() + " " + args);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TransformerConfig test_transformer(int64_t vocab, int64_t context, int64_t d_model, int64_t layers, int64_t heads,
                                   int64_t d_ff, AttentionImpl attention) {
  TransformerConfig c;
  c.vocab_size = vocab;
  c.context_length = context;
  c.d_model = d_model;
  c.num_layers = layers;
  c.num_heads = heads;
  c.d_ff = d_ff;
  c.attention = attention;
  return c;
}

std::string source_path(const std::string& relative) {
  const char* root = std::getenv("PARATRAIN_SOURCE_DIR");
  PT_CHECK(root != nullptr, "PARATRAIN_SOURCE_DIR is not set (run the tests through ctest)");
  return std::string(root) + "/" + relative;
}

std::string scratch_dir(const std::string& test_name) {
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / ("paratrain_test_" + test_name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

}  // namespace pt::test
