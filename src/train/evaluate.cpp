#include "train/evaluate.h"

#include <chrono>

#include "core/error.h"
#include "parallel/host_collectives.h"

namespace pt::train {

int64_t eval_token_budget(int64_t eval_tokens, int64_t global_batch, int64_t context_length) {
  if (eval_tokens > 0) return eval_tokens;
  int64_t budget = 0;
  PT_CHECK(!__builtin_mul_overflow(kDefaultEvalBatches * global_batch, context_length, &budget),
           "--batch-size × --context-length is too large to count the validation tokens");
  return budget;
}

io::ResultTable eval_table() {
  io::ResultTable t("eval",
                    "one row per evaluation of the validation loss (train --eval-every, --val-data; paratrain eval)");
  t.add_int("step", "the training steps done before it (1-based step number)")
      .add_double("val_loss", "mean cross-entropy over the validation tokens, all ranks, nats", 4)
      .add_int("tokens", "validation target tokens over all ranks")
      .add_double("ms", "wall time of the evaluation, ms", 2);
  return t;
}

io::ResultTable data_shards_table() {
  io::ResultTable t("data_shards", "one row per token file the run reads, in stream order");
  t.add_string("split", "train (--data) or val (--val-data; paratrain eval --data)")
      .add_string("path", "the file as opened")
      .add_int("tokens", "its token count")
      .add_string("sha256", "SHA-256 of the whole file, 64 hex digits");
  return t;
}

void add_shards(io::ResultTable& table, const std::string& split, const io::TokenShards& set) {
  for (const io::ShardInfo& s : set.shards())
    table.add_row().set("split", split).set("path", s.path).set("tokens", s.tokens).set("sha256", s.sha256);
}

EvalResult evaluate(TransformerLM& lm, Context& ctx, const io::ValidationBatches& batches) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t rows = batches.local_batch(), T = lm.config().context_length;
  Tensor h_ids = Tensor::empty({rows, T}, DType::I32, Device::cpu(), "eval_ids");
  Tensor h_tg = Tensor::empty({rows, T}, DType::I32, Device::cpu(), "eval_targets");
  const bool copy = ctx.device().is_cuda();
  double sum = 0;  // this rank's summed cross-entropy
  for (int64_t i = 0; i < batches.count(); ++i) {
    batches.fill(i, h_ids.data_as<int32_t>(), h_tg.data_as<int32_t>());
    const Tensor ids = copy ? h_ids.to(ctx.device(), ctx) : h_ids;
    const Tensor tg = copy ? h_tg.to(ctx.device(), ctx) : h_tg;
    const Tensor mean = lm.forward(ctx, ids, tg, /*save_for_backward=*/false);
    sum += mean.to_host_f64(ctx)[0] * static_cast<double>(rows * T);
  }
  const std::vector<double> total =
      parallel::sum_over_ranks(std::vector<double>{sum, static_cast<double>(batches.count() * rows * T)});
  EvalResult r;
  r.loss = total[0] / total[1];
  r.tokens = static_cast<int64_t>(total[1]);
  r.batches = batches.count();
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace pt::train
