// Which GPU each rank drives, for the launchers and bindings users have (simulated: the count
// of visible GPUs and the node's local ranks), and the refusal of two ranks on one GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "parallel/gpu_binding.h"

namespace pt::test {
namespace {

using parallel::check_distinct_gpus;
using parallel::choose_gpu;

TEST(GpuBinding, EveryLauncherAndBinding) {
  // srun --gpus-per-task=1 (or --gpu-bind=single:1, map_gpu with one GPU per task, a wrapper
  // setting CUDA_VISIBLE_DEVICES from the local rank): each task sees only its GPU.
  for (int r = 0; r < 8; ++r) EXPECT_EQ(choose_gpu(1, r, 8).index, 0) << r;
  EXPECT_EQ(choose_gpu(1, 3, 8).rule, "the only visible GPU");
  // --gpus-per-node=N --ntasks-per-node=N, or mpirun without CUDA_VISIBLE_DEVICES: all visible.
  for (int r = 0; r < 8; ++r) EXPECT_EQ(choose_gpu(8, r, 8).index, r) << r;
  EXPECT_EQ(choose_gpu(8, 5, 8).rule, "local rank 5 of 8");
  // A node with more GPUs than local ranks (2 ranks on an 8-GPU node): the first ones.
  EXPECT_EQ(choose_gpu(8, 1, 2).index, 1);
  // One rank alone on a multi-GPU node.
  EXPECT_EQ(choose_gpu(4, 0, 1).index, 0);
  // --gpu-bind=closest on a 2-socket node: each task sees the 4 GPUs of its socket, 8 tasks.
  const std::string msg = error_of([] { choose_gpu(4, 6, 8); });
  for (const char* word : {"local rank 6 of 8", "sees 4 GPUs", "--gpus-per-task=1", "CUDA_VISIBLE_DEVICES"})
    EXPECT_NE(msg.find(word), std::string::npos) << word << " in: " << msg;
  EXPECT_THROW(choose_gpu(0, 0, 1), Error);
}

TEST(GpuBinding, TwoRanksOnOneGpuAreRefusedUnlessAllowed) {
  // Per-task binding done wrong (every rank sees GPU 0 and picks it): ranks 0 and 1 collide.
  const std::vector<std::string> hosts = {"n1", "n1", "n2", "n2"};
  const std::vector<std::string> same = {"0000:19:00.0", "0000:19:00.0", "0000:19:00.0", "0000:3B:00.0"};
  const std::string msg = error_of([&] { check_distinct_gpus(hosts, same, false); });
  for (const char* word : {"ranks 0 and 1", "0000:19:00.0", "n1", "--allow-gpu-sharing"})
    EXPECT_NE(msg.find(word), std::string::npos) << word << " in: " << msg;
  EXPECT_NO_THROW(check_distinct_gpus(hosts, same, true));
  // The same bus id on two hosts is two GPUs.
  EXPECT_NO_THROW(check_distinct_gpus({"n1", "n2"}, {"0000:19:00.0", "0000:19:00.0"}, false));
  EXPECT_NO_THROW(check_distinct_gpus(hosts, {"a", "b", "a", "b"}, false));
}

}  // namespace
}  // namespace pt::test
