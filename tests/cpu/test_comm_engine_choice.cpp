// --comm-engine auto per configuration (train/data_parallel.h): the copy engines only where they
// measured faster than NCCL, and nccl and ce passed through whatever the configuration.
#include <gtest/gtest.h>

#include "train/data_parallel.h"

namespace pt {
namespace {

using parallel::CommEngine;

CommEngine choose(const char* ddp, ShardMode shard, bool bf16, int ranks, CommEngine asked = CommEngine::Auto) {
  return comm_engine_for(asked, parallel::strategy(ddp), shard, bf16, ranks);
}

TEST(CommEngineChoice, AutoTakesTheCopyEnginesOnlyWhereTheyMeasuredFaster) {
  // Bucketed ZeRO-1 with bf16 gradients: ce on 2 and 4 ranks.
  EXPECT_EQ(choose("bucketed", ShardMode::Zero1, true, 2), CommEngine::Auto);
  EXPECT_EQ(choose("bucketed", ShardMode::Zero1, true, 4), CommEngine::Auto);
  // Bucketed all-reduce with bf16 gradients: ce on 2 ranks, NCCL on 4.
  EXPECT_EQ(choose("bucketed", ShardMode::None, true, 2), CommEngine::Auto);
  EXPECT_EQ(choose("bucketed", ShardMode::None, true, 4), CommEngine::NCCL);
  // fp32 gradients, one reduce-scatter after backward, the other strategies: NCCL.
  EXPECT_EQ(choose("bucketed", ShardMode::Zero1, false, 2), CommEngine::NCCL);
  EXPECT_EQ(choose("bucketed", ShardMode::None, false, 2), CommEngine::NCCL);
  EXPECT_EQ(choose("flat", ShardMode::Zero1, true, 2), CommEngine::NCCL);
  EXPECT_EQ(choose("naive", ShardMode::None, true, 2), CommEngine::NCCL);
  EXPECT_EQ(choose("overlap", ShardMode::None, true, 2), CommEngine::NCCL);
}

TEST(CommEngineChoice, NcclAndCeAreKeptAsAsked) {
  for (CommEngine e : {CommEngine::NCCL, CommEngine::CE}) {
    EXPECT_EQ(choose("bucketed", ShardMode::Zero1, true, 2, e), e);
    EXPECT_EQ(choose("naive", ShardMode::None, false, 8, e), e);
  }
}

}  // namespace
}  // namespace pt
