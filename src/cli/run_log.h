#pragma once
// --log-format and --log-file: the options of io::RunLog, the progress every subcommand writes.
#include "cli/options.h"
#include "io/run_log.h"

namespace pt::cli {

using io::Eta;
using io::hms;
using io::json_line;
using io::LogFields;
using io::LogOptions;
using io::LogValue;
using io::RunLog;

void add_log_options(po::options_description& desc, LogOptions& o);

}  // namespace pt::cli
