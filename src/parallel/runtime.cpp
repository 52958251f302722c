#include "parallel/runtime.h"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "core/env.h"
#include "core/error.h"

namespace pt::parallel {

namespace {
std::unique_ptr<Runtime> g_runtime;

// PARATRAIN_TEST_SPLIT_NODES (runtime.h): 1 when unset.
int test_split_nodes() { return static_cast<int>(env::integer("PARATRAIN_TEST_SPLIT_NODES", 1, 1024).value_or(1)); }
}  // namespace

Runtime& Runtime::init(int* argc, char*** argv) {
  if (g_runtime) return *g_runtime;
  int already = 0;
  PT_MPI_CHECK(MPI_Initialized(&already));
  if (!already) {
    // Open MPI's non-blocking all-reduce (libnbc) picks by default an algorithm that takes about
    // twice as long as the blocking one for large host buffers; the ring matches it. The CPU
    // backend's collectives are all non-blocking, so choose the ring unless the user set one.
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
    int provided = 0;
    PT_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  }
  // Errors come back as return codes so PT_MPI_CHECK can name file and line.
  PT_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  g_runtime.reset(new Runtime());
  Runtime& r = *g_runtime;
  PT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r.rank_));
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &r.world_));
  MPI_Comm node;
  PT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r.rank_, MPI_INFO_NULL, &node));
  PT_MPI_CHECK(MPI_Comm_rank(node, &r.local_rank_));
  PT_MPI_CHECK(MPI_Comm_size(node, &r.local_size_));
  // Hosts are numbered by their leaders (local rank 0) in rank order.
  int leader = r.local_rank_ == 0 ? 1 : 0, hosts_before = 0, hosts = 0;
  PT_MPI_CHECK(MPI_Exscan(&leader, &hosts_before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (r.rank_ == 0) hosts_before = 0;  // MPI_Exscan leaves rank 0's result undefined
  PT_MPI_CHECK(MPI_Bcast(&hosts_before, 1, MPI_INT, 0, node));
  PT_MPI_CHECK(MPI_Allreduce(&leader, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  PT_MPI_CHECK(MPI_Comm_free(&node));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  r.hostname_ = host;
  const int split = test_split_nodes();
  PT_CHECK(r.local_size_ % split == 0, "PARATRAIN_TEST_SPLIT_NODES=" + std::to_string(split) + " does not divide the " +
                                           std::to_string(r.local_size_) + " ranks of host " + r.hostname_);
  const int part = r.local_rank_ / (r.local_size_ / split);
  r.node_index_ = hosts_before * split + part;
  r.node_count_ = hosts * split;
  r.node_size_ = r.local_size_ / split;
  r.emulated_nodes_ = split > 1;
  if (r.emulated_nodes_) {
    // Read by NCCL once, at its first communicator: before any exists.
    setenv("NCCL_HOSTID", (r.hostname_ + "-test-node-" + std::to_string(part)).c_str(), 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  }
  return r;
}

Runtime& Runtime::get() {
  PT_CHECK(g_runtime != nullptr, "parallel::Runtime used before Runtime::init");
  return *g_runtime;
}

bool Runtime::initialized() { return g_runtime != nullptr; }

void Runtime::abort(const std::string& what, int code) const {
  // Most errors (a bad option, a missing file) happen on every rank at once: rank 0 reports
  // and ends the job, and the others, holding back a moment, are ended before they print the
  // same line again. An error of this rank alone is still reported, a moment later. The line
  // goes out in one write(2), so lines of several ranks never interleave.
  if (rank_ != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string line =
      "paratrain: rank " + std::to_string(rank_) + " of " + std::to_string(world_) + ": " + what + "\n";
  if (::write(2, line.data(), line.size()) < 0) std::perror("paratrain: stderr");
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void Runtime::finalize() {
  if (finalized_) return;
  finalized_ = true;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

}  // namespace pt::parallel
