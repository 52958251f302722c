#include "train/train_outputs.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <utility>

#include "core/error.h"
#include "io/atomic_file.h"

namespace pt::train {

namespace {

constexpr const char* kRunIdKey = "run.id";

// Whether two paths name one file: the same path once made absolute and normal, or (both
// existing) the same inode.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  return std::filesystem::absolute(a).lexically_normal() == std::filesystem::absolute(b).lexically_normal();
}

// The run id of the checkpoint at `path`, if it is a paratrain checkpoint that has one.
std::string run_id_in_file(const std::string& path) {
  try {
    return run_id_of(io::read_checkpoint_info(path));
  } catch (const std::exception&) {
    return "";  // not a checkpoint (or not readable): not the run's own
  }
}

}  // namespace

std::string new_run_id() {
  std::random_device source;  // the system's random source (getrandom / /dev/urandom)
  std::string id;
  for (int i = 0; i < 4; ++i) {
    char word[9];
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(source()));
    id += word;
  }
  return id;
}

std::string run_id_of(const io::CheckpointInfo& info) {
  const auto it = info.text.find(kRunIdKey);
  return it == info.text.end() ? "" : it->second;
}

void refuse_shared_names(const TrainFiles& f) {
  using Named = std::pair<std::string, std::string>;  // (path, what it is)
  const Named reads[] = {{f.data, "the token file --data reads"},
                         {f.resume_from, "the checkpoint --resume reads"},
                         {f.init_from, "the checkpoint --init-from reads"}};
  const Named writes[] = {{f.save, "--save"}, {f.out, "--out"}, {f.log_file, "--log-file"}};
  for (const auto& [path, flag] : writes)
    for (size_t k = 0; k < 3; ++k) {
      // --save may continue its own checkpoint (--resume auto) or replace its start (--init-from,
      // with --overwrite); it never names the token file.
      if (path.empty() || reads[k].first.empty() || (flag == "--save" && k > 0)) continue;
      PT_CHECK(!same_file(path, reads[k].first), flag + " " + path + " is " + reads[k].second);
    }
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = i + 1; j < 3; ++j)
      PT_CHECK(writes[i].first.empty() || writes[j].first.empty() || !same_file(writes[i].first, writes[j].first),
               writes[i].second + " " + writes[i].first + " and " + writes[j].second + " " + writes[j].first +
                   " name the same file; a run writes each of them");
}

bool check_save_target(const std::string& save, bool overwrite, const std::string& resumed_from,
                       const std::string& resumed_run_id) {
  struct stat st {};
  const bool exists = ::stat(save.c_str(), &st) == 0;
  const bool own =
      exists && !resumed_from.empty() &&
      (same_file(save, resumed_from) || (!resumed_run_id.empty() && run_id_in_file(save) == resumed_run_id));
  PT_CHECK(!exists || overwrite || own || resumed_from.empty() || !S_ISREG(st.st_mode),
           "checkpoint (--save) '" + save + "' already exists and is not a checkpoint of the run --resume " +
               resumed_from +
               " continues (a resumed run replaces only its own): pass --overwrite to replace it, "
               "or give another --save");
  io::check_output_path(save, overwrite || own, "checkpoint (--save)");
  return overwrite || own;
}

}  // namespace pt::train
