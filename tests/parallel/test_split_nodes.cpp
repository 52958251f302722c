// The test mode that makes one host look like several nodes (PARATRAIN_TEST_SPLIT_NODES, ctest
// dist_split_nodes_np4): what each rank sees of its node, what NCCL is told, that the copy
// engines refuse to span nodes, and what a run record says.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/dist_util.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"

namespace pt::test {
namespace {

int split_from_env() {
  const char* env = std::getenv("PARATRAIN_TEST_SPLIT_NODES");
  return env == nullptr ? 0 : std::atoi(env);
}

TEST(SplitNodes, EachPartOfTheHostIsANode) {
  const int split = split_from_env();
  if (split < 2) GTEST_SKIP() << "runs under PARATRAIN_TEST_SPLIT_NODES >= 2 (ctest dist_split_nodes_np4)";
  const auto& rt = parallel::Runtime::get();
  ASSERT_EQ(rt.local_size(), rt.world_size()) << "the suite runs on one host";
  EXPECT_TRUE(rt.emulated_nodes());
  EXPECT_EQ(rt.node_count(), split);
  EXPECT_EQ(rt.node_size(), rt.world_size() / split);
  EXPECT_EQ(rt.node_index(), rt.local_rank() / rt.node_size()) << "nodes are contiguous parts";
  // NCCL tells hosts apart by this identity; each part must have its own.
  const char* id = std::getenv("NCCL_HOSTID");
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(std::string(id), rt.hostname() + "-test-node-" + std::to_string(rt.node_index()));
  const auto ids = parallel::all_gather_strings(id);
  for (int r = 0; r < rt.world_size(); ++r)
    EXPECT_EQ(ids[r] == ids[rt.rank()], r / rt.node_size() == rt.node_index()) << "rank " << r;
}

TEST(SplitNodes, CopyEnginesRefuseToSpanNodesAndAutoFallsBack) {
  if (split_from_env() < 2) GTEST_SKIP() << "runs under PARATRAIN_TEST_SPLIT_NODES >= 2";
  PT_REQUIRE_BACKEND(parallel::Backend::NCCL);
  Context& ctx = backend_context(parallel::Backend::NCCL);
  try {
    auto ce = parallel::make_communicator(parallel::Backend::NCCL, ctx, 0, parallel::CommEngine::CE);
    ADD_FAILURE() << "--comm-engine ce accepted ranks on two nodes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nodes"), std::string::npos) << e.what();
  }
  auto fallback = parallel::make_communicator(parallel::Backend::NCCL, ctx, 0, parallel::CommEngine::Auto);
  EXPECT_STREQ(fallback->engine(), "nccl");
}

TEST(SplitNodes, WithoutTheTestModeAHostIsOneNode) {
  if (split_from_env() >= 2) GTEST_SKIP() << "the test mode is on";
  const auto& rt = parallel::Runtime::get();
  EXPECT_FALSE(rt.emulated_nodes());
  EXPECT_EQ(rt.node_size(), rt.local_size());
  EXPECT_EQ(rt.node_count(), 1) << "the suite runs on one host";
}

}  // namespace
}  // namespace pt::test
