#include "io/run_record.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <hdf5.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>

#include "core/build_info.h"
#include "core/context.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/h5_util.h"
#include "io/library_versions.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"

namespace pt::io {

namespace {

constexpr int64_t kSchemaVersion = 1;

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool mpi_usable() {
  int init = 0, fin = 0;
  PT_MPI_CHECK(MPI_Initialized(&init));
  PT_MPI_CHECK(MPI_Finalized(&fin));
  return init && !fin;
}

void write_table(hid_t file, const ResultTable& t) {
  using h5::Id;
  const auto& cols = t.columns();
  PT_CHECK(!cols.empty(), "table '" + t.name() + "' has no columns");
  // Packed row layout: each field at its byte offset; strings fixed-width per column.
  std::vector<size_t> width(cols.size()), offset(cols.size());
  size_t row_bytes = 0;
  for (size_t c = 0; c < cols.size(); ++c) {
    if (cols[c].type == ColumnType::String) {
      width[c] = 1;
      for (size_t r = 0; r < t.rows(); ++r) width[c] = std::max(width[c], std::get<std::string>(t.at(r, c)).size());
    } else {
      width[c] = 8;
    }
    offset[c] = row_bytes;
    row_bytes += width[c];
  }
  Id type(PT_H5_CHECK(H5Tcreate(H5T_COMPOUND, row_bytes)), H5Tclose);
  std::vector<Id> string_types;
  for (size_t c = 0; c < cols.size(); ++c) {
    hid_t field = H5T_NATIVE_INT64;
    if (cols[c].type == ColumnType::Double) field = H5T_NATIVE_DOUBLE;
    if (cols[c].type == ColumnType::String) {
      string_types.push_back(h5::fixed_string_type(width[c]));
      field = string_types.back();
    }
    PT_H5_CHECK(H5Tinsert(type, cols[c].name.c_str(), offset[c], field));
  }
  std::vector<char> buf(row_bytes * t.rows(), '\0');  // (rows, row_bytes)
  for (size_t r = 0; r < t.rows(); ++r) {
    char* row = buf.data() + r * row_bytes;
    for (size_t c = 0; c < cols.size(); ++c) {
      const Value& v = t.at(r, c);
      if (cols[c].type == ColumnType::Int) {
        const int64_t x = std::get<int64_t>(v);
        std::memcpy(row + offset[c], &x, 8);
      } else if (cols[c].type == ColumnType::Double) {
        const double x = std::get<double>(v);
        std::memcpy(row + offset[c], &x, 8);
      } else {
        const std::string& s = std::get<std::string>(v);
        std::memcpy(row + offset[c], s.data(), s.size());
      }
    }
  }
  const std::string path = "/" + t.name();
  const hsize_t dims[1] = {t.rows()};
  Id space(PT_H5_CHECK(H5Screate_simple(1, dims, nullptr)), H5Sclose);
  Id lcpl = h5::lcpl_with_parents();
  Id dset(PT_H5_CHECK(H5Dcreate2(file, path.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT)), H5Dclose);
  if (t.rows() > 0) PT_H5_CHECK(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()));
  std::vector<std::string> descriptions;
  std::vector<int64_t> precisions;
  for (const auto& c : cols) {
    descriptions.push_back(c.description);
    precisions.push_back(c.print_precision);
  }
  h5::write_attr(dset, "description", t.description());
  h5::write_attr(dset, "field_descriptions", descriptions);
  h5::write_attr(dset, "field_precisions", precisions);
}

}  // namespace

std::string default_output_name(const std::string& subcommand) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  std::string base = subcommand.empty() ? "paratrain" : subcommand;
  for (char& ch : base)
    if (ch == ' ' || ch == '/') ch = '_';
  return base + "-" + stamp + ".h5";
}

RunRecord::RunRecord(const std::string& subcommand, const std::string& path, bool overwrite)
    : subcommand_(subcommand),
      path_(path.empty() ? default_output_name(subcommand) : path),
      overwrite_(overwrite),
      start_time_(utc_now_iso8601()) {
  // Only rank 0 writes, so only rank 0 checks: a slower rank must not find rank 0's file.
  int rank = 0;
  if (mpi_usable()) PT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  if (rank != 0) return;
  lock_ = std::make_unique<OutputLock>(path_, "results file");
  check_output_path(path_, overwrite_, "results file");
}

void RunRecord::erase_attr(const std::string& key) {
  PT_CHECK(!key.empty(), "attribute with an empty name");
  str_attrs_.erase(key);
  int_attrs_.erase(key);
  dbl_attrs_.erase(key);
  list_attrs_.erase(key);
}

void RunRecord::set_attr(const std::string& key, const std::string& value) {
  erase_attr(key);
  str_attrs_[key] = value;
}
void RunRecord::set_attr(const std::string& key, int64_t value) {
  erase_attr(key);
  int_attrs_[key] = value;
}
void RunRecord::set_attr(const std::string& key, double value) {
  erase_attr(key);
  dbl_attrs_[key] = value;
}
void RunRecord::set_attr(const std::string& key, const std::vector<std::string>& values) {
  erase_attr(key);
  list_attrs_[key] = values;
}

void RunRecord::set_options(const std::map<std::string, std::string>& options) {
  for (const auto& [k, v] : options) set_attr("option." + k, v);
}

