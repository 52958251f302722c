#pragma once
// Faults injected on purpose, for the fault tests (tests/scripts/test_faults.py) and for anyone
// checking what a run does when things go wrong. PARATRAIN_FAULT holds ';'-separated entries:
//
//   nan-grad:STEP:PARAM       after backward of step STEP (1-based), element 0 of PARAM's
//                             gradient becomes NaN (train)
//   pause-in-checkpoint:SEC   a checkpoint write pauses SEC seconds half-way (parameters
//                             written, optimizer state not), after saying so on stderr
//   pause-in-start-up:SEC     train's start-up pauses SEC seconds before the model is built,
//                             after saying so on stderr: a start-up that takes long or blocks
//   pause-before-pointer:SEC  with --save-dir, a pause after each step checkpoint is in place and
//                             before the pointer to it is replaced: a crash between the two
//   signal:STEP:NAME          rank 0 alone raises signal NAME (SIGTERM, SIGINT, SIGUSR1, SIGHUP)
//                             on itself during step STEP (train), so the run stops after it: a
//                             preemption that reaches one rank only (STEP 0: during start-up,
//                             which ends the process at once). SIGSTOP holds the process after
//                             step STEP until a SIGCONT, so a test can change the files it uses
//                             between two steps
//   disk-full:PATH            writes to the output file PATH (as named on the command line: a
//                             checkpoint, results file or --log-file) fail with ENOSPC, as on a
//                             full disk: its descriptor becomes /dev/full's
//
// Unset, nothing changes. A malformed entry is an error at the first lookup.
#include <cstdint>
#include <string>

namespace pt::fault {

struct Fault {
  std::string kind;    // "nan-grad", "pause-in-checkpoint", "pause-in-start-up", "pause-before-pointer", ...
  int64_t step = 0;    // nan-grad, signal
  std::string param;   // nan-grad
  double seconds = 0;  // the pauses
  int signal = 0;      // signal
  std::string path;    // disk-full
};

// The entry of this kind in PARATRAIN_FAULT, or nullptr.
const Fault* find(const std::string& kind);

// Whether a disk-full entry names `file`, or `file` is a temporary file of one it names
// ("<PATH>.tmp.<host>.<pid>", io/atomic_file.h).
bool disk_full(const std::string& file);
// Makes writes to `fd` fail with ENOSPC (dup2 of /dev/full onto it). Returns 0, or the errno
// of what failed (no exception: file drivers call it).
int make_disk_full(int fd);

// pause-in-checkpoint, when asked for: one line on stderr naming `what`, then the pause.
void pause_if_asked(const std::string& kind, const std::string& what);

}  // namespace pt::fault
