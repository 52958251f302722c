// paratrain: one binary, subcommands through Boost.Program_options. Errors end the process
// with one line on stderr and a non-zero exit; with several ranks, the whole job is aborted.
#include <boost/program_options/errors.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "cli/subcommands.h"
#include "core/build_info.h"
#include "core/error.h"
#include "parallel/runtime.h"

int main(int argc, char** argv) {
  pt::set_invocation(argc, argv);
  auto& rt = pt::parallel::Runtime::init(&argc, &argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  int rc = 0;
  try {
    rc = pt::cli::dispatch(pt::cli::top_level_subcommands(), "paratrain", args);
  } catch (const boost::program_options::error& e) {
    // A usage error is the same on every rank: report once, exit 2 everywhere.
    if (rt.is_root()) std::cerr << "paratrain: error: " << e.what() << " (see --help)" << std::endl;
    rc = 2;
  } catch (const pt::OutOfMemory& e) {
    if (rt.world_size() > 1) rt.abort(std::string("out of memory: ") + e.what(), 3);
    std::cerr << "paratrain: error: " << e.what() << std::endl;
    rc = 3;
  } catch (const std::exception& e) {
    if (rt.world_size() > 1) rt.abort(std::string("error: ") + e.what());
    std::cerr << "paratrain: error: " << e.what() << std::endl;
    rc = 1;
  }
  rt.finalize();
  return rc;
}