void RunRecord::collect_environment(const Context& ctx) {
  std::string host, gpu = "none (cpu)";
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) == 0) host = buf;
  if (ctx.is_cuda()) {
    cudaDeviceProp prop{};
    PT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ctx.device().index));
    gpu = prop.name;
  }
  std::string bus_id = "none (cpu)";
  if (ctx.is_cuda()) {
    char buf_id[64] = {0};
    PT_CUDA_CHECK(cudaDeviceGetPCIBusId(buf_id, sizeof(buf_id), ctx.device().index));
    bus_id = buf_id;
  }
  using parallel::all_gather_strings;
  const auto hosts = all_gather_strings(host);
  const auto gpus = all_gather_strings(gpu);
  const auto devices = all_gather_strings(ctx.device().str());
  set_attr("gpu_pci_bus_ids", all_gather_strings(bus_id));
  set_attr("hosts", hosts);
  set_attr("gpus", gpus);
  set_attr("devices", devices);
  set_attr("world_size", static_cast<int64_t>(hosts.size()));
  // Nodes as the transports saw them: hosts, or each host's parts under PARATRAIN_TEST_SPLIT_NODES.
  std::string node = host;
  const bool emulated = parallel::Runtime::initialized() && parallel::Runtime::get().emulated_nodes();
  if (emulated) node += "/test-node-" + std::to_string(parallel::Runtime::get().node_index());
  std::map<std::string, int64_t> per_node;
  for (const auto& n : all_gather_strings(node)) ++per_node[n];
  set_attr("nodes", static_cast<int64_t>(per_node.size()));
  set_attr("ranks_per_node", static_cast<int64_t>(per_node.empty() ? 0 : per_node.begin()->second));
  if (emulated) set_attr("emulated_nodes", std::string("PARATRAIN_TEST_SPLIT_NODES: one host split into nodes"));
  set_attr("precision", std::string(precision_name(ctx.precision())));
  // The Slurm job that made this record (absent outside Slurm): what sacct and the logs name.
  for (const char* name : {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_NODELIST",
                           "SLURM_NTASKS_PER_NODE", "SLURM_JOB_PARTITION", "SLURM_RESTART_COUNT"})
    if (const char* v = std::getenv(name)) {
      std::string key = name;
      for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      set_attr(key, std::string(v));
    }

  for (const auto& [name, value] : library_versions()) set_attr(name, value);

  set_attr("program_version", std::string(program_version()));
  set_attr("git_revision", std::string(git_revision()));
  set_attr("command_line", invocation());
}

void RunRecord::add_table(const ResultTable& table) {
  table.validate();
  for (auto& t : tables_)
    if (t.name() == table.name()) {
      t = table;
      return;
    }
  tables_.push_back(table);
}

void RunRecord::add_dataset(const std::string& path, const std::vector<double>& values,
                            const std::vector<int64_t>& shape, const std::string& description) {
  NumericDataset d{path, description, shape, values, {}, false};
  for (auto& e : datasets_)
    if (e.path == path) {
      e = std::move(d);
      return;
    }
  datasets_.push_back(std::move(d));
}

void RunRecord::add_dataset(const std::string& path, const std::vector<int64_t>& values,
                            const std::vector<int64_t>& shape, const std::string& description) {
  NumericDataset d{path, description, shape, {}, values, true};
  for (auto& e : datasets_)
    if (e.path == path) {
      e = std::move(d);
      return;
    }
  datasets_.push_back(std::move(d));
}

void RunRecord::add_strings(const std::string& path, const std::vector<std::string>& values,
                            const std::string& description) {
  StringDataset d{path, description, values};
  for (auto& e : string_datasets_)
    if (e.path == path) {
      e = std::move(d);
      return;
    }
  string_datasets_.push_back(std::move(d));
}

void RunRecord::commit() {
  for (const auto& t : tables_) t.validate();
  // After the first commit the file is ours: later commits replace it.
  const bool replace = overwrite_ || committed_once_;
  auto write_record = [&](hid_t file) {
    h5::write_attr(file, "subcommand", subcommand_);
    h5::write_attr(file, "schema_version", kSchemaVersion);
    h5::write_attr(file, "start_time", start_time_);
    h5::write_attr(file, "commit_time", utc_now_iso8601());
    for (const auto& [k, v] : str_attrs_) h5::write_attr(file, k, v);
    for (const auto& [k, v] : int_attrs_) h5::write_attr(file, k, v);
    for (const auto& [k, v] : dbl_attrs_) h5::write_attr(file, k, v);
    for (const auto& [k, v] : list_attrs_) h5::write_attr(file, k, v);
    for (const auto& t : tables_) write_table(file, t);
    auto describe = [&](const std::string& path, const std::string& description) {
      if (description.empty()) return;
      h5::Id obj(PT_H5_CHECK(H5Oopen(file, path.c_str(), H5P_DEFAULT)), H5Oclose);
      h5::write_attr(obj, "description", description);
    };
    for (const auto& d : datasets_) {
      if (d.is_int)
        h5::write_dataset(file, d.path, d.ivalues, d.shape);
      else
        h5::write_dataset(file, d.path, d.dvalues, d.shape);
      describe(d.path, d.description);
    }
    for (const auto& d : string_datasets_) {
      h5::write_strings(file, d.path, d.values);
      describe(d.path, d.description);
    }
  };
  write_atomically(path_, replace, "results file", [&](const std::string& tmp) {
    h5::write_file(tmp, "results file '" + path_ + "'", write_record);  // closed before the rename
  });
  committed_once_ = true;
}

}  // namespace pt::io
