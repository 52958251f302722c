#pragma once
// What SIGINT, SIGTERM, SIGUSR1 and SIGHUP do (one place): Slurm sends SIGTERM at a time limit
// or preemption (and SIGUSR1 ahead of it with `--signal`), mpirun forwards SIGUSR1 to every
// rank, a user at a terminal sends SIGINT, and closing that terminal (or an ssh session) SIGHUP
// (unless SIGHUP was ignored when the process started, as under nohup: then it stays ignored).
//
// - Inside a GracefulScope (train from its first step on) the first signal only records itself:
//   the owner polls requested() and stops at the next safe point (a step boundary, or the end of
//   the checkpoint being written), writing what it must (checkpoint, run record).
// - A second signal, or any outside a GracefulScope (train's start-up, every other command),
//   ends the process at once: every registered temporary file is removed (only
//   async-signal-safe calls) and the exit code is 128 + signal. Start-up has nothing to save, and
//   may be blocked (a file system, another rank), so it is never waited for.
// - SIGPIPE is ignored: a write to a pipe whose reader has gone fails with EPIPE instead of
//   killing the process without a record; train stops on it as on a signal (io/run_log.h).
//
// SIGKILL cannot be caught: its temporary files are found and removed by the next run that
// writes the same output (io::write_atomically).
#include <string>

namespace pt::interrupt {

// Installs the handlers; main calls it once, after MPI start-up. announce: say on stderr what a
// signal does (rank 0 only, so a job prints it once).
void install(bool announce);

// The first stop signal received (SIGINT, SIGTERM, SIGUSR1, SIGHUP), or 0.
int requested();
// "SIGTERM", "SIGINT", "SIGUSR1", "SIGHUP", or "signal N".
std::string signal_name(int sig);

// While one lives, a first signal asks for a stop instead of ending the process.
class GracefulScope {
 public:
  GracefulScope();
  ~GracefulScope();
  GracefulScope(const GracefulScope&) = delete;
  GracefulScope& operator=(const GracefulScope&) = delete;
};

// A file removed if the process is ended by a signal while it lives (a temporary output).
// At most kMaxTempFiles at once; more are not registered (and would be left behind).
class TempFile {
 public:
  explicit TempFile(const std::string& path);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

 private:
  int slot_ = -1;
};
constexpr int kMaxTempFiles = 8;

// For tests: forget a recorded request (requested() returns 0 again).
void reset_for_test();

}  // namespace pt::interrupt
