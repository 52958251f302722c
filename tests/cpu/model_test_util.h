#pragma once
// What the CPU model tests share: the tiny configuration and the model's own loss on given ids.
#include <cstdint>
#include <vector>

#include "common/test_util.h"
#include "model/transformer.h"

namespace pt::model_test {

inline TransformerConfig tiny_config() { return test::test_transformer(11, 6, 8, 2, 2, 12); }

// Runs the model's own forward in fp64 and returns the loss.
inline double model_loss(Context& ctx, TransformerLM& m, const std::vector<int32_t>& ids,
                         const std::vector<int32_t>& targets, int64_t B, int64_t T, bool save) {
  Tensor tid = test::make_ids(ctx, {B, T}, ids), ttg = test::make_ids(ctx, {B, T}, targets);
  Tensor loss = m.forward(ctx, tid, ttg, save);
  return loss.to_host_f64(ctx)[0];
}

}  // namespace pt::model_test
