#include "train/checkpoint_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/fault_injection.h"
#include "io/checkpoint.h"
#include "train/train_outputs.h"

namespace pt::train {

namespace {

namespace fs = std::filesystem;
constexpr const char* kPointer = "latest";
constexpr size_t kMaxPointerBytes = 4096;  // a pointer is two short lines: more is not one
constexpr int kMinDigits = 6;

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

// The run id of the checkpoint at `path`; "" when it cannot be read (never then treated as ours).
std::string run_id_at(const std::string& path) {
  try {
    return run_id_of(io::read_checkpoint_info(path));
  } catch (const std::exception&) {
    return "";
  }
}

std::string names_of(const std::vector<StepCheckpoint>& list) {
  std::string out;
  for (size_t i = 0; i < list.size() && i < 3; ++i) out += (i ? ", " : "") + fs::path(list[i].path).filename().string();
  if (list.size() > 3) out += " and " + std::to_string(list.size() - 3) + " more";
  return out;
}

}  // namespace

std::string step_checkpoint_name(int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "step_%0*lld.h5", kMinDigits, static_cast<long long>(step));
  return buf;
}

int64_t step_of_name(const std::string& name) {
  const std::string head = "step_", tail = ".h5";
  if (name.size() < head.size() + kMinDigits + tail.size() || name.size() > head.size() + 18 + tail.size() ||
      name.compare(0, head.size(), head) != 0 || name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    return -1;
  const std::string digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  const int64_t step = std::stoll(digits);
  return step_checkpoint_name(step) == name ? step : -1;  // one name per step: "step_0000200.h5" is not one
}

namespace {

// Regular files (and with links, symbolic links too) in `dir` named like step checkpoints, oldest first.
std::vector<StepCheckpoint> step_entries(const std::string& dir, bool links) {
  std::vector<StepCheckpoint> out;
  std::error_code ec;
  if (!fs::exists(dir, ec) && !ec) return out;  // not made yet: a first run, with --resume auto too
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t step = step_of_name(it->path().filename().string());
    std::error_code kind_ec;
    const fs::file_status st = it->symlink_status(kind_ec);
    if (step >= 0 && (fs::is_regular_file(st) || (links && fs::is_symlink(st))))
      out.push_back({step, it->path().string()});
  }
  PT_CHECK(!ec, "--save-dir '" + dir + "': cannot list it: " + ec.message());
  std::sort(out.begin(), out.end(), [](const StepCheckpoint& a, const StepCheckpoint& b) { return a.step < b.step; });
  return out;
}

// A fresh run with --overwrite, holding the lock: the previous run's pointer and step checkpoints
// go, so that neither --resume auto nor a requeue before this run's first save finds that run.
// Symbolic links are unlinked, never followed; a directory, FIFO or file of another name stays.
void remove_history(const std::string& dir) {
  std::vector<StepCheckpoint> doomed = step_entries(dir, true);
  struct stat st {};
  const std::string pointer = join(dir, kPointer);
  if (::lstat(pointer.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
    doomed.insert(doomed.begin(), {-1, pointer});  // first: without it no run claims the rest
  for (const StepCheckpoint& c : doomed) {
    if (::unlink(c.path.c_str()) == 0 || errno == ENOENT) continue;
    const int err = errno;
    PT_FAIL("--save-dir '" + dir + "': --overwrite cannot remove the previous run's '" + c.path +
            "': " + std::strerror(err));
  }
}

}  // namespace

// A symbolic link or anything but a regular file is not a checkpoint this program wrote.
std::vector<StepCheckpoint> list_step_checkpoints(const std::string& dir) { return step_entries(dir, false); }

Pointer read_pointer(const std::string& dir) {
  Pointer p;
  const std::string path = join(dir, kPointer);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return p;
  p.exists = true;
  if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMaxPointerBytes) return p;
  std::ifstream in(path);
  std::string name, run;
  if (!std::getline(in, name) || !std::getline(in, run)) return p;
  if (step_of_name(name) < 0 || run.compare(0, 4, "run ") != 0) return p;
  p.name = name;
  p.run_id = run.substr(4);
  return p;
}

std::string newest_good_checkpoint(const std::string& dir, const std::function<void(const std::string&)>& warn) {
  std::vector<StepCheckpoint> all = list_step_checkpoints(dir);
  if (all.empty()) return "";
  const Pointer p = read_pointer(dir);
  // The pointer decides: checkpoints after its step are of a branch given up (a run resumed from
  // an earlier step) or were written just before a crash; theirs is not the run's last state.
  const int64_t last = p.name.empty() ? INT64_MAX : step_of_name(p.name);
  if (!p.name.empty() && !fs::exists(join(dir, p.name)))
    warn("--resume auto: " + join(dir, kPointer) + " names " + p.name + ", which is missing");
  std::vector<std::string> damaged;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->step > last) continue;
    try {
      io::verify_checkpoint(it->path);
    } catch (const std::exception& e) {
      const std::string why = error_text(e);  // names the file, mostly
      warn("--resume auto: skipping a checkpoint that does not load: " +
           (why.find(it->path) == std::string::npos ? it->path + ": " + why : why));
      damaged.push_back(it->path);
      continue;
    }
    if (!p.run_id.empty() && run_id_at(it->path) != p.run_id) continue;  // an earlier run's, left there
    return it->path;
  }
  PT_CHECK(damaged.empty(), "--resume auto: no checkpoint in --save-dir '" + dir + "' loads (" +
                                std::to_string(damaged.size()) +
                                " damaged, named above): move them away to start afresh, or resume one "
                                "with --resume FILE");
  return "";
}

