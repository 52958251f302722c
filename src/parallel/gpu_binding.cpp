#include "parallel/gpu_binding.h"

#include <map>

#include "core/error.h"

namespace pt::parallel {

GpuBinding choose_gpu(int visible_gpus, int local_rank, int local_size) {
  PT_CHECK(visible_gpus > 0, "no CUDA device is visible to this rank");
  PT_CHECK(local_rank >= 0 && local_rank < local_size,
           "local rank " + std::to_string(local_rank) + " outside 0.." + std::to_string(local_size - 1));
  if (visible_gpus == 1) return {0, "the only visible GPU"};
  if (visible_gpus >= local_size)
    return {local_rank, "local rank " + std::to_string(local_rank) + " of " + std::to_string(local_size)};
  PT_FAIL("local rank " + std::to_string(local_rank) + " of " + std::to_string(local_size) + " on this node sees " +
          std::to_string(visible_gpus) + " GPUs: with several GPUs visible, each rank needs its own (at least " +
          std::to_string(local_size) +
          " visible), or bind one GPU to each task (srun --gpus-per-task=1, or "
          "CUDA_VISIBLE_DEVICES set per rank)");
}

void check_distinct_gpus(const std::vector<std::string>& hosts, const std::vector<std::string>& bus_ids,
                         bool allow_sharing) {
  PT_CHECK(hosts.size() == bus_ids.size(), "check_distinct_gpus: one host and one bus id per rank");
  if (allow_sharing) return;
  std::map<std::pair<std::string, std::string>, size_t> first;
  for (size_t r = 0; r < hosts.size(); ++r) {
    const auto [it, inserted] = first.emplace(std::make_pair(hosts[r], bus_ids[r]), r);
    PT_CHECK(inserted,
             "ranks " + std::to_string(it->second) + " and " + std::to_string(r) + " both drive GPU " + bus_ids[r] +
                 " on " + hosts[r] +
                 ": give each rank its own GPU (one rank per GPU), or pass --allow-gpu-sharing (only for ranks that "
                 "do not talk through NCCL, which refuses two ranks of one communicator on one GPU)");
  }
}

}  // namespace pt::parallel
