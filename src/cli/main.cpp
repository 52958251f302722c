// paratrain: one binary, subcommands through Boost.Program_options. Errors end the process
// with one line on stderr and a non-zero exit; with several ranks, the whole job is aborted.
#include <boost/program_options/errors.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/config_file.h"
#include "cli/subcommands.h"
#include "core/build_info.h"
#include "core/env.h"
#include "core/error.h"
#include "core/exit_codes.h"
#include "core/interrupt.h"
#include "io/h5_errors.h"
#include "parallel/runtime.h"

namespace {

// One line in one write(2): lines from several ranks never interleave.
void write_line(const std::string& line) {
  const std::string l = line + "\n";
  if (::write(2, l.data(), l.size()) < 0) std::perror("paratrain: stderr");
}

}  // namespace

int main(int argc, char** argv) {
  pt::set_invocation(argc, argv);
  try {
    pt::parallel::Runtime::init(&argc, &argv);
  } catch (const std::exception& e) {  // a malformed PARATRAIN_TEST_SPLIT_NODES, say
    if (pt::parallel::Runtime::initialized() && pt::parallel::Runtime::get().world_size() > 1)
      pt::parallel::Runtime::get().abort("error: " + pt::error_text(e, false));
    write_line("paratrain: error: " + pt::error_text(e, false));
    return pt::kExitError;
  }
  auto& rt = pt::parallel::Runtime::get();
  pt::interrupt::install(rt.is_root());
  std::vector<std::string> args;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--verbose")
      verbose = true;  // global: every subcommand
    else
      args.emplace_back(argv[i]);
  }
  int rc = 0;
  try {
    verbose = pt::env::choice("PARATRAIN_VERBOSE", "1", "0").value_or(false) || verbose;
    pt::io::set_hdf5_error_printing(verbose);
    rc = pt::cli::dispatch(pt::cli::top_level_subcommands(), "paratrain", args);
  } catch (const boost::program_options::error& e) {
    // A usage error is the same on every rank: report once, exit 2 everywhere.
    if (rt.is_root()) write_line(std::string("paratrain: error: ") + e.what() + " (see --help)");
    rc = pt::kExitUsage;
  } catch (const pt::OutOfMemory& e) {
    if (rt.world_size() > 1) rt.abort("out of memory: " + pt::error_text(e, verbose), pt::kExitOutOfMemory);
    write_line("paratrain: error: " + pt::error_text(e, verbose));
    rc = pt::kExitOutOfMemory;
  } catch (const std::exception& e) {
    // An option that came from --config's file: the error names the file and the line too.
    const std::string why = pt::error_text(e, verbose);
    const std::string text = pt::cli::config_file_source(why) + why;
    if (rt.world_size() > 1) rt.abort("error: " + text);
    write_line("paratrain: error: " + text);
    rc = pt::kExitError;
  }
  rt.finalize();
  return rc;
}
