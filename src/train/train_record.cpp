#include "train/train_record.h"

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <variant>

#include "core/env.h"
#include "core/error.h"
#include "io/record_reader.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"
#include "train/evaluate.h"

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

// Appends row r of `from` to `into` (the same columns), a cell named in `replaced` changed.
void copy_row(const io::ResultTable& from, size_t r, io::ResultTable& into,
              const std::map<std::string, io::Value>& replaced = {}) {
  auto row = into.add_row();
  for (size_t c = 0; c < from.columns().size(); ++c) {
    const std::string& name = from.columns()[c].name;
    const auto it = replaced.find(name);
    std::visit([&](const auto& v) { row.set(name, v); }, it != replaced.end() ? it->second : from.at(r, c));
  }
}

// Appends to `into` (empty, made by `schema`) the rows of its table in the record at `out` whose
// step is at most `last_step`: the rows a continued run keeps. Returns how many.
size_t keep_rows_up_to(const std::string& out, io::ResultTable (*schema)(), io::ResultTable& into, int64_t last_step) {
  io::ResultTable old = schema();
  io::read_table_rows(out, old);
  const auto step_col = static_cast<size_t>(old.column_index("step"));
  for (size_t r = 0; r < old.rows(); ++r)
    if (std::get<int64_t>(old.at(r, step_col)) <= last_step) copy_row(old, r, into);
  return into.rows();
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
      segments_(segments_schema()),
      evals_(eval_table()),
      shards_(data_shards_table()) {
  if (continuing_) {
    continued_rows_ = keep_rows_up_to(out, steps_schema, steps_, start_step);
    keep_rows_up_to(out, eval_table, evals_, start_step);
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

void TrainRecord::add_eval(int64_t step, double val_loss, int64_t tokens, double ms) {
  evals_.add_row().set("step", step).set("val_loss", val_loss).set("tokens", tokens).set("ms", ms);
}

bool TrainRecord::has_eval(int64_t step) const {
  int64_t found = 0;
  for (size_t r = 0; root_ && found == 0 && r < evals_.rows(); ++r) found = std::get<int64_t>(evals_.at(r, 0)) == step;
  return parallel::sum_over_ranks(found) > 0;
}

void TrainRecord::set_data(const io::TokenShards& train, const io::TokenShards* val) {
  shards_ = data_shards_table();
  add_shards(shards_, "train", train);
  if (val) add_shards(shards_, "val", *val);
  record_.set_attr("data.identity", train.identity());
}

void TrainRecord::commit(const std::string& status, int64_t last_step, double final_loss) {
  // A ResultTable row cannot be edited in place: rebuild the segments with this one updated.
  io::ResultTable segments = segments_schema();
  for (size_t r = 0; r < segments_.rows(); ++r)
    copy_row(segments_, r, segments,
             r == segment_row_ ? std::map<std::string, io::Value>{{"last_step", last_step}, {"status", status}}
                               : std::map<std::string, io::Value>{});
  segments_ = segments;
  record_.set_attr("status", status);
  record_.set_attr("final_loss", final_loss);
  record_.add_table(steps_);
  record_.add_table(segments_);
  if (evals_.rows() > 0) record_.add_table(evals_);
  if (shards_.rows() > 0) record_.add_table(shards_);
  if (root_) record_.commit();
}

}  // namespace pt::train
