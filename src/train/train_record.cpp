#include "train/train_record.h"

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "core/env.h"
#include "core/error.h"
#include "io/record_reader.h"
#include "parallel/runtime.h"

namespace pt::train {

namespace {

io::ResultTable steps_schema() {
  io::ResultTable t("train_steps", "one row per training step (rank 0; loss averaged over ranks)");
  t.add_int("step", "1-based step number")
      .add_double("loss", "mean cross-entropy, nats", 4)
      .add_double("lr", "learning rate", 6)
      .add_double("grad_norm", "global norm before clipping", 4)
      .add_double("step_ms", "wall time of the step, ms", 2)
      .add_double("tokens_per_s", "global tokens of the step / step_ms, tokens per second", 0);
  return t;
}

io::ResultTable segments_schema() {
  io::ResultTable t("train_segments", "one row per process that ran part of this run: the first, then each resume");
  t.add_int("segment", "1-based")
      .add_int("first_step", "the first step it ran (1-based)")
      .add_int("last_step", "the last step it completed (first_step - 1: none)")
      .add_string("status", "completed, interrupted: ..., failed: ..., or running")
      .add_string("started", "UTC, ISO 8601")
      .add_string("resumed_from", "checkpoint it started from (empty: fresh)")
      .add_int("world_size", "ranks")
      .add_string("slurm_job_id", "SLURM_JOB_ID (empty outside Slurm)")
      .add_int("slurm_restart_count", "SLURM_RESTART_COUNT: how often Slurm requeued the job (0 outside Slurm)");
  return t;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Whether `out` is a record this run continues: with --resume, an existing train record of the
// same run (its run_id is the one the checkpoint holds; "" on both sides for files written before
// run ids). Anything else that exists is refused unless --overwrite replaces it.
bool continues(const std::string& out, bool overwrite, bool resumed, const std::string& resumed_from,
               const std::string& resumed_run_id) {
  std::error_code ec;
  if (!resumed || out.empty() || !std::filesystem::exists(out, ec) || overwrite) return false;
  const auto kind = io::read_record_text(out, "subcommand");
  PT_CHECK(kind && *kind == "train", "--out " + out +
                                         " exists and is not the record of a train run, so a resumed "
                                         "run cannot continue it: give another --out, or --overwrite to replace it");
  PT_CHECK(!resumed_from.empty(), "--out " + out +
                                      " exists, and this run starts afresh (--resume auto found no checkpoint), so "
                                      "it is not this run's record: give another --out, or --overwrite to replace it");
  const std::string id = io::read_record_text(out, "run_id").value_or("");
  PT_CHECK(id == resumed_run_id, "--out " + out + " is the record of another run (run id " +
                                     (id.empty() ? "none" : id) + "; the checkpoint " + resumed_from + " is of " +
                                     (resumed_run_id.empty() ? "a run without one" : "run " + resumed_run_id) +
                                     "): a resumed run continues only its own record: give another --out, or "
                                     "--overwrite to replace it");
  return true;
}

}  // namespace

TrainRecord::TrainRecord(const std::string& out, bool overwrite, bool resumed, int64_t start_step,
                         const std::string& resumed_from, const std::string& resumed_run_id, const std::string& run_id,
                         int world_size)
    : root_(parallel::Runtime::get().is_root()),
      continuing_(root_ && continues(out, overwrite, resumed, resumed_from, resumed_run_id)),
      record_("train", out, overwrite || continuing_),
      steps_(steps_schema()),
      segments_(segments_schema()) {
  if (continuing_) {
    io::ResultTable old = steps_schema();
    io::read_table_rows(out, old);
    const int step_col = old.column_index("step");
    for (size_t r = 0; r < old.rows(); ++r) {
      if (std::get<int64_t>(old.at(r, static_cast<size_t>(step_col))) > start_step) continue;
      auto row = steps_.add_row();
      for (size_t c = 0; c < old.columns().size(); ++c) {
        const io::Value& v = old.at(r, c);
        const std::string& name = old.columns()[c].name;
        if (const auto* i = std::get_if<int64_t>(&v))
          row.set(name, *i);
        else
          row.set(name, std::get<double>(v));
      }
      ++continued_rows_;
    }
    io::read_table_rows(out, segments_);
  }
  segment_row_ = segments_.rows();
  segments_.add_row()
      .set("segment", static_cast<int64_t>(segment_row_ + 1))
      .set("first_step", start_step + 1)
      .set("last_step", start_step)
      .set("status", "running")
      .set("started", utc_now())
      .set("resumed_from", resumed_from)
      .set("world_size", static_cast<int64_t>(world_size))
      .set("slurm_job_id", env::text("SLURM_JOB_ID").value_or(""))
      .set("slurm_restart_count", env::integer("SLURM_RESTART_COUNT", 0, INT64_MAX).value_or(0));
  if (!resumed_from.empty()) record_.set_attr("resumed_from", resumed_from);
  record_.set_attr("run_id", run_id);
}

void TrainRecord::add_step(int64_t step, double loss, double lr, double grad_norm, double step_ms,
                           double tokens_per_s) {
  steps_.add_row()
      .set("step", step)
      .set("loss", loss)
      .set("lr", lr)
      .set("grad_norm", grad_norm)
      .set("step_ms", step_ms)
      .set("tokens_per_s", tokens_per_s);
}

void TrainRecord::commit(const std::string& status, int64_t last_step, double final_loss) {
  // A ResultTable row cannot be edited in place: rebuild the segments with this one updated.
  io::ResultTable segments = segments_schema();
  for (size_t r = 0; r < segments_.rows(); ++r) {
    auto row = segments.add_row();
    for (size_t c = 0; c < segments_.columns().size(); ++c) {
      const std::string& name = segments_.columns()[c].name;
      const io::Value& v = segments_.at(r, c);
      if (r == segment_row_ && name == "last_step")
        row.set(name, last_step);
      else if (r == segment_row_ && name == "status")
        row.set(name, status);
      else if (const auto* i = std::get_if<int64_t>(&v))
        row.set(name, *i);
      else if (const auto* d = std::get_if<double>(&v))
        row.set(name, *d);
      else
        row.set(name, std::get<std::string>(v));
    }
  }
  segments_ = segments;
  record_.set_attr("status", status);
  record_.set_attr("final_loss", final_loss);
  record_.add_table(steps_);
  record_.add_table(segments_);
  if (root_) record_.commit();
}

}  // namespace pt::train
