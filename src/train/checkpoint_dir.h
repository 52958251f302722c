#pragma once
// `train --save-dir D --keep-last K`: a history of checkpoints instead of one file rewritten.
// Each save writes D/step_<step>.h5 (at least 6 digits) atomically, then replaces the pointer
// D/latest, then removes this run's step checkpoints beyond the newest K (0: keep all).
//
// The pointer is a small text file written atomically (temp file + rename), not a symbolic link:
// it also holds the run id (so a damaged newest checkpoint still tells whose directory this is),
// `cat D/latest` works on every file system and in every copy tool, and outputs that are
// symbolic links are refused everywhere else. Its lines: the checkpoint's file name, "run <id>".
//
// A crash between a checkpoint and its pointer leaves the pointer on the previous checkpoint,
// which is whole; removal comes after the pointer, so the pointer never names a removed file.
// Removal touches only files named like step checkpoints, in D, of this run's id, older than the
// one just written: never another run's checkpoint, a file with another name, or a newer step.
// Only a fresh run with --overwrite clears D's previous pointer and step checkpoints, at start-up.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/atomic_file.h"

namespace pt::train {

// "step_000200.h5"; step_of_name inverts it exactly (-1 for any other name).
std::string step_checkpoint_name(int64_t step);
int64_t step_of_name(const std::string& name);

struct StepCheckpoint {
  int64_t step = 0;
  std::string path;
};
// The step checkpoints (regular files named by step_checkpoint_name) in `dir`, oldest first.
std::vector<StepCheckpoint> list_step_checkpoints(const std::string& dir);

// What D/latest says; empty fields when it is absent or not a pointer.
struct Pointer {
  std::string name, run_id;
  bool exists = false;  // some file is at D/latest
};
Pointer read_pointer(const std::string& dir);

// --resume auto with --save-dir: the newest checkpoint of the run in `dir` that verifies
// (io::verify_checkpoint), from the pointer's down; each one skipped goes to warn(one line
// naming it and why). "" when `dir` holds no step checkpoint (a fresh start); an error when
// it holds some and none verifies.
std::string newest_good_checkpoint(const std::string& dir, const std::function<void(const std::string&)>& warn);

// The directory of one run (rank 0 makes it): checked and taken (D/latest.lock) at start-up.
class CheckpointDir {
 public:
  // Creates `dir` when missing. A fresh run (resumed_from "") into a directory that holds step
  // checkpoints or a pointer is refused unless overwrite; so is a run resumed from a file
  // (resume_auto false) when `dir` holds checkpoints of another run or of later steps, which it
  // would replace as it goes (after rolling back to an earlier step, say). A fresh run with
  // overwrite removes them and the pointer (links unlinked, not followed) once it holds
  // D/latest.lock, so a run that finds the lock held removes nothing; a resumed one never does.
  CheckpointDir(std::string dir, int64_t keep_last, bool overwrite, const std::string& resumed_from,
                int64_t resumed_step, bool resume_auto, std::string run_id);
  ~CheckpointDir();

  std::string path_for(int64_t step) const;
  // After path_for(step) is written: the pointer, then the removal of older ones beyond K.
  void saved(int64_t step);

 private:
  std::string dir_, run_id_;
  int64_t keep_last_;
  std::unique_ptr<io::OutputLock> lock_;
};

}  // namespace pt::train
