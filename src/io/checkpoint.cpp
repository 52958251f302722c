#include "io/checkpoint.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/build_info.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "io/atomic_file.h"
#include "io/h5_util.h"
#include "optim/optimizer.h"
#include "optim/optimizer_state.h"

namespace pt::io {

namespace {

// Index of the first NaN or infinity of v[0, n), or -1.
template <typename T>
int64_t first_nonfinite_index(const T* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return i;
  return -1;
}

// 2: optimizer state as whole-model tensors /optimizer/<kind> (1: one per range, <kind>.<i>),
// and the run's configuration (config.*) for --resume.
constexpr int64_t kFormatVersion = 2;
constexpr const char* kFormat = "paratrain-checkpoint";
constexpr size_t kMaxListedProblems = 6;

std::string what_of(const std::string& path) { return "checkpoint '" + path + "'"; }

// Opens dataset `name` under `loc`, or returns an invalid Id when there is none (no link, or
// the link is a group): expected answers, so HDF5's error printing is kept quiet.
h5::Id try_open_dataset(hid_t loc, const std::string& name) {
  h5::QuietErrors quiet;
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) <= 0) return {};
  const hid_t d = H5Dopen2(loc, name.c_str(), H5P_DEFAULT);
  return d >= 0 ? h5::Id(d, H5Dclose) : h5::Id();
}

bool is_float_dataset(hid_t dset) {
  h5::Id type(PT_H5_CHECK(H5Dget_type(dset)), H5Tclose);
  return H5Tget_class(type) == H5T_FLOAT;
}

// One error listing every problem (capped), so a mismatched file is fixed in one go.
[[noreturn]] void fail_with(const std::string& head, const std::vector<std::string>& problems) {
  std::string msg = head;
  for (size_t i = 0; i < problems.size() && i < kMaxListedProblems; ++i) msg += (i ? "; " : ": ") + problems[i];
  if (problems.size() > kMaxListedProblems)
    msg += "; and " + std::to_string(problems.size() - kMaxListedProblems) + " more";
  PT_FAIL(msg);
}

hid_t native_type_of(DType t) {
  PT_CHECK(t == DType::F32 || t == DType::F64,
           std::string("checkpoint: optimizer state must be fp32 or fp64, got ") + dtype_name(t));
  return t == DType::F32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
}

// A file that says what it is must say paratrain-checkpoint, of a version this program reads (1
// or 2); one that says nothing (a PyTorch state_dict saved with h5py) is judged by its tensors.
void check_format(hid_t file, const std::string& path) {
  if (h5::has_attr(file, "format")) {
    const std::string format = h5::read_string_attr(file, "format");
    PT_CHECK(format == kFormat, what_of(path) + " is a '" + format + "' file, not a " + kFormat);
    PT_CHECK(h5::has_attr(file, "format_version"), what_of(path) + " has no attribute 'format_version'");
  }
  if (h5::has_attr(file, "format_version")) {
    const int64_t v = h5::read_int_attr(file, "format_version");
    PT_CHECK(v >= 1 && v <= kFormatVersion, what_of(path) + " has format_version " + std::to_string(v) +
                                                "; this program reads versions 1 to " + std::to_string(kFormatVersion) +
                                                " (a newer paratrain wrote it?)");
  }
}

// The open checkpoint at `path`, its format checked.
h5::Id open_checkpoint(const std::string& path) {
  h5::Id file = h5::open_file_readonly(path, what_of(path));
  check_format(file, path);
  return file;
}

// "int64", "float16", "strings", ...: what a dataset holds, for errors.
std::string stored_type(hid_t dset) {
  h5::Id type(PT_H5_CHECK(H5Dget_type(dset)), H5Tclose);
  const size_t bits = 8 * H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits);
    case H5T_FLOAT: return "float" + std::to_string(bits);
    case H5T_STRING: return "strings";
    case H5T_COMPOUND: return "a compound type";
    default: return "a non-numeric type";
  }
}

herr_t collect_attr_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

}  // namespace

