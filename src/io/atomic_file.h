#pragma once
// Output files that appear whole or not at all: write "<path>.tmp.<host>.<pid>", then rename
// it over <path>. Used by RunRecord and checkpoints. A signal that ends the process removes the
// temporary file (core/interrupt.h); one left by SIGKILL or a crash is removed by the next run
// that writes the same path on the same host.
#include <functional>
#include <memory>
#include <string>

namespace pt::interrupt {
class TempFile;
}

namespace pt::io {

// Fails with one clear message (naming `what`, e.g. "results file") when `path` exists and
// overwrite is false, exists and is not a regular file (a directory, FIFO, device or socket
// is never replaced), is a symbolic link to nothing (or a loop) and overwrite is false, or its
// directory is missing or not writable. Call it before any work so a long run never loses its
// output at the end.
void check_output_path(const std::string& path, bool overwrite, const std::string& what);

// "" unless `path` is a symbolic link that reaches no file; then what it is, for an error ("a
// symbolic link to 'x.h5', which does not exist", or a loop).
std::string broken_link(const std::string& path);

// What a path that is not a regular file is ("a directory", "a FIFO (named pipe)", "a
// character device", ...), for errors that refuse it; "a regular file" for one.
const char* file_kind(unsigned mode);

// "<path>.tmp.<host>.<pid>"
std::string temp_path_for(const std::string& path);

// Writes `text` to `path` (plain: inside write_atomically's callback, or a folder written whole),
// or one error naming the file and the cause.
void write_text_file(const std::string& path, const std::string& text);

// Removes temporary files of `path` left by processes of this host that no longer run (each
// named in one line on stderr); those of other hosts or of live processes are left alone.
// check_output_path and write_atomically call it. Returns how many were removed.
int remove_stale_temp_files(const std::string& path);

// Calls write(tmp) and then moves tmp onto path. replace = false refuses a path that exists
// by then (atomically, via link(2) where the file system supports it); a path that is not a
// regular file is refused either way. On any failure the temporary file is removed and the
// error rethrown; path is never half-written.
void write_atomically(const std::string& path, bool replace, const std::string& what,
                      const std::function<void(const std::string& tmp)>& write);

// An output taken by one run when it starts, not when it is written: the run holds
// "<path>.lock" with an open-file-description lock (fcntl F_OFD_SETLK) for its lifetime and
// removes it at its end. A second run started with the same --out or --save fails at once,
// before any work, naming the process that holds it. The kernel drops the lock of a process that
// dies (SIGKILL too), so a lock file left behind is simply taken by the next run; so is one still
// held for an earlier run of the same Slurm job (a requeue after its node died, before the file
// server let go). Where the file system has no locks, none is taken.
class OutputLock {
 public:
  // Takes the lock of `path` or fails with one error naming `what` ("results file") and the
  // holder. A directory that does not exist or cannot be written takes no lock (the output's
  // own check, check_output_path, names that).
  OutputLock(const std::string& path, const std::string& what);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string lock_path_;
  int fd_ = -1;
  std::unique_ptr<interrupt::TempFile> removed_on_signal_;  // a signal that ends the run removes it
};

}  // namespace pt::io
