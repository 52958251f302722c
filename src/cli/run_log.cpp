#include "cli/run_log.h"

namespace pt::cli {

void add_log_options(po::options_description& desc, LogOptions& o) {
  // clang-format off
  desc.add_options()
      ("log-format", po::value(&o.format)->default_value(o.format),
       "progress on stdout: text (a line per step or configuration, with ETA) or jsonl (a JSON "
       "object per line)")
      ("log-file", po::value(&o.file),
       "also append the progress as JSON lines to this file (a resumed run continues it)");
  // clang-format on
}

}  // namespace pt::cli
