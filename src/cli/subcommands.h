#pragma once
// The subcommand table: every `paratrain <name>` entry point, one file each in src/cli/.
#include <string>
#include <vector>

namespace pt::cli {

// args: the words after the subcommand name; returns the process exit code.
using SubcommandFn = int (*)(const std::vector<std::string>& args);

struct Subcommand {
  const char* name;
  const char* summary;
  SubcommandFn run;
};

int run_train(const std::vector<std::string>& args);   // cli/train.cpp
int run_bench(const std::vector<std::string>& args);   // cli/subcommands.cpp: bench <what> (bench_table.cpp)
int run_demo(const std::vector<std::string>& args);    // cli/demo.cpp: demo <what>
int run_plan(const std::vector<std::string>& args);    // cli/plan.cpp
int run_export(const std::vector<std::string>& args);  // cli/export.cpp
int run_eval(const std::vector<std::string>& args);    // cli/eval.cpp

// `paratrain bench <what>`: one entry per benchmark.
int run_bench_model(const std::vector<std::string>& args);      // cli/bench_model.cpp
int run_bench_attention(const std::vector<std::string>& args);  // cli/bench_attention.cpp
int run_bench_allreduce(const std::vector<std::string>& args);  // cli/bench_allreduce.cpp
int run_bench_ddp(const std::vector<std::string>& args);        // cli/bench_ddp.cpp
int run_bench_gemm(const std::vector<std::string>& args);       // cli/bench_gemm.cpp

const std::vector<Subcommand>& top_level_subcommands();
const std::vector<Subcommand>& bench_subcommands();
const std::vector<Subcommand>& demo_subcommands();

// Runs the entry of `table` named by args[0] (or prints the table for --help / nothing).
int dispatch(const std::vector<Subcommand>& table, const std::string& prefix, const std::vector<std::string>& args);

}  // namespace pt::cli
