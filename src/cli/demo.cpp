// PLACEHOLDER: replaced by the area that owns this subcommand.
#include "cli/subcommands.h"

namespace pt::cli {
const std::vector<Subcommand>& demo_subcommands() {
  static const std::vector<Subcommand> table = {};
  return table;
}
}  // namespace pt::cli
