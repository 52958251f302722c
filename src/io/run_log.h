#pragma once
// Progress that people and programs can follow (issue 14): a text line per step or benchmark
// configuration on stdout, or instead one JSON object per line (--log-format jsonl), and the same
// JSON objects appended to --log-file. Every object has "event", "time" (UTC, ISO 8601) and
// "elapsed_s"; see docs/HDF5_SCHEMA.md ("Progress log") for each event's fields. Rank 0 writes.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace pt::io {

// --log-format and --log-file (cli/run_log.h declares them).
struct LogOptions {
  std::string format = "text";  // text | jsonl
  std::string file;             // JSON lines appended here as well ("": none)
};

using LogValue = std::variant<int64_t, double, std::string, bool>;
using LogFields = std::vector<std::pair<std::string, LogValue>>;

// One JSON object on one line: {"event": ..., fields...}; non-finite numbers become null.
std::string json_line(const std::string& event, const LogFields& fields);

// "1:02:03" for seconds; "--" when unknown (NaN).
std::string hms(double seconds);

class RunLog {
 public:
  // Checks --log-file on rank 0 only (root; the other ranks' RunLog writes nothing): a log file
  // that is not a regular file, or one in a directory that does not exist or cannot be written,
  // is refused. The first event creates it or appends to it (a resumed run continues its log).
  RunLog(const LogOptions& o, bool root);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  // One event: `text` on stdout in text format (nothing when empty), the JSON object on
  // stdout in jsonl format, and the JSON object in --log-file. "time" and "elapsed_s" (since
  // this RunLog was made) are added to `fields`. Flushed at once. A --log-file that cannot be
  // written (a full disk) throws an error naming it, once; later events skip it.
  void event(const std::string& event, LogFields fields, const std::string& text);
  double elapsed_s() const;
  bool jsonl() const { return jsonl_; }
  // "" while standard output takes what is written to it, else why it does not ("Broken pipe":
  // its reader has gone, SIGPIPE being ignored; "No space left on device"). Flushes it first.
  // Always "" on ranks other than 0. train stops on it as on a signal; the others keep going.
  std::string stdout_failure();

 private:
  int file();  // --log-file's descriptor, opened at the first event; -1 without one
  bool root_, jsonl_;
  std::string path_;  // --log-file on rank 0 ("" once it could not be written)
  int fd_ = -1;
  double t0_;
  int stdout_errno_ = 0;  // the first failed write to stdout
};

// Elapsed and remaining time for `total` units of work (steps, configurations) of which the
// first `first` were done before this process started (a resumed run): the mean time of the
// units this process finished so far, times the units left.
class Eta {
 public:
  Eta(int64_t first, int64_t total);
  void unit_done() { ++done_; }
  void set_done(int64_t units) { done_ = units; }
  int64_t remaining() const { return total_ - first_ - done_; }
  double eta_s(double elapsed_s) const;  // NaN before the first unit
  // "elapsed 0:01:02, eta 0:03:04" for a progress line.
  std::string text(double elapsed_s) const;

 private:
  int64_t first_, total_, done_ = 0;
};

}  // namespace pt::io
