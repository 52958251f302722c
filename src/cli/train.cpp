// PLACEHOLDER: replaced by the area that owns this subcommand.
#include "cli/subcommands.h"
#include "core/error.h"

namespace pt::cli {
int run_train(const std::vector<std::string>&) { PT_FAIL("'train' is not implemented yet"); }
}  // namespace pt::cli
