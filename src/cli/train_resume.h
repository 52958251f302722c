#pragma once
// `train --resume` on the command line: the checkpoint's stored options (train/resume.h) against
// the ones given again.
#include <string>
#include <vector>

#include "cli/options.h"
#include "io/checkpoint.h"

namespace pt::cli {

// Checks the command line against the configuration `info` holds: one error listing every
// option given with a value other than the checkpoint's; returns the words ("--name", value)
// that give every other stored option the checkpoint's value, to parse after the command line.
// A checkpoint written before configurations were stored (format 1) restores nothing: the
// options given are used as they are. Options this build does not know are ignored.
std::vector<std::string> options_from_checkpoint(const po::options_description& desc, const po::variables_map& vm,
                                                 const io::CheckpointInfo& info, const std::string& path);

// The options a resumed run took from its checkpoint (options_from_checkpoint's words), until its
// work starts: an error then that names one of them ("--lr") or quotes its value ("unknown model
// size 'x'") is the checkpoint's fault, and is reported naming the file and the attribute.
class AdoptedOptions {
 public:
  void set(const std::string& checkpoint, const std::vector<std::string>& words) {
    checkpoint_ = checkpoint;
    words_ = words;
  }
  void clear() { words_.clear(); }
  // Throws e again as "--resume FILE: the checkpoint's attribute config.NAME is not usable: ..."
  // when it fits an adopted option; returns otherwise.
  void blame_checkpoint(const std::exception& e) const;

 private:
  std::string checkpoint_;
  std::vector<std::string> words_;
};

}  // namespace pt::cli
