// `paratrain train` end to end on the CPU: the loss falls on the sample data, a resumed run
// reproduces an uninterrupted one, --fused off gives the losses of --fused on, gradients sent in
// bf16 (--grad-comm bf16) train as well, and bad input gets one clear error line, a non-zero
// exit and no results file.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "common/test_util.h"
#include "core/exit_codes.h"

namespace pt {
namespace {

namespace fs = std::filesystem;

// Options of a model small enough that 40 CPU steps take about a second; `over` replaces or
// adds options (each option appears once: the CLI rejects repeats).
std::string tiny(const std::map<std::string, std::string>& over = {}) {
  std::map<std::string, std::string> o = {{"model", "tiny"},   {"d-model", "32"}, {"num-layers", "1"},
                                          {"num-heads", "2"},  {"d-ff", "64"},    {"context-length", "16"},
                                          {"batch-size", "4"}, {"device", "cpu"}, {"log-every", "1"}};
  for (const auto& [k, v] : over) o[k] = v;
  std::string s = "train";
  for (const auto& [k, v] : o) s += " --" + k + (v.empty() ? "" : " " + v);
  return s + " ";
}

std::vector<double> printed_losses(const std::string& output) {
  std::vector<double> out;
  static const std::regex re("loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[1]));
  return out;
}

// A double column of the run record's train_steps table, read with the plain HDF5 API.
std::vector<double> recorded_column(const std::string& path, const char* column) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << path;
  hid_t d = H5Dopen2(f, "train_steps", H5P_DEFAULT);
  EXPECT_GE(d, 0);
  hid_t space = H5Dget_space(d);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  hid_t mem = H5Tcreate(H5T_COMPOUND, sizeof(double));
  H5Tinsert(mem, column, 0, H5T_NATIVE_DOUBLE);
  std::vector<double> values(n);
  EXPECT_GE(H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0) << column;
  H5Tclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return values;
}

std::vector<double> recorded_losses(const std::string& path) { return recorded_column(path, "loss"); }

TEST(TrainCli, LossFallsOnTheSampleDataAndEveryStepIsRecorded) {
  const std::string dir = test::scratch_dir("train_falls");
  const std::string out = dir + "/run.h5";
  test::CliResult r =
      test::run_paratrain(tiny({{"steps", "40"}, {"lr", "1e-2"}, {"warmup-steps", "4"}}) + "--out " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::vector<double> printed = printed_losses(r.output);
  ASSERT_EQ(printed.size(), 40u) << r.output;
  const std::vector<double> rec = recorded_losses(out);
  ASSERT_EQ(rec.size(), 40u);
  EXPECT_NEAR(rec.front(), std::log(10000.0), 0.5) << "starts near uniform over the vocabulary";
  double tail = 0;
  for (size_t i = 35; i < 40; ++i) tail += rec[i] / 5;
  EXPECT_LT(tail, rec.front() - 1.5) << "the loss falls by more than 1.5 nats in 40 steps";
  for (size_t i = 0; i < 40; ++i) EXPECT_NEAR(printed[i], rec[i], 6e-5) << "stdout and HDF5 agree";
}

TEST(TrainCli, SaveLoadContinueGivesTheLossesOfAnUninterruptedRun) {
  const std::string dir = test::scratch_dir("train_resume");
  auto run = [&](std::map<std::string, std::string> over) {
    // The schedule is fixed by --cosine-steps, so a run cut short at step 5 follows the same
    // learning rates as the full one (as a preempted 10-step run would).
    over.insert({{"sampling", "sequential"}, {"warmup-steps", "2"}, {"steps", "10"}, {"cosine-steps", "10"}});
    return test::run_paratrain(tiny(over));
  };
  test::CliResult full = run({{"out", dir + "/full.h5"}});
  ASSERT_EQ(full.rc, 0) << full.output;
  // The first half stops at step 5 with a checkpoint, as a crashed or preempted run would.
  test::CliResult first = run({{"steps", "5"}, {"save", dir + "/ck.h5"}, {"out", dir + "/first.h5"}});
  ASSERT_EQ(first.rc, 0) << first.output;
  test::CliResult rest = run({{"resume", dir + "/ck.h5"}, {"out", dir + "/rest.h5"}});
  ASSERT_EQ(rest.rc, 0) << rest.output;
  const auto a = recorded_losses(dir + "/full.h5"), b = recorded_losses(dir + "/first.h5"),
             c = recorded_losses(dir + "/rest.h5");
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), 5u);
  ASSERT_EQ(c.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b[i], a[i]) << "step " << i + 1;
  // The same arithmetic in the same order on the CPU: bit-identical.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(c[i], a[i + 5]) << "step " << i + 6;

