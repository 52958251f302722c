#pragma once
// Small host-side collectives over MPI_COMM_WORLD for benchmark bookkeeping (gathering every
// rank's timings and counts), bounded by comm_timeout_s() like every other wait.
#include <cstdint>
#include <string>
#include <vector>

namespace pt::parallel {

// Every rank's value, in rank order, on every rank.
std::vector<double> all_gather_values(double v);
// Sum over ranks, on every rank.
int64_t sum_over_ranks(int64_t v);

// Mean and maximum of per-rank values.
struct RankSpread {
  double mean = 0, max = 0;
};
RankSpread spread_over_ranks(double v);

// Every rank's string (any length), in rank order, on every rank; just `mine` when
// MPI is not running (before init, after finalize).
std::vector<std::string> all_gather_strings(const std::string& mine);

// Every rank's list on rank 0, in rank order (lengths may differ between ranks); the other
// ranks get an empty result. Strings must not contain NUL bytes.
std::vector<std::vector<double>> gather_to_root(const std::vector<double>& mine);
std::vector<std::vector<std::string>> gather_to_root(const std::vector<std::string>& mine);

}  // namespace pt::parallel
