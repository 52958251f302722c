// Bucket plans, the strategy factory's refusals and ZeRO-1's layout on the shared ParamStore
// (grad_sync_fixture.h): no communication.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "parallel/grad_sync.h"
#include "parallel/strategies.h"
#include "parallel/zero1.h"

#include "parallel/grad_sync_fixture.h"

namespace pt::test {
namespace {

using namespace grad_sync_fixture;

// ---- bucket plans (no communication) ---------------------------------------------------

std::vector<std::vector<std::string>> bucket_names(const ParamStore& store, double mb) {
  std::vector<std::vector<std::string>> out;
  int64_t expect_end = store.grad_numel();
  for (const auto& b : parallel::plan_buckets(store, mb)) {
    std::vector<std::string> names;
    for (int i : b.params) names.push_back(store[i].name);
    out.push_back(names);
    EXPECT_EQ(b.grad_end, expect_end) << "buckets tile the gradient buffer from its end";
    const Parameter& last = store[b.params.back()];
    EXPECT_EQ(b.grad_begin, last.grad_offset);
    expect_end = b.grad_begin;
  }
  EXPECT_EQ(expect_end, 0);
  return out;
}

TEST(BucketPlan, ZeroMeansOneBucketPerParameter) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  using V = std::vector<std::vector<std::string>>;
  EXPECT_EQ(bucket_names(*store, 0), (V{{"head"}, {"unused"}, {"block.b"}, {"block.w"}, {"tied"}, {"embed"}}));
}

TEST(BucketPlan, CapGroupsNeighboursAndIsolatesLargeParameters) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  using V = std::vector<std::vector<std::string>>;
  // 0.0003 MiB = 314 bytes = 78 floats: head (77) fills one; block.w (1000) is alone.
  EXPECT_EQ(bucket_names(*store, 0.0003), (V{{"head"}, {"unused", "block.b"}, {"block.w"}, {"tied", "embed"}}));
  EXPECT_EQ(bucket_names(*store, 100), (V{{"head", "unused", "block.b", "block.w", "tied", "embed"}}));
  EXPECT_EQ(bucket_names(*store, parallel::kDefaultBucketMB).size(), 1u);
  EXPECT_THROW(parallel::plan_buckets(*store, -1), Error);
}

TEST(GradSyncFactory, RejectsUnknownNamesAndMissingCommunicator) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  EXPECT_THROW(parallel::make_grad_sync(parallel::strategy("ring"), ctx, *store, nullptr), Error);
  EXPECT_THROW(parallel::make_grad_sync(parallel::strategy("flat"), ctx, *store, nullptr), Error);
  EXPECT_STREQ(parallel::make_grad_sync(parallel::strategy("none"), ctx, *store, nullptr)->name(), "none");
}

// What every ZeRO-1 layout must be: buckets tiling [0, tail_begin) in multiples of the world
// size, a tail shorter than the world size, every element owned by exactly one rank (chunk r of
// its bucket, the tail by the last rank), and each bucket listing exactly the parameters with
// elements in it.
void expect_valid_layout(const parallel::Zero1Layout& L, const ParamStore& store) {
  int64_t at = 0;
  for (const auto& b : L.buckets) {
    EXPECT_EQ(b.grad_begin, at);
    EXPECT_GT(b.grad_end, b.grad_begin);
    EXPECT_EQ((b.grad_end - b.grad_begin) % L.world, 0);
    std::vector<int> want;
    for (const auto& p : store.params())
      if (p->trainable && p->grad_offset < b.grad_end && p->grad_offset + p->numel > b.grad_begin)
        want.push_back(p->index);
    EXPECT_EQ(b.params, want) << "bucket [" << b.grad_begin << ", " << b.grad_end << ")";
    at = b.grad_end;
  }
  EXPECT_EQ(L.tail_begin, at);
  EXPECT_LT(L.numel - L.tail_begin, L.world);
  EXPECT_EQ(L.numel, store.grad_numel());
  std::vector<int> owner(L.numel, -1);
  int64_t total = 0;
  for (int r = 0; r < L.world; ++r) {
    for (const auto& [lo, hi] : L.owned(r))
      for (int64_t i = lo; i < hi; ++i) {
        EXPECT_EQ(owner[i], -1) << "element " << i << " owned twice";
        owner[i] = r;
      }
    total += L.owned_numel(r);
  }
  EXPECT_EQ(total, L.numel);
  for (size_t b = 0; b < L.buckets.size(); ++b)
    for (int r = 0; r < L.world; ++r) EXPECT_EQ(owner[L.chunk_begin(b, r)], r);
}

// Gradient element ranges of make_store: embed [0,32) tied [32,50) block.w [50,1050)
// block.b [1050,1075) unused [1075,1078) head [1078,1155).
TEST(Zero1Layout, OneBucketIsTheContiguousPartitionWithATailOnTheLastRank) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  using R = std::vector<std::pair<int64_t, int64_t>>;
  const parallel::Zero1Layout two(*store, 2, parallel::Zero1Layout::kOneBucket);
  expect_valid_layout(two, *store);
  ASSERT_EQ(two.buckets.size(), 1u);
  EXPECT_EQ(two.chunk(0), 577);
  EXPECT_EQ(two.tail_begin, 1154);
  EXPECT_EQ(two.owned(0), (R{{0, 577}}));
  EXPECT_EQ(two.owned(1), (R{{577, 1155}}));
  const parallel::Zero1Layout tiny(*store, 2000, parallel::Zero1Layout::kOneBucket);  // fewer elements than ranks
  expect_valid_layout(tiny, *store);
  EXPECT_TRUE(tiny.buckets.empty());
  EXPECT_EQ(tiny.owned(1999), (R{{0, 1155}}));
  EXPECT_TRUE(tiny.owned(0).empty());
}

// Per-parameter buckets (bucket_mb 0), each end moved up to a multiple of the world size: a bucket
// takes the first elements of the parameter above it (finished earlier in backward), never the
// last of the one below.
TEST(Zero1Layout, BucketEndsMoveUpToMultiplesOfTheWorldSize) {
  Context ctx(Device::cpu());
  auto store = make_store(ctx);
  const parallel::Zero1Layout L(*store, 2, 0.0);
  expect_valid_layout(L, *store);
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const auto& b : L.buckets) got.emplace_back(b.grad_begin, b.grad_end);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{
                     {0, 32}, {32, 50}, {50, 1050}, {1050, 1076}, {1076, 1078}, {1078, 1154}}));
  EXPECT_EQ(L.tail_begin, 1154);
  EXPECT_EQ(L.owned(1), (std::vector<std::pair<int64_t, int64_t>>{
                            {16, 32}, {41, 50}, {550, 1050}, {1063, 1076}, {1077, 1078}, {1116, 1155}}));
  for (int world : {1, 3, 4, 7, 64})
    for (double mb : {0.0, 0.0003, 0.004, 100.0, parallel::Zero1Layout::kOneBucket}) {
      SCOPED_TRACE("world " + std::to_string(world) + ", bucket_mb " + std::to_string(mb));
      expect_valid_layout(parallel::Zero1Layout(*store, world, mb), *store);
    }
}

}  // namespace
}  // namespace pt::test
