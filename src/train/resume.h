#pragma once
// `train --resume`: a checkpoint carries the whole run configuration, so `--resume FILE` alone
// continues the run exactly, and any option given again with another value is refused (issue
// 14's exact resume; cli/train_resume.h compares the command line). `--resume auto` continues
// from the --save file when there is one. What a resumed run keeps: its schedule and its data.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint.h"

namespace pt::train {

// How --resume treats each option of train: every option not listed here must be given again
// with the checkpoint's value or not at all (then the checkpoint's is used). These may change:
// how far to run and how often to log, save and evaluate, and on what (the checkpoint's when not
// given: evaluation never changes training), and where to
// write and how to run the job (never restored; --init-from neither: a resumed run's weights are
// the checkpoint's). --data may name another path to the same file: it is compared by the file's
// identity (size, token type and count, content hashes) instead of its path. --config neither:
// the checkpoint holds every option its file set, as if given as a flag, so the file may be
// gone or edited when the run resumes.
// (--cuda-graph and --update-overlap change how the step is launched, not what it computes: bit
// for bit the same. --update-sms changes which SMs GEMMs run on, and so perhaps their cuBLAS
// algorithms: the same computation, rounded in another order. --comm-engine changes what moves
// the gradients: with 2 ranks the same sums, with more the same sums in another order.)
inline constexpr const char* kResumeMayChange[] = {
    "steps",       "cosine-steps", "log-every",   "save-every", "cuda-graph",  "update-overlap", "update-sms",
    "comm-engine", "eval-every",   "eval-tokens", "val-data",   "peak-tflops", "keep-last"};
inline constexpr const char* kResumeNotRestored[] = {"log-format",   "log-file",          "save",   "save-dir",
                                                     "out",          "overwrite",         "resume", "init-from",
                                                     "comm-timeout", "allow-gpu-sharing", "config", "print-config"};

// The checkpoint `--resume` names: "auto" → the --save file when it exists, or with --save-dir
// the newest checkpoint there that loads (each one skipped goes to warn); else "": a fresh
// start. Any other value → itself.
std::string resume_path(const std::string& resume, const std::string& save, const std::string& save_dir,
                        const std::function<void(const std::string&)>& warn);

// Stores every option of `options` (name → value as text) but kResumeNotRestored as
// "config.<name>" text attributes: the configuration a resumed run continues with.
void add_run_config(io::CheckpointInfo& info, const std::map<std::string, std::string>& options);

// Whether an option's name is one of `kResumeMayChange` or `kResumeNotRestored`.
bool resume_may_change(const std::string& name);
bool resume_not_restored(const std::string& name);

// The length of the learning-rate schedule (the step its cosine decay ends at): --cosine-steps,
// or --steps when that is 0. A resumed run keeps its checkpoint's length, whatever --steps says
// now (the schedule of `--steps 10` continued with `--steps 20` stays that of 10 steps), unless
// --cosine-steps is given again (cosine_given): then `changed_from` is the checkpoint's length
// when the new one differs, for a warning. A checkpoint saves the resolved length as
// config.cosine-steps; one saved before (0 there) had its run's --steps as its length.
struct ScheduleLength {
  int64_t steps = 0;
  int64_t changed_from = 0;  // 0: unchanged
};
ScheduleLength schedule_length(int64_t cosine_steps, bool cosine_given, int64_t steps,
                               const io::CheckpointInfo* resumed);
// One line for a resumed run (rank 0 prints it on stderr), or "": a warning when `s` changed the
// schedule, or a note when --steps now runs past the end of the checkpoint's schedule (the
// extra steps at the final learning rate). lr(step, end): the learning rate of a step
// (1-based) in a schedule whose decay ends at `end`.
std::string schedule_notice(const ScheduleLength& s, int64_t start_step, int64_t steps,
                            const io::CheckpointInfo& resumed, const std::function<double(int64_t, int64_t)>& lr);

// The data file's identity as the checkpoint stored it ("data.identity"), compared with the
// file this run reads: one error naming both when they differ. No-op for older checkpoints.
void check_same_data(const io::CheckpointInfo& info, const std::string& identity, const std::string& data_path,
                     const std::string& checkpoint_path);

}  // namespace pt::train
