// RunRecord: the run's HDF5 file, read back with the plain HDF5 C API: compound tables,
// attributes, numeric and string datasets, atomic writes, refusal to overwrite.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "common/test_util.h"
#include "core/build_info.h"
#include "core/context.h"
#include "core/error.h"
#include "cpu/test_io_h5.h"
#include "io/run_record.h"
#include "parallel/runtime.h"

namespace pt::io {
namespace {

namespace fs = std::filesystem;
using namespace pt::test::h5read;

using test::error_of;

// Files in `dir` other than `keep` (a leftover temporary would show up here).
// Files in `dir` but `keep` and the lock file of a record still alive ("<keep>.lock").
std::vector<std::string> other_files(const std::string& dir, const std::string& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != keep && e.path().extension() != ".lock") out.push_back(e.path().filename().string());
  return out;
}

ResultTable sample_table() {
  ResultTable t("bench_attention", "attention timings");
  t.add_string("impl", "naive or flash").add_int("seq_len", "tokens").add_double("fwd_ms", "forward time, ms", 3);
  t.add_row().set("impl", "naive").set("seq_len", 128).set("fwd_ms", 0.25);
  t.add_row().set("impl", "flash2").set("seq_len", 16384).set("fwd_ms", std::numeric_limits<double>::quiet_NaN());
  return t;
}

TEST(IoRunRecord, TableIsACompoundDatasetWithTypedFields) {
  const std::string dir = test::scratch_dir("rr_table");
  const std::string path = dir + "/run.h5";
  RunRecord rec("bench attention", path, false);
  EXPECT_FALSE(fs::exists(path)) << "nothing is written before commit()";
  rec.add_table(sample_table());
  rec.commit();
  ASSERT_TRUE(fs::exists(path));
  EXPECT_TRUE(other_files(dir, "run.h5").empty()) << "temporary file left behind";

  Handle f = open_file(path);
  ASSERT_GE(f.id, 0);
  Handle d = open_dataset(f, "/bench_attention");
  ASSERT_GE(d.id, 0);
  ASSERT_EQ(shape_of(d), std::vector<hsize_t>{2});
  Handle type{H5Dget_type(d), H5Tclose};
  ASSERT_EQ(H5Tget_class(type), H5T_COMPOUND);
  ASSERT_EQ(H5Tget_nmembers(type), 3);
  // Field order, names and types as declared: strings fixed-length UTF-8, int64, float64.
  const char* names[] = {"impl", "seq_len", "fwd_ms"};
  for (unsigned i = 0; i < 3; ++i) {
    char* n = H5Tget_member_name(type, i);
    EXPECT_STREQ(n, names[i]);
    H5free_memory(n);
  }
  Handle impl_t = member_type(d, "impl");
  EXPECT_EQ(H5Tget_class(impl_t), H5T_STRING);
  EXPECT_EQ(H5Tis_variable_str(impl_t), 0);
  EXPECT_EQ(H5Tget_cset(impl_t), H5T_CSET_UTF8);
  EXPECT_EQ(H5Tget_strpad(impl_t), H5T_STR_NULLPAD);
  EXPECT_EQ(H5Tget_size(impl_t), 6u);  // longest value, "flash2"
  Handle len_t = member_type(d, "seq_len");
  EXPECT_EQ(H5Tget_class(len_t), H5T_INTEGER);
  EXPECT_EQ(H5Tget_size(len_t), 8u);
  EXPECT_EQ(H5Tget_sign(len_t), H5T_SGN_2);
  Handle ms_t = member_type(d, "fwd_ms");
  EXPECT_EQ(H5Tget_class(ms_t), H5T_FLOAT);
  EXPECT_EQ(H5Tget_size(ms_t), 8u);

  EXPECT_EQ(read_string_field(d, "impl"), (std::vector<std::string>{"naive", "flash2"}));
  EXPECT_EQ(read_field<int64_t>(d, "seq_len", H5T_NATIVE_INT64), (std::vector<int64_t>{128, 16384}));
  const auto ms = read_field<double>(d, "fwd_ms", H5T_NATIVE_DOUBLE);
  EXPECT_EQ(ms[0], 0.25);
  EXPECT_TRUE(std::isnan(ms[1]));

  EXPECT_EQ(string_attr(d, "description"), "attention timings");
  EXPECT_EQ(string_list_attr(d, "field_descriptions"),
            (std::vector<std::string>{"naive or flash", "tokens", "forward time, ms"}));
  EXPECT_EQ(numeric_attr<int64_t>(d, "field_precisions", H5T_NATIVE_INT64), (std::vector<int64_t>{0, 0, 3}));
  EXPECT_EQ(string_attr(f, "subcommand"), "bench attention");
  EXPECT_EQ(numeric_attr<int64_t>(f, "schema_version", H5T_NATIVE_INT64), std::vector<int64_t>{1});
}

TEST(IoRunRecord, EmptyTableAndReplacingATableByName) {
  const std::string path = test::scratch_dir("rr_empty") + "/run.h5";
  RunRecord rec("t", path, false);
  ResultTable t("results");
  t.add_int("n").add_string("s");
  rec.add_table(t);
  rec.commit();
  {
    Handle f = open_file(path);
    Handle d = open_dataset(f, "/results");
    EXPECT_EQ(shape_of(d), std::vector<hsize_t>{0});
  }
  t.add_row().set("n", 7).set("s", "x");
  rec.add_table(t);  // same name: replaces, no second dataset
  rec.commit();
  Handle f = open_file(path);
  Handle d = open_dataset(f, "/results");
  EXPECT_EQ(read_field<int64_t>(d, "n", H5T_NATIVE_INT64), std::vector<int64_t>{7});
}

TEST(IoRunRecord, RootAttributesOfEveryKind) {
  const std::string path = test::scratch_dir("rr_attrs") + "/run.h5";
  RunRecord rec("train", path, false);
  rec.set_attr("note", "hello");
  rec.set_attr("steps", int64_t{42});
  rec.set_attr("lr", 1e-3);
  rec.set_attr("ranks", std::vector<std::string>{"a", "bb"});
  rec.set_attr("changes_type", int64_t{1});
  rec.set_attr("changes_type", std::string("now a string"));  // last set wins, one attribute
  rec.set_options({{"batch-size", "8"}, {"sampling", "random"}});
  rec.commit();

  Handle f = open_file(path);
  EXPECT_EQ(string_attr(f, "note"), "hello");
  EXPECT_EQ(numeric_attr<int64_t>(f, "steps", H5T_NATIVE_INT64), std::vector<int64_t>{42});
  EXPECT_EQ(numeric_attr<double>(f, "lr", H5T_NATIVE_DOUBLE), std::vector<double>{1e-3});
  EXPECT_EQ(string_list_attr(f, "ranks"), (std::vector<std::string>{"a", "bb"}));
  EXPECT_EQ(string_attr(f, "changes_type"), "now a string");
  EXPECT_EQ(string_attr(f, "option.batch-size"), "8");
  EXPECT_EQ(string_attr(f, "option.sampling"), "random");
  const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  EXPECT_TRUE(std::regex_match(string_attr(f, "start_time"), iso));
  EXPECT_TRUE(std::regex_match(string_attr(f, "commit_time"), iso));
}

TEST(IoRunRecord, NumericAndStringDatasetsWithParentsAndDescriptions) {
  const std::string path = test::scratch_dir("rr_data") + "/run.h5";
  RunRecord rec("bench model", path, false);
  rec.add_dataset("/memory/timeline_bytes", std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}, "bytes in use");
  rec.add_dataset("/memory/time_s", std::vector<double>{0.5, 1.5});
  rec.add_strings("/memory/tags", {"layers.0.attn/scores", "x"}, "allocation tags");
  rec.add_dataset("/empty", std::vector<double>{});
  rec.commit();

