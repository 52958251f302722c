#pragma once
// Host-side collectives over MPI_COMM_WORLD, bounded by comm_timeout_s() like every other wait:
// benchmark bookkeeping (every rank's timings and counts), start-up checks (options, GPUs), and
// assembling a sharded optimizer's state on rank 0 for a checkpoint.
#include <cstdint>
#include <string>
#include <vector>

namespace pt::parallel {

// Every rank's value, in rank order, on every rank.
std::vector<double> all_gather_values(double v);
// Sum over ranks, on every rank.
int64_t sum_over_ranks(int64_t v);
// Element-wise sums over ranks, on every rank (one all-reduce).
std::vector<double> sum_over_ranks(const std::vector<double>& v);

// Mean, maximum and minimum of per-rank values.
struct RankSpread {
  double mean = 0, max = 0, min = 0;
};
RankSpread spread_over_ranks(double v);

// Every rank's string (any length), in rank order, on every rank; just `mine` when
// MPI is not running (before init, after finalize).
std::vector<std::string> all_gather_strings(const std::string& mine);

// With several ranks (collective): the job ends at once, on every rank, when a rank's `value`
// differs from rank 0's; `what` names it in the error, e.g. "the token file 'data.npy'".
void check_same_on_every_rank(const std::string& value, const std::string& what);

// Every rank's list on rank 0, in rank order (lengths may differ between ranks); the other
// ranks get an empty result. Strings must not contain NUL bytes.
std::vector<std::vector<double>> gather_to_root(const std::vector<double>& mine);
std::vector<std::vector<std::string>> gather_to_root(const std::vector<std::string>& mine);

// A run of bytes a rank holds and where it belongs in a buffer rank 0 assembles.
struct BytePiece {
  int64_t offset = 0;          // in the whole buffer, bytes
  const void* data = nullptr;  // this rank's copy
  int64_t bytes = 0;
};
// Rank 0 receives every rank's pieces into `whole` (which it sized; the other ranks pass an
// empty one): point-to-point messages of at most max_message bytes (MPI counts are int), any
// total size, the wait bounded by comm_timeout_s(). The pieces of all ranks must not overlap;
// parts of `whole` no piece covers keep their values. Without MPI (or with one rank) rank 0's
// own pieces are copied.
void gather_pieces_to_root(std::vector<char>& whole, const std::vector<BytePiece>& mine,
                           int64_t max_message = int64_t(1) << 30);

}  // namespace pt::parallel
