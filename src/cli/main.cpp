// paratrain: one binary, subcommands through Boost.Program_options. Errors end the process
// with one line on stderr and a non-zero exit; with several ranks, the whole job is aborted.
#include <boost/program_options/errors.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/subcommands.h"
#include "core/build_info.h"
#include "core/error.h"
#include "parallel/runtime.h"

namespace {

// What the user sees of an error: the message, with its source location only for an internal
// error (a failed library call) or under --verbose / PARATRAIN_VERBOSE=1.
std::string error_text(const std::exception& e, bool verbose) {
  if (const auto* pe = dynamic_cast<const pt::Error*>(&e)) return verbose || pe->internal() ? pe->what() : pe->message();
  return e.what();
}

// One line in one write(2): lines from several ranks never interleave.
void write_line(const std::string& line) {
  const std::string l = line + "\n";
  if (::write(2, l.data(), l.size()) < 0) std::perror("paratrain: stderr");
}

}  // namespace

int main(int argc, char** argv) {
  pt::set_invocation(argc, argv);
  auto& rt = pt::parallel::Runtime::init(&argc, &argv);
  std::vector<std::string> args;
  const char* env_verbose = std::getenv("PARATRAIN_VERBOSE");
  bool verbose = env_verbose && std::string(env_verbose) == "1";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--verbose") verbose = true;  // global: every subcommand
    else args.emplace_back(argv[i]);
  }
  int rc = 0;
  try {
    rc = pt::cli::dispatch(pt::cli::top_level_subcommands(), "paratrain", args);
  } catch (const boost::program_options::error& e) {
    // A usage error is the same on every rank: report once, exit 2 everywhere.
    if (rt.is_root()) write_line(std::string("paratrain: error: ") + e.what() + " (see --help)");
    rc = 2;
  } catch (const pt::OutOfMemory& e) {
    if (rt.world_size() > 1) rt.abort("out of memory: " + error_text(e, verbose), 3);
    write_line("paratrain: error: " + error_text(e, verbose));
    rc = 3;
  } catch (const std::exception& e) {
    if (rt.world_size() > 1) rt.abort("error: " + error_text(e, verbose));
    write_line("paratrain: error: " + error_text(e, verbose));
    rc = 1;
  }
  rt.finalize();
  return rc;
}
