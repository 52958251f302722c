// One spelling per concept in every subcommand: each subcommand accepts the one spelling of the
// concepts it has (--context-length, --batch-size, --steps, --precision, --attention,
// --num-heads, and the list options of the benchmarks), and refuses the spellings they replaced
// as a usage error with one line naming the new one.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "core/exit_codes.h"

namespace pt {
namespace {

struct Retired {
  const char* subcommand;
  const char* old_flag;
  const char* new_flag;
};

const std::vector<Retired> kRetired = {
    {"train", "--context", "--context-length"},
    {"train", "--batch", "--batch-size"},
    {"train", "--iters", "--steps"},
    {"train", "--dtype", "--precision"},
    {"train", "--impl", "--attention"},
    {"train", "--heads", "--num-heads"},
    {"bench model", "--sizes", "--model"},
    {"bench model", "--contexts", "--context-length"},
    {"bench model", "--precisions", "--precision"},
    {"bench model", "--batch", "--batch-size"},
    {"bench model", "--iters", "--steps"},
    {"bench attention", "--impl", "--attention"},
    {"bench attention", "--dtype", "--precision"},
    {"bench attention", "--batch", "--batch-size"},
    {"bench attention", "--heads", "--num-heads"},
    {"bench attention", "--seq", "--context-length"},
    {"bench attention", "--iters", "--steps"},
    {"bench gemm", "--context", "--context-length"},
    {"bench gemm", "--batch", "--batch-size"},
    {"bench gemm", "--iters", "--steps"},
    {"bench ddp", "--context", "--context-length"},
    {"bench ddp", "--batch", "--batch-size"},
    {"bench ddp", "--iters", "--steps"},
    {"bench ddp", "--heads", "--num-heads"},
    {"bench ddp", "--impl", "--attention"},
    {"bench allreduce", "--sizes", "--bytes"},
    {"bench allreduce", "--size", "--bytes"},
    {"bench allreduce", "--collectives", "--collective"},
    {"bench allreduce", "--iters", "--steps"},
    {"plan", "--context", "--context-length"},
    {"plan", "--batch", "--batch-size"},
    {"plan", "--heads", "--num-heads"},
    {"plan", "--impl", "--attention"},
    {"plan", "--dtype", "--precision"},
};

TEST(OptionSpellings, EveryRetiredSpellingIsRefusedWithTheNewOne) {
  bool with_equals = false;  // both forms, `--old 4` and `--old=4`, in turn
  for (const Retired& r : kRetired) {
    const std::string what = std::string(r.subcommand) + " " + r.old_flag + (with_equals ? "=4" : " 4");
    with_equals = !with_equals;
    const test::CliResult res = test::run_paratrain(what);
    EXPECT_EQ(res.rc, kExitUsage) << what << ": " << res.output;
    EXPECT_NE(res.output.find(std::string(r.old_flag) + " is spelled " + r.new_flag + " now"), std::string::npos)
        << what << ": " << res.output;
    EXPECT_EQ(std::count(res.output.begin(), res.output.end(), '\n'), 1) << what << ": " << res.output;
  }
}

// Each command names only the one spellings; `--device nowhere` ends the benchmarks after the
// command line is parsed (exit 1), so no usage error (exit 2) means every option was known.
TEST(OptionSpellings, EverySubcommandAcceptsTheOneSpelling) {
  const std::string stop = " --device nowhere";
  const std::vector<std::string> commands = {
      "train --model tiny --context-length 16 --batch-size 4 --steps 2 --precision fp32 --attention naive "
      "--num-heads 2" +
          stop,
      "bench model --model tiny,small --context-length 16,32 --batch-size 2 --steps 2 --precision fp32,bf16 "
      "--attention naive,flash" +
          stop,
      "bench attention --attention naive,flash --precision fp32 --batch-size 1,2 --num-heads 2 --context-length "
      "16,32 --steps 2" +
          stop,
      "bench gemm --model tiny --context-length 16 --batch-size 2 --steps 2 --precision fp32" + stop,
      "bench ddp --model small --context-length 16 --batch-size 2 --steps 2 --num-heads 4 --precision fp32 "
      "--attention naive" +
          stop,
      "bench allreduce --bytes 4K,64K --collective all_reduce,broadcast --steps 2 --precision fp32" + stop,
      "plan --model tiny --context-length 64 --batch-size 2 --num-heads 2 --precision fp32 --attention flash",
  };
  for (const std::string& c : commands) {
    const test::CliResult res = test::run_paratrain(c);
    EXPECT_NE(res.rc, kExitUsage) << c << ": " << res.output;
    EXPECT_EQ(res.output.find("unrecognised"), std::string::npos) << c << ": " << res.output;
    EXPECT_EQ(res.output.find("is spelled"), std::string::npos) << c << ": " << res.output;
  }
}

// Each option's help text in `subcommand --help`, continuation lines joined with single spaces.
std::map<std::string, std::string> help_texts(const std::string& subcommand) {
  const test::CliResult res = test::run_paratrain(subcommand + " --help");
  EXPECT_EQ(res.rc, 0) << subcommand << ": " << res.output;
  std::map<std::string, std::string> out;
  std::string current;
  std::istringstream lines(res.output);
  for (std::string line; std::getline(lines, line);) {
    line.erase(line.find_last_not_of(' ') + 1);  // the wrapped lines' trailing spaces
    if (line.rfind("  --", 0) == 0) {
      size_t pos = line.find_first_of(" [", 4);
      current = line.substr(4, pos - 4);
      // The option column: "--name", " arg", " (=default)"; the help text follows.
      if (line.compare(pos, 4, " arg") == 0) pos += 4;
      if (line.compare(pos, 3, " (=") == 0) pos = line.find(')', pos) + 1;
      const size_t text = line.find_first_not_of(' ', pos);
      out[current] = text == std::string::npos ? "" : line.substr(text);
    } else if (!current.empty() && line.rfind("      ", 0) == 0) {
      std::string& text = out[current];
      text += (text.empty() ? "" : " ") + line.substr(line.find_first_not_of(' '));
    } else {
      current.clear();
    }
  }
  return out;
}

// An option that several subcommands declare from one shared group has one help text in all of
// them (the benchmarks' list-valued forms of the data-parallel options are their own options).
TEST(OptionSpellings, SharedOptionsHaveOneHelpTextInEverySubcommand) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> groups = {
      {{"ddp", "bucket-mb", "shard-optimizer", "grad-comm"}, {"train", "plan"}},
      {{"grad-dtype", "residual-dtype"}, {"train", "plan", "bench model", "bench ddp"}},
      {{"d-model", "num-layers", "num-heads", "d-ff"}, {"train", "plan", "bench ddp"}},
  };
  std::map<std::string, std::map<std::string, std::string>> help;
  for (const auto& [options, subcommands] : groups)
    for (const std::string& sub : subcommands)
      if (!help.count(sub)) help[sub] = help_texts(sub);
  for (const auto& [options, subcommands] : groups)
    for (const std::string& option : options) {
      const std::string& first = help[subcommands.front()][option];
      EXPECT_FALSE(first.empty()) << subcommands.front() << " --" << option;
      for (const std::string& sub : subcommands)
        EXPECT_EQ(help[sub][option], first) << "--" << option << " in " << sub << " and " << subcommands.front();
    }
}

}  // namespace
}  // namespace pt
