// PLACEHOLDER: replaced by the area that owns this subcommand.
#include "cli/subcommands.h"
#include "core/error.h"

namespace pt::cli {
int run_bench_model(const std::vector<std::string>&) { PT_FAIL("'bench_model' is not implemented yet"); }
}  // namespace pt::cli
