#pragma once
// paratrain's exit codes, one table: main returns them, `paratrain --help` lists them and
// README's "When something goes wrong" explains them. A process ended at once by a signal
// exits 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as shells report it.
namespace pt {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,        // the one error line says what (input, file, rank, or a library call)
  kExitUsage = 2,        // the command line itself: unknown command or option, missing value
  kExitOutOfMemory = 3,  // a device allocation failed even after the cache was emptied
  kExitStopped = 75,     // stopped by a signal or a closed stdout at a step boundary, state saved
};

struct ExitCodeInfo {
  int code;
  const char* meaning;
};

inline constexpr ExitCodeInfo kExitCodes[] = {
    {kExitOk, "finished"},
    {kExitError, "an error: one line on stderr names the input, file, rank or library call"},
    {kExitUsage, "the command line: an unknown command or option, a missing or malformed value"},
    {kExitOutOfMemory, "out of device memory"},
    {kExitStopped, "train stopped early at a step boundary by SIGTERM, SIGINT, SIGUSR1, SIGHUP or a "
                   "closed standard output; the record is written and, with --save, the checkpoint "
                   "(resume with --resume)"},
    {130, "ended at once by a second signal, or by one during start-up or outside train (128 + the "
          "signal: 129 SIGHUP, 130 SIGINT, 143 SIGTERM); temporary files removed, nothing else written"},
};

}  // namespace pt
