// bench ddp's /ddp table: a synchronised job runs at its slowest GPU's pace, so a strategy's
// overhead is measured against the floor's slowest rank, not the mean over ranks (two GPUs that
// differ in speed by 2 % would otherwise charge that 2 % to every strategy).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "bench/ddp_tables.h"
#include "parallel/strategies.h"

namespace pt::test {
namespace {

bench::DdpResult result(const char* strategy, double mean_ms, double max_rank_ms, double spread_pct) {
  bench::DdpResult r;
  r.cfg.ddp = &parallel::strategy(strategy);
  r.cfg.bucket_mb = std::nan("");
  r.cfg.shard = ShardMode::None;
  r.sync_name = strategy;
  r.step_ms = mean_ms;
  r.step_ms_max_rank = max_rank_ms;
  r.rank_spread_pct = spread_pct;
  return r;
}

double cell(const io::ResultTable& t, size_t row, const std::string& column) {
  const int c = t.column_index(column);
  EXPECT_GE(c, 0) << column;
  return std::get<double>(t.at(row, static_cast<size_t>(c)));
}

TEST(BenchDdpTables, OverheadAndThroughputAreAgainstTheFloorsSlowestRank) {
  // The floor: one rank at 98 ms, the other at 102 (mean 100); the synchronised strategy: 104 on both.
  const std::vector<bench::DdpResult> results = {result("none", 100.0, 102.0, 4.08), result("flat", 104.0, 104.0, 0.0)};
  bench::DdpRun run;
  run.ranks = 2;
  run.precision = "bf16";
  run.tokens_per_step = 1000.0;
  const bench::DdpTables t = bench::ddp_tables(results, run);
  EXPECT_DOUBLE_EQ(cell(t.ddp, 0, "overhead_pct"), 0.0);
  EXPECT_NEAR(cell(t.ddp, 1, "overhead_pct"), (104.0 / 102.0 - 1.0) * 100.0, 1e-12);
  EXPECT_NEAR(cell(t.ddp, 0, "tokens_per_s"), 1000.0 / 0.102, 1e-9);
  EXPECT_DOUBLE_EQ(cell(t.ddp, 0, "rank_spread_pct"), 4.08);
}

}  // namespace
}  // namespace pt::test
