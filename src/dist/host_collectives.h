#pragma once
// Small host-side collectives over MPI_COMM_WORLD for benchmark bookkeeping (gathering every
// rank's timings and counts), bounded by comm_timeout_s() like every other wait.
#include <cstdint>
#include <vector>

namespace pt::dist {

// Every rank's value, in rank order, on every rank.
std::vector<double> all_gather_values(double v);
// Sum over ranks, on every rank.
int64_t sum_over_ranks(int64_t v);

// Mean and maximum of per-rank values.
struct RankSpread {
  double mean = 0, max = 0;
};
RankSpread spread_over_ranks(double v);

}  // namespace pt::dist
