#pragma once
// Which files `train` may write, and which it leaves alone (issue 47). A run writes only files
// it created, files --overwrite lets it replace, and its own: the checkpoint it continues and
// its record. What shows that a file is the run's own is the run id: a random id made when a
// run starts afresh, stored in each of its checkpoints ("run.id") and in its record ("run_id"),
// and kept by every resume.
#include <string>

#include "io/checkpoint.h"

namespace pt::train {

// A new run id: 32 hex digits from the system's random source.
std::string new_run_id();

// The run id a checkpoint holds; "" for one written before run ids.
std::string run_id_of(const io::CheckpointInfo& info);

// The files a train run reads (data, resume_from, init_from; "" when not used) and writes.
struct TrainFiles {
  std::string data, resume_from, init_from;
  std::string save, out, log_file;
};

// One error when two of the files name one file: an output that is an input, or two outputs.
// --save may name the checkpoint it resumes from or starts from (--init-from).
void refuse_shared_names(const TrainFiles& f);

// Checks --save before any work (rank 0) and returns whether the run may replace a file there:
// with --overwrite, or when it is the run's own checkpoint — the one it resumes from, or a
// checkpoint of the same run (resumed_run_id, from the checkpoint). Anything else that exists
// is refused, and so is a symbolic link to nothing.
bool check_save_target(const std::string& save, bool overwrite, const std::string& resumed_from,
                       const std::string& resumed_run_id);

}  // namespace pt::train