CheckpointDir::CheckpointDir(std::string dir, int64_t keep_last, bool overwrite, const std::string& resumed_from,
                             int64_t resumed_step, bool resume_auto, std::string run_id)
    : dir_(std::move(dir)), run_id_(std::move(run_id)), keep_last_(keep_last) {
  const std::string what = "--save-dir '" + dir_ + "'";
  std::error_code ec;
  if (!fs::exists(dir_, ec)) {
    fs::create_directories(dir_, ec);
    PT_CHECK(!ec, what + ": cannot create it: " + ec.message());
  }
  PT_CHECK(fs::is_directory(dir_, ec), what + " is not a directory");
  lock_ = std::make_unique<io::OutputLock>(join(dir_, kPointer), "checkpoint directory (--save-dir)");
  const Pointer p = read_pointer(dir_);
  const std::vector<StepCheckpoint> existing = list_step_checkpoints(dir_);
  PT_CHECK(!p.exists || !p.name.empty() || overwrite,
           what + ": '" + join(dir_, kPointer) +
               "' is not a checkpoint pointer, and the run writes its pointer there: pass --overwrite to "
               "replace it, or give another --save-dir");
  io::check_output_path(join(dir_, kPointer), true, "checkpoint pointer (--save-dir)");
  // A fresh run: --overwrite clears the previous run's history, only now that the lock is ours.
  if (overwrite && resumed_from.empty()) remove_history(dir_);
  // --resume auto continues the directory: later steps are replaced; finding nothing, it is a fresh run.
  if (overwrite || (resume_auto && !resumed_from.empty())) return;
  if (resumed_from.empty()) {
    PT_CHECK(existing.empty() && !p.exists,
             what + " already holds checkpoints (" + (existing.empty() ? std::string(kPointer) : names_of(existing)) +
                 "): continue them with --resume auto, or pass --overwrite to start a new run there (it "
                 "removes them and the pointer first)");
    return;
  }
  std::vector<StepCheckpoint> later;
  for (const StepCheckpoint& c : existing)
    if (c.step > resumed_step) later.push_back(c);
  PT_CHECK(later.empty(), what + " holds checkpoints after step " + std::to_string(resumed_step) + " of --resume " +
                              resumed_from + " (" + names_of(later) +
                              "), which the run would replace as it goes: pass --overwrite to allow that, or "
                              "give another --save-dir");
}

CheckpointDir::~CheckpointDir() = default;

std::string CheckpointDir::path_for(int64_t step) const { return join(dir_, step_checkpoint_name(step)); }

void CheckpointDir::saved(int64_t step) {
  fault::pause_if_asked("pause-before-pointer", "the pointer update of " + join(dir_, kPointer));
  const std::string text = step_checkpoint_name(step) + "\nrun " + run_id_ + "\n";
  io::write_atomically(join(dir_, kPointer), true, "checkpoint pointer",
                       [&](const std::string& tmp) { io::write_text_file(tmp, text); });
  if (keep_last_ <= 0) return;
  std::vector<StepCheckpoint> older;  // this run's, before the one just written, newest first
  for (const StepCheckpoint& c : list_step_checkpoints(dir_))
    if (c.step < step && run_id_at(c.path) == run_id_) older.push_back(c);
  std::reverse(older.begin(), older.end());
  for (size_t i = static_cast<size_t>(keep_last_ - 1); i < older.size(); ++i) {
    std::error_code ec;
    // A checkpoint that cannot be removed costs disk space, not the run: a warning.
    if (!fs::remove(older[i].path, ec) && ec)
      std::fprintf(stderr, "paratrain: warning: --keep-last: cannot remove %s: %s\n", older[i].path.c_str(),
                   ec.message().c_str());
  }
}

}  // namespace pt::train
