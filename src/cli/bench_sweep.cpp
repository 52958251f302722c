#include "cli/bench_sweep.h"

#include <iostream>

#include "core/error.h"
#include "parallel/runtime.h"

namespace pt::cli {

po::options_description bench_options(const std::string& caption, RunOptions& run, LogOptions& log) {
  po::options_description desc(caption);
  add_run_options(desc, run);
  add_log_options(desc, log);
  return desc;
}

BenchSweep::BenchSweep(const std::string& subcommand, const RunOptions& run, const LogOptions& log,
                       int64_t configurations)
    : subcommand_(subcommand),
      root_(parallel::Runtime::get().is_root()),
      record_(subcommand, run.out, run.overwrite),
      log_(log, root_),
      total_(configurations) {}

void BenchSweep::set_configurations(int64_t n) { total_ = n; }

void BenchSweep::start() {
  log_.event("start", {{"command", subcommand_}, {"configurations", total_}, {"out", record_.path()}}, "");
}

void BenchSweep::done(const std::string& name, const std::string& summary, const LogFields& figures,
                      const std::vector<const io::ResultTable*>& tables) {
  ++done_;
  Eta eta(0, total_);
  eta.set_done(done_);
  const double elapsed = log_.elapsed_s();
  LogFields fields = {{"index", done_}, {"of", total_}, {"name", name}, {"eta_s", eta.eta_s(elapsed)}};
  fields.insert(fields.end(), figures.begin(), figures.end());
  log_.event("config", fields,
             "[" + std::to_string(done_) + "/" + std::to_string(total_) + "] " + subcommand_ + " " + name + ": " +
                 summary + " | " + eta.text(elapsed));
  if (!root_) return;
  for (const io::ResultTable* t : tables) record_.add_table(*t);
  record_.commit();
}

void BenchSweep::finish(const std::vector<const io::ResultTable*>& tables) {
  if (root_) {
    for (const io::ResultTable* t : tables) record_.add_table(*t);
    record_.commit();
    if (!log_.jsonl())
      for (const io::ResultTable* t : tables) {
        std::cout << "\n";
        t->print(std::cout);
      }
  }
  log_.event("end", {{"configurations", done_}, {"out", record_.path()}}, "results: " + record_.path());
}

}  // namespace pt::cli
