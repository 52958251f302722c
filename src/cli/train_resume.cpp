#include "cli/train_resume.h"

#include "core/error.h"
#include "train/resume.h"

namespace pt::cli {

std::vector<std::string> options_from_checkpoint(const po::options_description& desc, const po::variables_map& vm,
                                                 const io::CheckpointInfo& info, const std::string& path) {
  const std::map<std::string, std::string> given = options_as_strings(vm);
  std::vector<std::string> conflicts, adopt;
  const std::string prefix = "config.";
  for (const auto& [key, stored] : info.text) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string name = key.substr(prefix.size());
    if (train::resume_not_restored(name) || !desc.find_nothrow(name, false)) continue;
    const bool is_given = vm.count(name) && !vm[name].defaulted();
    if (!is_given) {
      // The default already gives the stored value (and a sentinel default, such as --min-lr's
      // -1 for "lr/10", must not be given explicitly).
      if (vm.count(name) && given.at(name) == stored) continue;
      // No checkpoint to save now, or no directory to keep them in.
      if (name == "save-every" && !vm.count("save") && !vm.count("save-dir")) continue;
      if (name == "keep-last" && !vm.count("save-dir")) continue;
      adopt.push_back("--" + name);
      adopt.push_back(stored);
    } else if (name != "data" && !train::resume_may_change(name) && given.at(name) != stored) {
      conflicts.push_back("--" + name + " " + given.at(name) + " (the checkpoint's is " +
                          (stored.empty() ? "empty" : stored) + ")");
    }
  }
  if (!conflicts.empty()) {
    std::string msg = "--resume " + path + ": the checkpoint holds this run's configuration and ";
    msg += conflicts.size() == 1 ? "this option differs: " : std::to_string(conflicts.size()) + " options differ: ";
    for (size_t i = 0; i < conflicts.size(); ++i) msg += (i ? "; " : "") + conflicts[i];
    std::string free_list;
    for (const char* n : train::kResumeMayChange) free_list += std::string(free_list.empty() ? "" : ", ") + "--" + n;
    for (const char* n : train::kResumeNotRestored) free_list += std::string(", --") + n;
    msg += ". Leave them out to continue the run exactly (only " + free_list +
           " may differ), or start a new run from its weights with --init-from";
    PT_FAIL(msg);
  }
  return adopt;
}

void AdoptedOptions::blame_checkpoint(const std::exception& e) const {
  const std::string why = error_text(e);
  if (why.rfind("--resume " + checkpoint_ + ":", 0) == 0) return;  // blamed already
  for (size_t i = 0; i + 1 < words_.size(); i += 2) {
    const std::string& flag = words_[i];
    const std::string& value = words_[i + 1];
    if (error_names_option(why, flag, value))
      PT_FAIL("--resume " + checkpoint_ + ": the checkpoint's attribute config." + flag.substr(2) + " ('" + value +
              "') is not usable: " + why);
  }
}

}  // namespace pt::cli
