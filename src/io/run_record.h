#pragma once
// RunRecord: the HDF5 file of one run. Root attributes describe the run (command line,
// options, versions, hosts, GPUs, world size, start time); result tables are compound
// datasets; timelines are plain datasets. Rank 0 writes it atomically (temp file + rename).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/table.h"

namespace pt {
class Context;
}

namespace pt::io {

class RunRecord {
 public:
  // `path` empty → "<subcommand>-<YYYYmmdd-HHMMSS>.h5" in the working directory. Fails at
  // once (before any work) if the file exists and overwrite is false, its directory is not
  // writable, or another run holds it (OutputLock, held until this record is destroyed), so a
  // long sweep never loses its results at the end. Under MPI only rank 0 (the writer) checks;
  // construct it on every rank or on rank 0 alone.
  RunRecord(const std::string& subcommand, const std::string& path, bool overwrite);

  const std::string& path() const { return path_; }

  // Root attributes. Values are stored as strings, int64 or double attributes.
  void set_attr(const std::string& key, const std::string& value);
  void set_attr(const std::string& key, int64_t value);
  void set_attr(const std::string& key, double value);
  // A 1-D array of strings (h5py: numpy array of str), e.g. one host name per rank.
  void set_attr(const std::string& key, const std::vector<std::string>& values);
  void set_attr(const std::string& key, const char* value) { set_attr(key, std::string(value)); }
  // Every option's value, stored as "option.<name>" attributes.
  void set_options(const std::map<std::string, std::string>& options);
  // Collective over MPI_COMM_WORLD (every rank must call): host names, GPU names, driver,
  // CUDA/cuBLAS/NCCL/MPI versions, world size, git revision, program version, start time,
  // command line. ctx may describe a CPU run.
  void collect_environment(const Context& ctx);

  void add_table(const ResultTable& table);  // dataset "/<table name>" (replaces same name)
  // A 1-D or 2-D numeric dataset, e.g. "/memory/timeline_bytes". Parent groups are created.
  void add_dataset(const std::string& path, const std::vector<double>& values, const std::vector<int64_t>& shape = {},
                   const std::string& description = "");
  void add_dataset(const std::string& path, const std::vector<int64_t>& values, const std::vector<int64_t>& shape = {},
                   const std::string& description = "");
  void add_strings(const std::string& path, const std::vector<std::string>& values,
                   const std::string& description = "");

  // Writes everything to "<path>.tmp.<pid>" and renames it over `path`. Only the calling
  // rank writes: call it on rank 0 after gathering. May be called again (rewrites the file:
  // long runs commit periodically so a crash loses at most the last interval).
  void commit();

 private:
  struct Dataset;
  std::string subcommand_, path_;
  bool overwrite_;
  std::unique_ptr<OutputLock> lock_;  // rank 0
  std::map<std::string, std::string> str_attrs_;
  std::map<std::string, int64_t> int_attrs_;
  std::map<std::string, double> dbl_attrs_;
  std::map<std::string, std::vector<std::string>> list_attrs_;
  std::string start_time_;  // ISO-8601 UTC, when the record was created
  void erase_attr(const std::string& key);
  std::vector<ResultTable> tables_;
  struct NumericDataset {
    std::string path, description;
    std::vector<int64_t> shape;
    std::vector<double> dvalues;
    std::vector<int64_t> ivalues;
    bool is_int = false;
  };
  std::vector<NumericDataset> datasets_;
  struct StringDataset {
    std::string path, description;
    std::vector<std::string> values;
  };
  std::vector<StringDataset> string_datasets_;
  bool committed_once_ = false;
};

// Default results file name for a subcommand: "<subcommand>-<YYYYmmdd-HHMMSS>.h5".
std::string default_output_name(const std::string& subcommand);

}  // namespace pt::io