void save_checkpoint(const std::string& path, const ParamStore& params, Context& ctx, Optimizer* opt,
                     const CheckpointInfo& info) {
  if (!opt) return save_checkpoint(path, params, ctx, nullptr, nullptr, info);
  const WholeOptimizerState state = gather_optimizer_state(*opt, ctx, params.grad_numel(), /*replicated=*/true);
  save_checkpoint(path, params, ctx, &opt->config(), &state, info);
}

void save_checkpoint(const std::string& path, const ParamStore& params, Context& ctx, const OptimizerConfig* opt_cfg,
                     const WholeOptimizerState* state, const CheckpointInfo& info, bool replace) {
  PT_CHECK(params.finalized(), "save_checkpoint: the parameter store is not finalized");
  PT_CHECK((opt_cfg == nullptr) == (state == nullptr), "save_checkpoint: optimizer configuration without state");
  const std::vector<float> host = params.params_to_host(ctx);  // (numel) fp32, flat

  // Never write a diverged state: the previous checkpoint at `path` stays as it is.
  const std::string refused = "checkpoint '" + path + "' not written (the one there, if any, is kept): ";
  for (const auto& up : params.params()) {
    const Parameter& p = *up;
    const int64_t i = first_nonfinite_index(host.data() + p.offset, p.numel);
    PT_CHECK(i < 0, refused + "parameter '" + p.name + "' holds " + std::to_string(host[size_t(p.offset + i)]) +
                        " at element " + std::to_string(i) + " (the run diverged)");
  }
  if (state)
    for (const auto& t : state->tensors) {
      native_type_of(t.dtype);
      const int64_t i = t.dtype == DType::F32
                            ? first_nonfinite_index(reinterpret_cast<const float*>(state->data(t)), state->numel)
                            : first_nonfinite_index(reinterpret_cast<const double*>(state->data(t)), state->numel);
      PT_CHECK(i < 0, refused + "optimizer state '" + t.kind + "' holds a non-finite value at element " +
                          std::to_string(i) + " (the run diverged)");
    }

  auto write_checkpoint = [&](hid_t file) {
    std::vector<std::string> names;
    for (const auto& up : params.params()) {
      const Parameter& p = *up;
      const std::vector<float> values(host.begin() + p.offset, host.begin() + p.offset + p.numel);
      h5::write_dataset(file, p.name, values, p.shape);
      names.push_back(p.name);
    }
    h5::write_attr(file, "format", std::string(kFormat));
    h5::write_attr(file, "format_version", kFormatVersion);
    h5::write_attr(file, "program_version", std::string(program_version()));
    h5::write_attr(file, "git_revision", std::string(git_revision()));
    h5::write_attr(file, "parameter_names", names);  // registration (state_dict) order
    for (const auto& [k, v] : info.text) h5::write_attr(file, k, v);
    for (const auto& [k, v] : info.ints) h5::write_attr(file, k, v);
    for (const auto& [k, v] : info.reals) h5::write_attr(file, k, v);
    h5::write_attr(file, "step", info.step);
    fault::pause_if_asked("pause-in-checkpoint", "the checkpoint write of " + path);
    if (state) {
      h5::Id group(PT_H5_CHECK(H5Gcreate2(file, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)), H5Gclose);
      const OptimizerConfig& cfg = *opt_cfg;
      h5::write_attr(group, "kind", std::string(optimizer_kind_name(cfg.kind)));
      h5::write_attr(group, "step", state->steps);
      h5::write_attr(group, "lr", static_cast<double>(cfg.adamw.lr));
      h5::write_attr(group, "beta1", static_cast<double>(cfg.adamw.beta1));
      h5::write_attr(group, "beta2", static_cast<double>(cfg.adamw.beta2));
      h5::write_attr(group, "eps", static_cast<double>(cfg.adamw.eps));
      h5::write_attr(group, "weight_decay", static_cast<double>(cfg.adamw.weight_decay));
      h5::write_attr(group, "sgd_weight_decay", static_cast<double>(cfg.sgd_weight_decay));
      for (const auto& t : state->tensors) {
        const std::string dpath = "optimizer/" + t.kind;
        const auto n = static_cast<size_t>(state->numel);
        if (t.dtype == DType::F32) {
          const auto* v = reinterpret_cast<const float*>(state->data(t));
          h5::write_dataset(file, dpath, std::vector<float>(v, v + n), {state->numel});
        } else {
          const auto* v = reinterpret_cast<const double*>(state->data(t));
          h5::write_dataset(file, dpath, std::vector<double>(v, v + n), {state->numel});
        }
      }
    }
  };
  write_atomically(path, replace, "checkpoint", [&](const std::string& tmp) {
    h5::write_file(tmp, what_of(path), [&](hid_t file) { write_checkpoint(file); });
  });
}

