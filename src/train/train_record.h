#pragma once
// The record of `train` (docs/HDF5_SCHEMA.md): one row per step in /train_steps, one per
// evaluation in /eval, one per shard of its token data in /data_shards, and one per segment in
// /train_segments — the part of a run one process ran: the first, then each resume.
// A resumed run whose --out is its own record (the same run id as the checkpoint it resumes
// from: train/train_outputs.h) continues it instead of being refused because it exists: the rows
// of the steps up to the one it starts from are kept (later ones, which it runs again, are
// dropped), and so are their evaluations and the earlier segments. Another run's record, or any record when `--resume
// auto` starts afresh, is refused unless --overwrite replaces it. Rank 0 reads and writes; the
// other ranks hold an empty record.
#include <cstdint>
#include <string>

#include "io/run_record.h"
#include "io/table.h"
#include "io/token_shards.h"

namespace pt::train {

class TrainRecord {
 public:
  // start_step: the step this process starts after (0 for a fresh start); resumed: --resume was
  // given; resumed_from: the checkpoint ("" when starting afresh) and resumed_run_id its run id;
  // run_id: this run's, stored as the record's "run_id".
  TrainRecord(const std::string& out, bool overwrite, bool resumed, int64_t start_step, const std::string& resumed_from,
              const std::string& resumed_run_id, const std::string& run_id, int world_size);

  io::RunRecord& record() { return record_; }
  const std::string& path() const { return record_.path(); }
  // Rows kept from the record this run continues (0 for a new one).
  size_t continued_rows() const { return continued_rows_; }

  void add_step(int64_t step, double loss, double lr, double grad_norm, double step_ms, double tokens_per_s);
  void add_eval(int64_t step, double val_loss, int64_t tokens, double ms);
  // A row of /eval at that step (continued or added). Collective: only rank 0 holds the rows, and
  // every rank gets its answer, so decisions taken on it agree.
  bool has_eval(int64_t step) const;
  // The shards of the training data and of the validation data (null: none), and the data's
  // identity as the root attribute data.identity.
  void set_data(const io::TokenShards& train,
                const io::TokenShards*
                    val);  // Sets the status attribute and this segment's last step and status, then writes the file
  // (rank 0; a no-op on the others). final_loss: the last finite mean loss.
  void commit(const std::string& status, int64_t last_step, double final_loss);

 private:
  bool root_;
  bool continuing_;  // rank 0: --out is a record this run continues
  io::RunRecord record_;
  io::ResultTable steps_, segments_, evals_, shards_;
  size_t continued_rows_ = 0;
  size_t segment_row_ = 0;  // this process's row of segments_
};

}  // namespace pt::train
