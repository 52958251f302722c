#pragma once
// Process runtime under mpirun/srun (or alone): MPI start-up, rank, world size, the local
// rank from a shared-memory split (right under both launchers and across nodes), abort.
//
// Test mode: PARATRAIN_TEST_SPLIT_NODES=N makes each host look like N nodes (its ranks cut into
// N contiguous parts of equal size) so multi-node code paths run on one host: each part gets its
// own NCCL host identity (NCCL_HOSTID), so NCCL moves data between parts over its network
// transport (sockets on loopback unless NCCL_SOCKET_IFNAME says otherwise), never shared memory
// or peer-to-peer. GPUs are still chosen by local_rank().
#include <string>

namespace pt::parallel {

class Runtime {
 public:
  // Initialises MPI once per process (MPI_THREAD_FUNNELED). Safe without a launcher.
  static Runtime& init(int* argc, char*** argv);
  static Runtime& get();  // after init
  static bool initialized();

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  // This rank's place among the processes of its host (shared memory): it picks the GPU.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // The node as the transports see it: the host, or under the test mode below a contiguous
  // part of it. Copy-engine collectives need every rank on one node; NCCL carries traffic
  // between nodes over its network transport.
  int node_index() const { return node_index_; }
  int node_count() const { return node_count_; }
  int node_size() const { return node_size_; }  // ranks on this rank's node
  bool emulated_nodes() const { return emulated_nodes_; }
  bool is_root() const { return rank_ == 0; }
  const std::string& hostname() const { return hostname_; }

  // Ends the whole job from any rank, naming the rank and what failed.
  [[noreturn]] void abort(const std::string& what, int code = 1) const;
  void finalize();  // MPI_Finalize (called by main at exit)

 private:
  Runtime() = default;
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_size_ = 1;
  int node_index_ = 0, node_count_ = 1, node_size_ = 1;
  bool emulated_nodes_ = false;
  std::string hostname_;
  bool finalized_ = false;
};

}  // namespace pt::parallel
