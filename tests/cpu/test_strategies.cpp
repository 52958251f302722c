// The table of data-parallel strategies: every name, error text, bucket policy and ZeRO-1 layout
// comes from it, in one order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "parallel/strategies.h"
#include "parallel/zero1.h"

namespace pt::test {
namespace {

using parallel::BucketPolicy;

TEST(Strategies, OneTableNamesEverything) {
  const std::vector<std::string> names = {"none", "naive", "flat", "overlap", "bucketed"};
  EXPECT_EQ(parallel::grad_sync_names(), names);
  EXPECT_EQ(parallel::strategy_names_text(), "none, naive, flat, overlap or bucketed");
  const std::string msg = error_of([] { parallel::strategy("ring"); });
  EXPECT_NE(msg.find("'ring'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("none, naive, flat, overlap or bucketed"), std::string::npos) << msg;
  const std::vector<std::string> order = {
      "none", "naive", "flat", "overlap", "bucketed", "reduce_scatter", "bucketed_reduce_scatter"};
  EXPECT_EQ(parallel::strategy_report_order(), order);
}

TEST(Strategies, PoliciesAndZero1Layouts) {
  struct Want {
    const char* name;
    bool overlapped;
    BucketPolicy buckets;
    double zero1_mb;  // for --bucket-mb 7
  };
  const double one = parallel::Zero1Layout::kOneBucket;
  for (const Want& w :
       {Want{"none", false, BucketPolicy::None, one}, Want{"naive", false, BucketPolicy::PerParameter, one},
        Want{"flat", false, BucketPolicy::One, one}, Want{"overlap", true, BucketPolicy::PerParameter, 0.0},
        Want{"bucketed", true, BucketPolicy::Capped, 7.0}}) {
    const parallel::StrategySpec& s = parallel::strategy(w.name);
    EXPECT_EQ(s.overlapped, w.overlapped) << w.name;
    EXPECT_EQ(s.buckets, w.buckets) << w.name;
    EXPECT_EQ(s.zero1_bucket_mb(7.0), w.zero1_mb) << w.name;
    EXPECT_EQ(s.make == nullptr, w.buckets == BucketPolicy::None) << w.name;
    EXPECT_STRNE(s.help, "") << w.name;
  }
}

}  // namespace
}  // namespace pt::test