void read_tensors(const std::string& path, const std::vector<std::pair<std::string, Shape>>& wanted,
                  const std::function<void(size_t index, const std::vector<float>& values)>& each) {
  h5::Id file = open_checkpoint(path);
  std::vector<h5::Id> datasets;
  std::vector<std::string> problems;
  for (const auto& [name, shape] : wanted) {
    h5::Id d = try_open_dataset(file, name);
    if (d < 0)
      problems.push_back("tensor '" + name + "' is missing (expected shape " + shape_str(shape) + ")");
    else if (const Shape found = h5::dataset_shape(d); found != shape)
      problems.push_back("tensor '" + name + "' has shape " + shape_str(found) + ", expected " + shape_str(shape));
    else if (!is_float_dataset(d))
      problems.push_back("tensor '" + name + "' holds " + stored_type(d) + ", not floating point (fp32 or fp64)");
    datasets.push_back(std::move(d));
  }
  if (!problems.empty()) fail_with(what_of(path) + " does not match the model", problems);
  std::vector<float> values;
  for (size_t k = 0; k < wanted.size(); ++k) {
    const auto& [name, shape] = wanted[k];
    int64_t numel = 1;
    for (const int64_t s : shape) numel *= s;
    values.assign(static_cast<size_t>(numel), 0.0f);
    if (numel > 0)
      h5::read_dataset(datasets[k], H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, values.data(),
                       what_of(path) + ": tensor '" + name + "'");
    if (const int64_t i = first_nonfinite_index(values.data(), numel); i >= 0)
      problems.push_back("tensor '" + name + "' holds " + std::to_string(values[size_t(i)]) + " at element " +
                         std::to_string(i));
    each(k, values);
  }
  if (!problems.empty())
    fail_with(what_of(path) + " holds non-finite weights (a diverged run saved it, or the file is damaged)", problems);
}

void load_weights(const std::string& path, ParamStore& params, Context& ctx) {
  PT_CHECK(params.finalized(), "load_weights: the parameter store is not finalized");
  std::vector<std::pair<std::string, Shape>> wanted;
  for (const auto& up : params.params()) wanted.emplace_back(up->name, up->shape);
  std::vector<float> host(static_cast<size_t>(params.numel()));  // (numel) fp32, flat
  read_tensors(path, wanted, [&](size_t k, const std::vector<float>& values) {
    std::copy(values.begin(), values.end(), host.begin() + params.params()[k]->offset);
  });
  params.params_from_host(ctx, host);  // also refreshes the bf16 mirror
}

