#pragma once
// Which GPU a rank drives, under every launcher and GPU binding users have: srun
// --gpus-per-task=1 (each task sees only its own GPU), --gpus-per-node=N with N tasks per node
// (each sees all N), --gpu-bind=closest or map_gpu (each sees the ones bound to it), mpirun with
// or without CUDA_VISIBLE_DEVICES, a node with more GPUs than ranks.
#include <string>
#include <vector>

namespace pt::parallel {

// The rule, from what a rank sees:
//   exactly one visible GPU             → that one (per-task binding);
//   at least as many as the local ranks → the local rank's (one per rank; extra GPUs idle);
//   otherwise (2 ≤ visible < ranks)     → an error naming the counts and the two ways out.
struct GpuBinding {
  int index = 0;     // CUDA ordinal among the visible devices
  std::string rule;  // "the only visible GPU", "local rank 1 of 2"
};
GpuBinding choose_gpu(int visible_gpus, int local_rank, int local_size);

// After every rank has chosen: each rank's PCI bus id (in rank order) and host. Two ranks of one
// host on one GPU is refused (naming both ranks and the GPU) unless `allow_sharing`.
void check_distinct_gpus(const std::vector<std::string>& hosts, const std::vector<std::string>& bus_ids,
                         bool allow_sharing);

}  // namespace pt::parallel
