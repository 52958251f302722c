#include "dist/host_collectives.h"

#include <mpi.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "dist/bounded_wait.h"
#include "dist/communicator.h"

namespace pt::dist {

namespace {
void wait(MPI_Request* req, const char* op) {
  bounded_wait(
      [&] {
        int flag = 0;
        PT_MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
        return flag != 0;
      },
      [&](double s) { comm_fatal(op, "not complete after " + std::to_string(static_cast<int>(s)) + " s"); });
}
}  // namespace

std::vector<double> all_gather_values(double v) {
  int world = 1;
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  std::vector<double> all(static_cast<size_t>(world));
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallgather(&v, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD, &req));
  wait(&req, "host all-gather of benchmark values");
  return all;
}

int64_t sum_over_ranks(int64_t v) {
  int64_t sum = 0;
  MPI_Request req;
  PT_MPI_CHECK(MPI_Iallreduce(&v, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &req));
  wait(&req, "host sum of benchmark counts");
  return sum;
}

RankSpread spread_over_ranks(double v) {
  const auto all = all_gather_values(v);
  RankSpread s;
  s.mean = std::accumulate(all.begin(), all.end(), 0.0) / static_cast<double>(all.size());
  s.max = *std::max_element(all.begin(), all.end());
  return s;
}

}  // namespace pt::dist