void load_optimizer_state(const std::string& path, Optimizer& opt, Context& ctx, int64_t trainable_numel) {
  h5::Id file = open_checkpoint(path);
  h5::Id group;
  {
    h5::QuietErrors quiet;
    if (H5Lexists(file, "optimizer", H5P_DEFAULT) > 0)
      group = h5::Id(H5Gopen2(file, "optimizer", H5P_DEFAULT), H5Gclose);
  }
  PT_CHECK(group >= 0, what_of(path) + " has no optimizer state (group /optimizer): it holds weights only");
  // This rank's pieces of each whole-model state tensor (optim/optimizer_state.h), each read
  // from its slice of /optimizer/<kind>; format 1 named the one range's tensor "<kind>.0".
  auto pieces = opt.state_pieces();
  std::vector<std::vector<char>> host(pieces.size());
  std::vector<std::string> problems;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Optimizer::StatePiece& p = pieces[i];
    check_contiguous(p.values, "optimizer state");
    const hid_t mem = native_type_of(p.values.dtype());
    std::string name = p.kind;
    h5::Id d = try_open_dataset(group, name);
    if (d < 0) {
      d = try_open_dataset(group, name + ".0");
      if (d >= 0) name += ".0";
    }
    const std::string missing =
        "state '" + p.kind + "' is missing (expected " + std::to_string(trainable_numel) + " elements)";
    if (d < 0) {
      if (std::find(problems.begin(), problems.end(), missing) == problems.end()) problems.push_back(missing);
      continue;
    }
    const Shape found = h5::dataset_shape(d);
    if (found != Shape{trainable_numel}) {
      problems.push_back("state '" + name + "' has shape " + shape_str(found) + ", expected " +
                         shape_str({trainable_numel}) + " (the state of another model?)");
      continue;
    }
    if (!is_float_dataset(d)) {
      problems.push_back("state '" + name + "' has dtype " + stored_type(d) +
                         ", expected floating point (fp32 or fp64)");
      continue;
    }
    const int64_t n = p.values.numel();
    host[i].resize(p.values.nbytes());
    if (n == 0) continue;
    h5::Id space(PT_H5_CHECK(H5Dget_space(d)), H5Sclose);
    const hsize_t start[1] = {static_cast<hsize_t>(p.grad_begin)}, count[1] = {static_cast<hsize_t>(n)};
    PT_H5_CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr));
    h5::Id memspace(PT_H5_CHECK(H5Screate_simple(1, count, nullptr)), H5Sclose);
    h5::read_dataset(d, mem, memspace, space, host[i].data(), what_of(path) + ": optimizer state '" + name + "'");
  }
  if (!problems.empty()) fail_with(what_of(path) + ": optimizer state does not match", problems);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Optimizer::StatePiece& p = pieces[i];
    const int64_t n = p.values.numel();
    // Finite, and the second moment (a running mean of squares) never negative. Elements are
    // named by their index in the whole tensor.
    auto check = [&](const auto* v) {
      const int64_t bad = first_nonfinite_index(v, n);
      if (bad >= 0) {
        problems.push_back("state '" + p.kind + "' holds " + std::to_string(double(v[bad])) + " at element " +
                           std::to_string(p.grad_begin + bad));
        return;
      }
      if (p.kind.rfind("exp_avg_sq", 0) != 0) return;
      for (int64_t k = 0; k < n; ++k)
        if (v[k] < 0) {
          problems.push_back("state '" + p.kind + "' is " + std::to_string(double(v[k])) + " at element " +
                             std::to_string(p.grad_begin + k) + "; a second moment is never negative");
          return;
        }
    };
    if (p.values.dtype() == DType::F32)
      check(reinterpret_cast<const float*>(host[i].data()));
    else
      check(reinterpret_cast<const double*>(host[i].data()));
  }
  if (!problems.empty()) fail_with(what_of(path) + ": optimizer state is not usable", problems);
  const int64_t step = h5::read_int_attr(group, "step");
  PT_CHECK(step >= 0, what_of(path) + ": optimizer attribute 'step' is " + std::to_string(step) +
                          "; it counts updates, so it is never negative");
  for (size_t i = 0; i < pieces.size(); ++i) {
    Tensor& t = pieces[i].values;
    copy_bytes(ctx, t.data(), t.device().kind, host[i].data(), DeviceKind::CPU, t.nbytes());
  }
  opt.set_steps_taken(step);
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  h5::Id file = open_checkpoint(path);
  std::vector<std::string> names;
  hsize_t idx = 0;
  PT_H5_CHECK(H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr_name, &names));
  CheckpointInfo info;
  PT_CHECK(h5::has_attr(file, "step"), what_of(path) + " has no 'step' attribute (not a paratrain checkpoint?)");
  for (const auto& name : names) {
    h5::Id attr(PT_H5_CHECK(H5Aopen(file, name.c_str(), H5P_DEFAULT)), H5Aclose);
    h5::Id type(PT_H5_CHECK(H5Aget_type(attr)), H5Tclose);
    h5::Id space(PT_H5_CHECK(H5Aget_space(attr)), H5Sclose);
    if (PT_H5_CHECK(H5Sget_simple_extent_ndims(space)) != 0) continue;  // lists: parameter_names
    switch (H5Tget_class(type)) {
      case H5T_STRING: info.text[name] = h5::read_string_attr(file, name); break;
      case H5T_INTEGER: info.ints[name] = h5::read_int_attr(file, name); break;
      case H5T_FLOAT: info.reals[name] = h5::read_double_attr(file, name); break;
      default: break;
    }
  }
  PT_CHECK(info.ints.count("step"), what_of(path) + ": attribute 'step' is not an integer");
  info.step = info.ints.at("step");
  info.ints.erase("step");
  PT_CHECK(info.step >= 0, what_of(path) + ": attribute 'step' is " + std::to_string(info.step) +
                               "; it counts the steps done, so it is never negative");
  return info;
}