  // --init-from takes the weights only: a fresh optimizer from step 0.
  test::CliResult init = run({{"init-from", dir + "/ck.h5"}, {"steps", "1"}, {"out", dir + "/init.h5"}});
  ASSERT_EQ(init.rc, 0) << init.output;
  EXPECT_LT(recorded_losses(dir + "/init.h5")[0], a[0] - 0.01) << "started from trained weights";
}

TEST(TrainCli, DataParallelRunsMatchOneProcessForEveryStrategy) {
  const std::string dir = test::scratch_dir("train_ddp");
  // SGD: an update proportional to the gradient, so rank-averaging rounding stays at 1e-7
  // (Adam would magnify it in near-zero gradients). Global batch 4 = 2 ranks × 2. The clip
  // (gradient norms are about 0.8 here) acts, so sharded optimizers clip by the global norm.
  auto args = [&](const std::string& out, const std::string& extra) {
    return tiny({{"steps", "4"},
                 {"sampling", "sequential"},
                 {"optimizer", "sgd"},
                 {"lr", "0.5"},
                 {"warmup-steps", "0"},
                 {"grad-clip", "0.5"},
                 {"out", dir + "/" + out}}) +
           extra;
  };
  ASSERT_EQ(test::run_paratrain(args("one.h5", "")).rc, 0);
  const auto ref = recorded_losses(dir + "/one.h5");
  const std::vector<std::string> variants = {
      "--ddp naive", "--ddp flat", "--ddp overlap", "--ddp bucketed --bucket-mb 0.01",
      "--ddp bucketed --shard-optimizer broadcast", "--ddp flat --shard-optimizer zero1",
      // Unfused, sharded optimizers clip their own ranges and refresh nothing else differently.
      "--ddp bucketed --shard-optimizer broadcast --fused off", "--ddp overlap --shard-optimizer zero1 --fused off",
      // ZeRO-1 over many buckets, its gathers left for the next forward, or waited for.
      "--ddp bucketed --bucket-mb 0.01 --shard-optimizer zero1",
      "--ddp bucketed --bucket-mb 0.01 --shard-optimizer zero1 --zero1-prefetch off"};
  for (size_t i = 0; i < variants.size(); ++i) {
    const std::string out = "two_" + std::to_string(i) + ".h5";
    test::CliResult r = test::run_paratrain_mpi(2, args(out, variants[i]));
    ASSERT_EQ(r.rc, 0) << variants[i] << ": " << r.output;
    const auto got = recorded_losses(dir + "/" + out);
    ASSERT_EQ(got.size(), ref.size()) << variants[i];
    for (size_t s = 0; s < ref.size(); ++s)
      EXPECT_NEAR(got[s], ref[s], 1e-5 * ref[s]) << variants[i] << " step " << s + 1;
  }
  // A global batch the ranks cannot split evenly is refused on every rank, before any work.
  test::CliResult odd = test::run_paratrain_mpi(2, tiny({{"batch-size", "3"}, {"out", dir + "/odd.h5"}}));
  EXPECT_NE(odd.rc, 0);
  EXPECT_NE(odd.output.find("divisible"), std::string::npos) << odd.output;
  EXPECT_FALSE(fs::exists(dir + "/odd.h5"));
}

TEST(TrainCli, Bf16GradCommTrainsWithAFallingLossCloseToFp32) {
  const std::string dir = test::scratch_dir("train_grad_comm");
  auto args = [&](const std::string& out, const std::string& extra) {
    return tiny({{"steps", "30"}, {"lr", "1e-2"}, {"warmup-steps", "4"}, {"out", dir + "/" + out}}) + extra;
  };
  test::CliResult bf16 = test::run_paratrain_mpi(2, args("bf16.h5", "--ddp bucketed --grad-comm bf16"));
  ASSERT_EQ(bf16.rc, 0) << bf16.output;
  EXPECT_NE(bf16.output.find("grad comm bf16"), std::string::npos) << bf16.output;
  test::CliResult fp32 = test::run_paratrain_mpi(2, args("fp32.h5", "--ddp bucketed --grad-comm fp32"));
  ASSERT_EQ(fp32.rc, 0) << fp32.output;
  const auto got = recorded_losses(dir + "/bf16.h5"), ref = recorded_losses(dir + "/fp32.h5");
  ASSERT_EQ(got.size(), 30u);
  ASSERT_EQ(ref.size(), 30u);
  double tail = 0;
  for (size_t i = 25; i < 30; ++i) tail += got[i] / 5;
  for (double l : got) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(tail, got.front() - 1.5) << "the loss falls by more than 1.5 nats in 30 steps";
  // Step 1's loss comes before any update; after it, bf16's rounding of the averaged gradients
  // shows in the losses, a little.
  EXPECT_EQ(got[0], ref[0]);
  size_t differ = 0;
  for (size_t s = 1; s < 30; ++s) {
    EXPECT_NEAR(got[s], ref[s], 1e-3 * ref[s]) << "step " << s + 1;
    differ += got[s] != ref[s];
  }
  EXPECT_GT(differ, 0u) << "--grad-comm bf16 changed nothing";

  // ZeRO-1's reduce-scatter in bf16 trains too.
  test::CliResult zero1 =
      test::run_paratrain_mpi(2, args("zero1.h5", "--ddp flat --shard-optimizer zero1 --grad-comm bf16"));
  ASSERT_EQ(zero1.rc, 0) << zero1.output;
  const auto z = recorded_losses(dir + "/zero1.h5");
  ASSERT_EQ(z.size(), 30u);
  EXPECT_LT(z.back(), z.front() - 1.5);

  // Nothing communicated, nothing compressed: one rank, or --ddp none, accepts bf16 and gives
  // the losses of fp32.
  ASSERT_EQ(test::run_paratrain(args("one_fp32.h5", "")).rc, 0);
  test::CliResult one = test::run_paratrain(args("one_bf16.h5", "--grad-comm bf16"));
  ASSERT_EQ(one.rc, 0) << one.output;
  EXPECT_EQ(recorded_losses(dir + "/one_bf16.h5"), recorded_losses(dir + "/one_fp32.h5"));
  test::CliResult none = test::run_paratrain_mpi(2, args("none_bf16.h5", "--ddp none --grad-comm bf16"));
  ASSERT_EQ(none.rc, 0) << none.output;
  EXPECT_NE(none.output.find("ddp none, sharding none, grad comm fp32"), std::string::npos) << none.output;
}

TEST(TrainCli, UnfusedRunsGiveTheLossesOfFusedOnes) {
  const std::string dir = test::scratch_dir("train_fused");
  // A clip far below the gradient norm, so the unfused clip pass (and the fused one) acts.
  auto run = [&](const char* fused) {
    const std::string out = dir + "/" + fused + ".h5";
    test::CliResult r = test::run_paratrain(tiny({{"steps", "5"},
                                                  {"sampling", "sequential"},
                                                  {"grad-clip", "0.05"},
                                                  {"warmup-steps", "1"},
                                                  {"fused", fused},
                                                  {"out", out}}));
    EXPECT_EQ(r.rc, 0) << r.output;
    return out;
  };
  const std::string on = run("on"), off = run("off");
  const auto loss_on = recorded_losses(on), loss_off = recorded_losses(off);
  const auto norm_on = recorded_column(on, "grad_norm"), norm_off = recorded_column(off, "grad_norm");
  ASSERT_EQ(loss_on.size(), 5u);
  ASSERT_EQ(loss_off.size(), 5u);
  for (size_t s = 0; s < 5; ++s) {
    EXPECT_GT(norm_on[s], 0.05) << "the clip acts at step " << s + 1;
    // fp32 on the CPU: the split GEMMs and separate passes only round differently.
    EXPECT_NEAR(loss_off[s], loss_on[s], 1e-5 * loss_on[s]) << "step " << s + 1;
    EXPECT_NEAR(norm_off[s], norm_on[s], 1e-5 * norm_on[s]) << "step " << s + 1;
  }
}

struct BadCase {
  const char* name;
  std::string args;
  const char* expected;  // a phrase the error line must contain
};

TEST(TrainCli, BadInputGetsOneClearErrorAndNoResults) {
  const std::string dir = test::scratch_dir("train_bad");
  // Token files, each wrong in one way.
  test::write_npy_raw(dir + "/2d.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (4, 4), }",
                      std::string(32, '\1'));
  test::write_npy(dir + "/short.npy", std::vector<uint16_t>(10, 1), "<u2");
  test::write_npy(dir + "/big_ids.npy", std::vector<uint16_t>(100, 20000), "<u2");
  test::write_npy_raw(dir + "/truncated.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (100,), }",
                      std::string(50, '\1'));
  test::write_npy(dir + "/float.npy", std::vector<float>(100, 1.0f), "<f4");
  // A checkpoint of a one-layer model, then loads into models it does not fit.
  ASSERT_EQ(test::run_paratrain(tiny({{"steps", "1"}, {"save", dir + "/ck1.h5"}, {"out", dir + "/ck1_run.h5"}})).rc, 0);
  const std::vector<BadCase> cases = {
      {"unknown flag", "train --bogus 1", "unrecognised option"},
      {"malformed value", "train --steps many", "steps"},
      {"contradictory flags", "train --init-from " + dir + "/ck1.h5 --resume " + dir + "/ck1.h5", "contradict"},
      {"save-every without save", "train --save-every 5", "--save"},
      {"unknown size", "train --model enormous", "enormous"},
      {"fused neither on nor off", tiny({{"fused", "maybe"}}), "--fused must be on or off, got 'maybe'"},
      {"unknown GEMM selection", tiny({{"gemm", "fastest"}}), "--gemm must be autotune, cublas or lt (got 'fastest')"},
      {"unknown gradient wire type", tiny({{"grad-comm", "fp16"}}), "--grad-comm must be fp32 or bf16 (got 'fp16')"},
      {"zero1 prefetch neither on nor off", tiny({{"zero1-prefetch", "maybe"}}),
       "--zero1-prefetch must be on or off, got 'maybe'"},
      {"deterministic neither on nor off", tiny({{"deterministic", "maybe"}}),
       "--deterministic must be on or off, got 'maybe'"},
      {"SMs for the update on the CPU", tiny({{"update-sms", "4"}}), "--update-sms needs a GPU"},
      {"a negative SM count for the update", tiny({{"update-sms", "-1"}}),
       "--update-sms must be >= 0 and <= 2147483647, got -1"},
      {"heads do not divide", tiny({{"num-heads", "3"}}), "divisible"},
      {"bf16 without GPU", tiny({{"precision", "bf16"}}), "bf16"},
      {"fp8 without GPU", tiny({{"precision", "fp8"}}),
       "--precision fp8 needs a GPU with FP8 tensor cores (compute capability 8.9 or newer); this run is on the CPU"},
      {"missing token file", tiny({{"data", dir + "/nope.npy"}}), "nope.npy"},
      {"2-D token file", tiny({{"data", dir + "/2d.npy"}}), "1-D"},
      {"truncated token file", tiny({{"data", dir + "/truncated.npy"}}), "truncated"},
      {"float token file", tiny({{"data", dir + "/float.npy"}}), "f4"},
      {"ids beyond the vocabulary", tiny({{"data", dir + "/big_ids.npy"}}), "20000"},
      {"file shorter than the context", tiny({{"data", dir + "/short.npy"}}), "16"},
      {"checkpoint missing tensors", tiny({{"num-layers", "2"}, {"init-from", dir + "/ck1.h5"}}), "layers.1"},
      {"checkpoint mis-shaped tensors", tiny({{"d-model", "64"}, {"init-from", dir + "/ck1.h5"}}), "shape"},
      {"missing checkpoint", tiny({{"init-from", dir + "/none.h5"}}), "none.h5"},
  };
  for (const BadCase& c : cases) {
    const std::string out = dir + "/out_" + std::to_string(&c - cases.data()) + ".h5";
    test::CliResult r = test::run_paratrain(c.args + " --out " + out);
    EXPECT_NE(r.rc, 0) << c.name << ": " << r.output;
    // One line that starts with the program's error prefix, naming the problem.
    const std::regex err("(^|\n)paratrain: error: [^\n]*");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, err)) << c.name << ": " << r.output;
    EXPECT_NE(m.str().find(c.expected), std::string::npos) << c.name << ": " << m.str();
    size_t errors = 0;
    for (size_t p = r.output.find("error"); p != std::string::npos; p = r.output.find("error", p + 1)) ++errors;
    EXPECT_EQ(errors, 1u) << c.name << ": " << r.output;
    EXPECT_FALSE(fs::exists(out)) << c.name << ": nothing is written";
  }
}

