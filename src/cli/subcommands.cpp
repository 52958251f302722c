#include "cli/subcommands.h"

#include <boost/program_options/errors.hpp>

#include <iostream>

#include "core/build_info.h"
#include "core/exit_codes.h"
#include "io/library_versions.h"

namespace pt::cli {

namespace po = boost::program_options;

namespace {
// "benchmarks: model, attention, ..." from the bench table itself.
const char* bench_summary() {
  static const std::string text = [] {
    std::string names;
    for (const Subcommand& s : bench_subcommands()) names += (names.empty() ? "" : ", ") + std::string(s.name);
    return "benchmarks: " + names + " (see 'paratrain bench --help')";
  }();
  return text.c_str();
}
}  // namespace

const std::vector<Subcommand>& top_level_subcommands() {
  static const std::vector<Subcommand> table = {
      {"train", "train the Transformer LM on a token file", run_train},
      {"bench", bench_summary(), run_bench},
      {"demo", "small experiments: accumulation (see 'paratrain demo --help')", run_demo},
      {"eval", "the validation loss of a checkpoint (see 'paratrain eval --help')", run_eval},
      {"export", "a checkpoint as a Hugging Face Llama folder (see 'paratrain export --help')", run_export},
      {"plan", "memory, communication and step time of any model on any cluster (no GPU needed)", run_plan},
  };
  return table;
}

int run_bench(const std::vector<std::string>& args) { return dispatch(bench_subcommands(), "paratrain bench", args); }

int run_demo(const std::vector<std::string>& args) { return dispatch(demo_subcommands(), "paratrain demo", args); }

int dispatch(const std::vector<Subcommand>& table, const std::string& prefix, const std::vector<std::string>& args) {
  auto usage = [&](std::ostream& os) {
    os << "usage: " << prefix << " <command> [options]   (" << prefix << " <command> --help)\n\n";
    for (const auto& s : table)
      os << "  " << s.name << std::string(12 - std::min<size_t>(11, std::string(s.name).size()), ' ') << s.summary
         << "\n";
  };
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (prefix == "paratrain") std::cout << "paratrain " << program_version() << " (git " << git_revision() << ")\n";
    usage(std::cout);
    if (prefix == "paratrain") {
      std::cout
          << "\n  --verbose   errors also name the source file and line (or PARATRAIN_VERBOSE=1)\n\nexit codes:\n";
      for (const ExitCodeInfo& e : kExitCodes) {
        const std::string code = std::to_string(e.code);
        std::cout << "  " << code << std::string(6 - code.size(), ' ') << e.meaning << "\n";
      }
    }
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (prefix == "paratrain" && args[0] == "--version") {
    std::cout << io::version_report();
    return 0;
  }
  std::string names;
  for (const auto& s : table) {
    if (args[0] == s.name) return s.run(std::vector<std::string>(args.begin() + 1, args.end()));
    names += (names.empty() ? "" : ", ") + std::string(s.name);
  }
  // A command-line error like an unknown option: exit code 2, one line.
  throw po::error("unknown command '" + args[0] + "' for " + prefix + " (its commands: " + names + ")");
}

}  // namespace pt::cli
