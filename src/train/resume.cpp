#include "train/resume.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>

#include "core/error.h"
#include "train/checkpoint_dir.h"

namespace pt::train {

namespace {
constexpr const char* kConfigPrefix = "config.";

template <size_t N>
bool listed(const char* const (&list)[N], const std::string& name) {
  return std::find_if(std::begin(list), std::end(list), [&](const char* n) { return name == n; }) != std::end(list);
}
}  // namespace

std::string resume_path(const std::string& resume, const std::string& save, const std::string& save_dir,
                        const std::function<void(const std::string&)>& warn) {
  if (resume != "auto") return resume;
  PT_CHECK(!save.empty() || !save_dir.empty(), "--resume auto continues from the --save checkpoint when it exists, "
                                               "or the newest in --save-dir: give --save FILE or --save-dir DIR");
  PT_CHECK(save.empty() || save_dir.empty(), "--save and --save-dir contradict each other: --save keeps one "
                                             "checkpoint file, --save-dir a history of them; pick one");
  if (!save_dir.empty()) return newest_good_checkpoint(save_dir, warn);
  std::error_code ec;
  return std::filesystem::exists(save, ec) ? save : std::string();
}

void add_run_config(io::CheckpointInfo& info, const std::map<std::string, std::string>& options) {
  for (const auto& [name, value] : options)
    if (!resume_not_restored(name)) info.text[kConfigPrefix + name] = value;
}

bool resume_may_change(const std::string& name) { return listed(kResumeMayChange, name); }
bool resume_not_restored(const std::string& name) { return listed(kResumeNotRestored, name); }

ScheduleLength schedule_length(int64_t cosine_steps, bool cosine_given, int64_t steps,
                               const io::CheckpointInfo* resumed) {
  const int64_t own = cosine_steps > 0 ? cosine_steps : steps;
  if (!resumed) return {own, 0};
  int64_t saved = 0;  // the checkpoint's length; 0 when it stored no configuration
  for (const char* key : {"config.cosine-steps", "config.steps"}) {
    const auto it = resumed->text.find(key);
    if (saved == 0 && it != resumed->text.end()) saved = std::strtoll(it->second.c_str(), nullptr, 10);
  }
  if (saved <= 0) return {own, 0};
  if (!cosine_given) return {saved, 0};
  return {own, own != saved ? saved : 0};
}

std::string schedule_notice(const ScheduleLength& s, int64_t start_step, int64_t steps,
                            const io::CheckpointInfo& resumed, const std::function<double(int64_t, int64_t)>& lr) {
  char buf[512];
  const long long next = start_step + 1;
  if (s.changed_from > 0) {
    std::snprintf(buf, sizeof buf,
                  "warning: --cosine-steps %lld changes the learning-rate schedule of the resumed run: its decay "
                  "ended at step %lld, now at step %lld (step %lld's learning rate: %.3g instead of %.3g)",
                  static_cast<long long>(s.steps), static_cast<long long>(s.changed_from),
                  static_cast<long long>(s.steps), next, lr(next, s.steps), lr(next, s.changed_from));
    return buf;
  }
  const auto saved_steps = resumed.text.find("config.steps");
  const bool steps_grew =
      saved_steps != resumed.text.end() && std::strtoll(saved_steps->second.c_str(), nullptr, 10) < steps;
  if (!steps_grew || steps <= s.steps) return "";
  const std::string past =
      std::max(s.steps, start_step) + 1 == steps
          ? "step " + std::to_string(steps) + " keeps"
          : "steps " + std::to_string(std::max(s.steps, start_step) + 1) + " to " + std::to_string(steps) + " keep";
  std::snprintf(buf, sizeof buf,
                "note: --steps %lld runs past the end of the resumed run's learning-rate schedule (its decay ends "
                "at step %lld): %s its final learning rate %.3g; --cosine-steps %lld would stretch the schedule "
                "instead",
                static_cast<long long>(steps), static_cast<long long>(s.steps), past.c_str(), lr(steps, s.steps),
                static_cast<long long>(steps));
  return buf;
}

void check_same_data(const io::CheckpointInfo& info, const std::string& identity, const std::string& data_path,
                     const std::string& checkpoint_path) {
  const auto it = info.text.find("data.identity");
  if (it == info.text.end()) return;
  PT_CHECK(it->second == identity, "--resume " + checkpoint_path + ": the token file '" + data_path +
                                       "' is not the one the run was trained on (" + identity +
                                       "; the checkpoint's: " + it->second + "); give --data the original file");
}

}  // namespace pt::train
