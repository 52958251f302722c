#pragma once
// The validation loss: the mean cross-entropy of the model over a fixed set of validation
// batches (io::ValidationBatches), shared by `train --eval-every` and `paratrain eval`.
//
// Each rank runs the forward of its rows of every batch in inference (no activations kept, no
// gradient written), adds its per-batch mean × its tokens, and the ranks sum those sums and
// their token counts: the loss is Σ sums / Σ tokens, the mean over the same token set whatever
// the rank count (rounding aside: each rank's mean is fp32). Nothing the next training step
// reads changes: the parameters, gradients and optimizer state are left alone, and batches are
// a pure function of the data (no random state is drawn).
#include <cstdint>
#include <string>

#include "core/context.h"
#include "io/table.h"
#include "io/token_shards.h"
#include "model/transformer.h"

namespace pt::train {

// The input tokens an evaluation takes when --eval-tokens is 0: eight batches (or the whole
// validation set when it holds fewer).
constexpr int64_t kDefaultEvalBatches = 8;
int64_t eval_token_budget(int64_t eval_tokens, int64_t global_batch, int64_t context_length);

struct EvalResult {
  double loss = 0;     // mean cross-entropy over every token of every batch, nats
  int64_t tokens = 0;  // target tokens over all ranks
  int64_t batches = 0;
  double ms = 0;  // wall time of the evaluation
};

// The record's tables (docs/HDF5_SCHEMA.md): /eval, one row per evaluation (step, val_loss,
// tokens, ms), and /data_shards, one row per token file read (split, path, tokens, sha256).
io::ResultTable eval_table();
io::ResultTable data_shards_table();
void add_shards(io::ResultTable& table, const std::string& split, const io::TokenShards& set);

// Collective: every rank calls it with its own `batches` (its rank and the same world size).
EvalResult evaluate(TransformerLM& lm, Context& ctx, const io::ValidationBatches& batches);

}  // namespace pt::train
