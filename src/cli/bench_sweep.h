#pragma once
// What every benchmark subcommand shares (issue 19's harness, issue 14's progress): the record,
// checked before any work; progress — a line per configuration with "k of N" and an estimate of
// the time left, or JSON lines (--log-format jsonl, --log-file); and the record rewritten after
// every configuration, so a sweep cut short keeps each configuration it finished. Each bench
// keeps its own options, configurations and measurement.
#include <cstdint>
#include <string>
#include <vector>

#include "cli/options.h"
#include "cli/run_log.h"
#include "io/run_record.h"
#include "io/table.h"

namespace pt::cli {

// A benchmark's option set `caption`, starting with the run options (add_run_options) and the
// progress-log options (add_log_options); the bench adds its own.
po::options_description bench_options(const std::string& caption, RunOptions& run, LogOptions& log);

class BenchSweep {
 public:
  // `subcommand` names the record ("bench model"); configurations: how many the sweep runs (0
  // when not known yet: set_configurations). Rank 0 checks --out and --log-file here.
  BenchSweep(const std::string& subcommand, const RunOptions& run, const LogOptions& log, int64_t configurations = 0);

  io::RunRecord& record() { return record_; }
  RunLog& log() { return log_; }
  void set_configurations(int64_t n);

  // The start event (the sweep's size), once the record's environment is collected.
  void start();
  // One configuration finished: "[k/N] name: summary | elapsed, eta" (or a JSON "config" event
  // with `figures`), then, on rank 0, the record rewritten with `tables`.
  void done(const std::string& name, const std::string& summary, const LogFields& figures,
            const std::vector<const io::ResultTable*>& tables);
  // The end: `tables` printed and committed (rank 0), "results: <path>" and the end event.
  void finish(const std::vector<const io::ResultTable*>& tables);

 private:
  std::string subcommand_;
  bool root_;
  io::RunRecord record_;
  RunLog log_;
  int64_t total_ = 0, done_ = 0;
};

}  // namespace pt::cli
