#pragma once
// Process runtime under mpirun/srun (or alone): MPI start-up, rank, world size, the local
// rank from a shared-memory split (right under both launchers and across nodes), abort.
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
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool is_root() const { return rank_ == 0; }
  const std::string& hostname() const { return hostname_; }

  // Ends the whole job from any rank, naming the rank and what failed.
  [[noreturn]] void abort(const std::string& what, int code = 1) const;
  void finalize();  // MPI_Finalize (called by main at exit)

 private:
  Runtime() = default;
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string hostname_;
  bool finalized_ = false;
};

}  // namespace pt::parallel
