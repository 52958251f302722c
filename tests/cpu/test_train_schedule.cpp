// What a resumed run keeps (issue 47): the learning-rate schedule's length from its checkpoint,
// changed only by --cosine-steps given again (with a warning).
#include <gtest/gtest.h>

#include <string>

#include "optim/optimizer.h"
#include "train/resume.h"

namespace pt {
namespace {

using train::schedule_length;
using train::schedule_notice;

io::CheckpointInfo checkpoint(const std::string& cosine_steps, const std::string& steps) {
  io::CheckpointInfo info;
  info.step = 10;
  info.text["config.cosine-steps"] = cosine_steps;
  info.text["config.steps"] = steps;
  return info;
}

double lr(int64_t step, int64_t end) { return cosine_lr(step, 3e-3, 3e-4, 2, end); }

TEST(ResumeSchedule, AFreshRunTakesCosineStepsOrSteps) {
  EXPECT_EQ(schedule_length(0, false, 20, nullptr).steps, 20);
  EXPECT_EQ(schedule_length(15, true, 20, nullptr).steps, 15);
  EXPECT_EQ(schedule_length(15, true, 20, nullptr).changed_from, 0);
}

TEST(ResumeSchedule, AResumedRunKeepsItsCheckpointsLengthWhateverStepsSays) {
  const io::CheckpointInfo ck = checkpoint("10", "10");
  // Not given: cosine_steps holds the adopted value, but the checkpoint's is what counts.
  const train::ScheduleLength s = schedule_length(10, false, 20, &ck);
  EXPECT_EQ(s.steps, 10);
  EXPECT_EQ(s.changed_from, 0);
  const std::string note = schedule_notice(s, 10, 20, ck, lr);
  EXPECT_NE(note.find("note: --steps 20 runs past the end"), std::string::npos) << note;
  EXPECT_NE(note.find("steps 11 to 20 keep its final learning rate 0.0003"), std::string::npos) << note;
  // The same --steps as the run that saved it: nothing to say.
  EXPECT_EQ(schedule_notice(schedule_length(10, false, 10, &ck), 5, 10, ck, lr), "");
}

TEST(ResumeSchedule, CosineStepsGivenAgainChangesItWithAWarning) {
  const io::CheckpointInfo ck = checkpoint("10", "10");
  const train::ScheduleLength s = schedule_length(20, true, 20, &ck);
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.changed_from, 10);
  const std::string w = schedule_notice(s, 10, 20, ck, lr);
  EXPECT_NE(w.find("warning: --cosine-steps 20 changes the learning-rate schedule"), std::string::npos) << w;
  EXPECT_NE(w.find("ended at step 10, now at step 20"), std::string::npos) << w;
  // 0 means --steps, given again as well; the checkpoint's own length is no change.
  EXPECT_EQ(schedule_length(0, true, 20, &ck).changed_from, 10);
  EXPECT_EQ(schedule_length(10, true, 20, &ck).changed_from, 0);
}

TEST(ResumeSchedule, OlderCheckpointsHadTheirRunsStepsAsTheLength) {
  const io::CheckpointInfo old = checkpoint("0", "6");  // saved before the length was resolved
  EXPECT_EQ(schedule_length(0, false, 12, &old).steps, 6);
  io::CheckpointInfo none;  // format 1: no configuration at all, so this run's options decide
  EXPECT_EQ(schedule_length(0, false, 12, &none).steps, 12);
}

}  // namespace
}  // namespace pt