  Handle f = open_file(path);
  Handle a = open_dataset(f, "/memory/timeline_bytes");
  ASSERT_GE(a.id, 0);
  EXPECT_EQ(shape_of(a), (std::vector<hsize_t>{2, 3}));
  Handle at{H5Dget_type(a), H5Tclose};
  EXPECT_EQ(H5Tget_class(at), H5T_INTEGER);
  std::vector<int64_t> iv(6);
  ASSERT_GE(H5Dread(a, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, iv.data()), 0);
  EXPECT_EQ(iv, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(string_attr(a, "description"), "bytes in use");

  Handle b = open_dataset(f, "/memory/time_s");
  EXPECT_EQ(shape_of(b), std::vector<hsize_t>{2});
  std::vector<double> dv(2);
  ASSERT_GE(H5Dread(b, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, dv.data()), 0);
  EXPECT_EQ(dv, (std::vector<double>{0.5, 1.5}));
  EXPECT_FALSE(has_attr(b, "description"));

  Handle s = open_dataset(f, "/memory/tags");
  Handle st{H5Dget_type(s), H5Tclose};
  ASSERT_EQ(H5Tget_class(st), H5T_STRING);
  const size_t width = H5Tget_size(st);
  EXPECT_EQ(width, 20u);
  std::vector<char> buf(2 * width);
  ASSERT_GE(H5Dread(s, st, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), 0);
  EXPECT_EQ(std::string(buf.data(), strnlen(buf.data(), width)), "layers.0.attn/scores");
  EXPECT_EQ(std::string(buf.data() + width, strnlen(buf.data() + width, width)), "x");

  Handle e = open_dataset(f, "/empty");
  EXPECT_EQ(shape_of(e), std::vector<hsize_t>{0});
}

TEST(IoRunRecord, RefusesAnExistingFileBeforeAnyWork) {
  const std::string dir = test::scratch_dir("rr_refuse");
  const std::string path = dir + "/run.h5";
  { std::ofstream(path) << "precious"; }
  const std::string msg = error_of([&] { RunRecord rec("t", path, false); });
  EXPECT_NE(msg.find("already exists"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--overwrite"), std::string::npos) << msg;
  std::ifstream in(path);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
  EXPECT_TRUE(other_files(dir, "run.h5").empty());
}

TEST(IoRunRecord, OverwriteReplacesTheFileAtomically) {
  const std::string dir = test::scratch_dir("rr_overwrite");
  const std::string path = dir + "/run.h5";
  { std::ofstream(path) << "old"; }
  RunRecord rec("t", path, true);
  rec.set_attr("k", int64_t{1});
  rec.commit();
  Handle f = open_file(path);
  ASSERT_GE(f.id, 0);
  EXPECT_EQ(numeric_attr<int64_t>(f, "k", H5T_NATIVE_INT64), std::vector<int64_t>{1});
  EXPECT_TRUE(other_files(dir, "run.h5").empty());
}

TEST(IoRunRecord, RepeatedCommitsRewriteTheirOwnFile) {
  const std::string path = test::scratch_dir("rr_periodic") + "/run.h5";
  RunRecord rec("train", path, false);
  for (int64_t step = 1; step <= 3; ++step) {
    rec.set_attr("steps_done", step);
    rec.commit();
    Handle f = open_file(path);
    EXPECT_EQ(numeric_attr<int64_t>(f, "steps_done", H5T_NATIVE_INT64), std::vector<int64_t>{step});
  }
}

TEST(IoRunRecord, AFileThatAppearsMeanwhileIsNotClobbered) {
  const std::string dir = test::scratch_dir("rr_race");
  const std::string path = dir + "/run.h5";
  RunRecord rec("t", path, false);
  { std::ofstream(path) << "other job"; }
  const std::string msg = error_of([&] { rec.commit(); });
  EXPECT_NE(msg.find("appeared"), std::string::npos) << msg;
  std::ifstream in(path);
  std::string a, b;
  in >> a >> b;
  EXPECT_EQ(a + " " + b, "other job");
  EXPECT_TRUE(other_files(dir, "run.h5").empty()) << "temporary file left behind";
}

// Two runs started with the same output: the second is refused when it starts, before any work,
// not when it writes at its end; the name is free again once the first is done.
TEST(IoRunRecord, AnOutputIsTakenWhenTheRunStarts) {
  const std::string dir = test::scratch_dir("rr_taken");
  const std::string path = dir + "/run.h5";
  {
    RunRecord first("t", path, false);
    EXPECT_TRUE(fs::exists(path + ".lock"));
    const std::string msg = error_of([&] { RunRecord second("t", path, true); });
    EXPECT_NE(msg.find("being written by another run"), std::string::npos) << msg;
    EXPECT_NE(msg.find("pid " + std::to_string(::getpid())), std::string::npos) << msg;
    first.commit();
  }
  EXPECT_FALSE(fs::exists(path + ".lock"));
  RunRecord again("t", path, true);
  again.commit();
  EXPECT_TRUE(other_files(dir, "run.h5").empty());
}

TEST(IoRunRecord, FailedCommitLeavesNothingBehind) {
  const std::string dir = test::scratch_dir("rr_fail");
  const std::string path = dir + "/run.h5";
  RunRecord rec("t", path, false);
  rec.add_dataset("/bad", std::vector<double>{1, 2, 3}, {2, 2});  // 4 ≠ 3 values
  const std::string msg = error_of([&] { rec.commit(); });
  EXPECT_NE(msg.find("'/bad'"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(other_files(dir, "").empty()) << "temporary file left behind";
}

TEST(IoRunRecord, RejectsUnwritableLocations) {
  const std::string dir = test::scratch_dir("rr_dir");
  std::string msg = error_of([&] { RunRecord rec("t", dir + "/missing/run.h5", false); });
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  msg = error_of([&] { RunRecord rec("t", dir, true); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
}

TEST(IoRunRecord, DefaultNameFromSubcommandAndTime) {
  const std::string name = default_output_name("bench model");
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(bench_model-\d{8}-\d{6}\.h5)"))) << name;
}

TEST(IoRunRecord, IncompleteTableIsRejectedWhenAdded) {
  const std::string path = test::scratch_dir("rr_incomplete") + "/run.h5";
  RunRecord rec("t", path, false);
  ResultTable t("t");
  t.add_int("a").add_int("b");
  t.add_row().set("a", 1);
  const std::string msg = error_of([&] { rec.add_table(t); });
  EXPECT_NE(msg.find("'b'"), std::string::npos) << msg;
}

TEST(IoRunRecord, CollectEnvironmentOnOneRank) {
  int argc = 0;
  char** argv = nullptr;
  auto& rt = parallel::Runtime::init(&argc, &argv);  // MPI singleton: no launcher needed
  char arg0[] = "paratrain", arg1[] = "demo";
  char* args[] = {arg0, arg1};
  set_invocation(2, args);
  const std::string path = test::scratch_dir("rr_env") + "/run.h5";
  setenv("SLURM_JOB_ID", "4242", 1);  // as inside a Slurm job
  setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  unsetenv("SLURM_JOB_NODELIST");
  Context ctx(Device::cpu());
  RunRecord rec("demo", path, false);
  rec.collect_environment(ctx);
  rec.commit();

  Handle f = open_file(path);
  EXPECT_EQ(numeric_attr<int64_t>(f, "world_size", H5T_NATIVE_INT64), std::vector<int64_t>{rt.world_size()});
  EXPECT_EQ(string_list_attr(f, "hosts"), std::vector<std::string>{rt.hostname()});
  EXPECT_EQ(string_list_attr(f, "devices"), std::vector<std::string>{"cpu"});
  EXPECT_EQ(string_list_attr(f, "gpu_pci_bus_ids"), std::vector<std::string>{"none (cpu)"});
  EXPECT_EQ(numeric_attr<int64_t>(f, "nodes", H5T_NATIVE_INT64), std::vector<int64_t>{1});
  EXPECT_EQ(string_attr(f, "slurm_job_id"), "4242");
  EXPECT_EQ(string_attr(f, "slurm_array_task_id"), "3");
  EXPECT_FALSE(H5Aexists(f, "slurm_job_nodelist") > 0) << "only the variables that are set";
  EXPECT_EQ(string_list_attr(f, "gpus").size(), 1u);
  EXPECT_EQ(string_attr(f, "command_line"), "paratrain demo");
  EXPECT_EQ(string_attr(f, "precision"), "fp32");
  const std::regex dotted(R"(\d+\.\d+(\.\d+)?)");
  EXPECT_TRUE(std::regex_match(string_attr(f, "nccl_version"), dotted)) << string_attr(f, "nccl_version");
  EXPECT_TRUE(std::regex_match(string_attr(f, "cublas_version"), dotted)) << string_attr(f, "cublas_version");
  EXPECT_TRUE(std::regex_match(string_attr(f, "mpi_version"), dotted));
  EXPECT_TRUE(std::regex_match(string_attr(f, "hdf5_version"), dotted));
  EXPECT_FALSE(string_attr(f, "mpi_library").empty());
  EXPECT_FALSE(string_attr(f, "git_revision").empty());
  EXPECT_FALSE(string_attr(f, "program_version").empty());
  // With a driver: "13.0"; without one: "unavailable (...)". Either way present.
  for (const char* k : {"cuda_driver_version", "cuda_runtime_version"}) {
    const std::string v = string_attr(f, k);
    EXPECT_TRUE(std::regex_match(v, dotted) || v.rfind("unavailable", 0) == 0) << k << " = " << v;
  }
}

}  // namespace
}  // namespace pt::io