namespace {

// Every dataset under the file, by path, for verify_checkpoint.
herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* names) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

// Reads a floating-point dataset in pieces of whole rows (dimension 0) of about `budget`
// values, so a whole-model optimizer tensor never needs its size in host memory.
void verify_float_dataset(hid_t d, const std::string& what) {
  const Shape shape = h5::dataset_shape(d);
  if (shape.empty()) return;
  int64_t row = 1;
  for (size_t i = 1; i < shape.size(); ++i) row *= shape[i];
  constexpr int64_t kBudget = int64_t{1} << 24;
  const int64_t rows_per_piece = std::max<int64_t>(1, kBudget / std::max<int64_t>(row, 1));
  h5::Id file_space(PT_H5_CHECK(H5Dget_space(d)), H5Sclose);
  std::vector<float> values;
  for (int64_t r0 = 0; r0 < shape[0]; r0 += rows_per_piece) {
    std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
    start[0] = static_cast<hsize_t>(r0);
    count[0] = static_cast<hsize_t>(std::min(rows_per_piece, shape[0] - r0));
    const int64_t n = static_cast<int64_t>(count[0]) * row;
    if (n == 0) continue;
    values.resize(static_cast<size_t>(n));
    PT_H5_CHECK(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
    const hsize_t mem_n = static_cast<hsize_t>(n);
    h5::Id mem_space(PT_H5_CHECK(H5Screate_simple(1, &mem_n, nullptr)), H5Sclose);
    h5::read_dataset(d, H5T_NATIVE_FLOAT, mem_space, file_space, values.data(), what);
    if (const int64_t i = first_nonfinite_index(values.data(), n); i >= 0)
      PT_FAIL(what + " holds " + std::to_string(values[size_t(i)]) + " at element " + std::to_string(r0 * row + i));
  }
}

}  // namespace

void verify_checkpoint(const std::string& path) {
  read_checkpoint_info(path);
  h5::Id file = open_checkpoint(path);
  std::vector<std::string> names;
  PT_H5_CHECK(H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, collect_dataset, &names, H5O_INFO_BASIC));
  for (const std::string& name : names) {
    h5::Id d(PT_H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT)), H5Dclose);
    if (is_float_dataset(d)) verify_float_dataset(d, what_of(path) + ": dataset '" + name + "'");
  }
}

void add_sampler_state(CheckpointInfo& info, const SamplerConfig& cfg) {
  info.text["data.sampling"] = sampling_name(cfg.sampling);
  info.ints["data.seed"] = static_cast<int64_t>(cfg.seed);  // bit pattern of the uint64
  info.ints["data.global_batch"] = cfg.global_batch;
  info.ints["data.context_length"] = cfg.context_length;
}

void restore_sampler_state(const CheckpointInfo& info, SamplerConfig& cfg) {
  const auto s = info.text.find("data.sampling");
  const auto seed = info.ints.find("data.seed");
  PT_CHECK(s != info.text.end() && seed != info.ints.end(),
           "checkpoint has no data sampler state (data.sampling, data.seed)");
  cfg.sampling = sampling_from_name(s->second);
  cfg.seed = static_cast<uint64_t>(seed->second);
}

}  // namespace pt::io