TEST(TrainCli, HelpListsTheOptionsAndExitsZero) {
  test::CliResult r = test::run_paratrain("train --help");
  EXPECT_EQ(r.rc, 0);
  for (const char* opt : {"--model", "--data", "--sampling", "--batch-size", "--lr", "--save", "--resume",
                          "--recompute", "--fused", "--gemm", "--precision", "--device", "--out", "--grad-comm",
                          "bf16_compress_hook", "--zero1-prefetch", "--deterministic", "--update-sms"})
    EXPECT_NE(r.output.find(opt), std::string::npos) << opt;
}

// The exit codes have one table (core/exit_codes.h): `paratrain --help` prints it and README's
// "When something goes wrong" must list every code in it.
TEST(TrainCli, ExitCodesAreListedByHelpAndReadme) {
  test::CliResult r = test::run_paratrain("--help");
  EXPECT_EQ(r.rc, 0);
  std::ifstream in(std::string(std::getenv("PARATRAIN_SOURCE_DIR")) + "/README.md");
  const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const ExitCodeInfo& e : kExitCodes) {
    EXPECT_NE(r.output.find(e.meaning), std::string::npos) << e.code;
    const std::string row = e.code >= 128 ? "| 128 + N |" : "| " + std::to_string(e.code) + " |";
    EXPECT_NE(readme.find(row), std::string::npos) << "README has no row for exit code " << e.code;
  }
}

}  // namespace
}  // namespace pt
