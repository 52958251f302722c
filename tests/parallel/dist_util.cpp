#include "parallel/dist_util.h"

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <utility>

#include "common/test_util.h"
#include "core/error.h"
#include "parallel/gpu_binding.h"
#include "parallel/host_collectives.h"

namespace pt::test {

namespace {
std::unique_ptr<Context> g_ctx[2];
std::map<std::pair<int, int>, std::unique_ptr<parallel::Communicator>> g_comm;  // (slot, comm_sms)
int slot(parallel::Backend b) { return b == parallel::Backend::NCCL ? 1 : 0; }
}  // namespace

// Each rank's GPU by the program's own rule (parallel::choose_gpu): the only one it sees under
// per-task binding (CUDA_VISIBLE_DEVICES set per rank), else its local rank's; -1 when neither.
int rank_gpu() {
  const auto& rt = parallel::Runtime::get();
  const int n = cuda_device_count();
  if (n == 1 || (n > 0 && n >= rt.local_size())) return parallel::choose_gpu(n, rt.local_rank(), rt.local_size()).index;
  return -1;
}

// Collective: at least two ranks, each with a GPU, no two ranks of a host on one GPU (NCCL
// refuses that: a one-GPU machine running the suite on two ranks skips the NCCL tests).
bool nccl_usable_on_every_rank() {
  const auto& rt = parallel::Runtime::get();
  const int gpu = rank_gpu();
  std::string mine = "none:" + std::to_string(rt.rank());
  if (gpu >= 0) {
    char bus[64] = {0};
    PT_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, gpu));
    mine = rt.hostname() + "/" + bus;
  }
  auto gpus = parallel::all_gather_strings(mine);
  std::sort(gpus.begin(), gpus.end());
  const bool distinct = std::adjacent_find(gpus.begin(), gpus.end()) == gpus.end();
  int ok = rt.world_size() >= 2 && gpu >= 0 && distinct ? 1 : 0;
  int all = 0;
  PT_MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return all == 1;
}

bool nccl_usable() {
  // Asked first by every rank in the same test (a fixture's SetUp), so the collective matches.
  static const bool usable = nccl_usable_on_every_rank();
  return usable;
}

Context& backend_context(parallel::Backend b) {
  auto& c = g_ctx[slot(b)];
  if (!c) {
    const Device d = b == parallel::Backend::NCCL ? Device::cuda(rank_gpu()) : Device::cpu();
    c = std::make_unique<Context>(d, Precision::FP32);
  }
  return *c;
}

parallel::CommEngine test_comm_engine() {
  const char* env = std::getenv("PARATRAIN_TEST_COMM_ENGINE");
  return env == nullptr || *env == '\0' ? parallel::CommEngine::NCCL : parallel::comm_engine_from_name(env);
}

parallel::Communicator& backend_comm(parallel::Backend b, int comm_sms) {
  auto& c = g_comm[{slot(b), comm_sms}];
  if (!c) {
    const auto engine = b == parallel::Backend::NCCL ? test_comm_engine() : parallel::CommEngine::NCCL;
    c = parallel::make_communicator(b, backend_context(b), comm_sms, engine);
  }
  return *c;
}

parallel::Communicator& engine_comm(parallel::CommEngine engine) {
  auto& c = g_comm[{2 + static_cast<int>(engine), 0}];
  if (!c) c = parallel::make_communicator(parallel::Backend::NCCL, backend_context(parallel::Backend::NCCL), 0, engine);
  return *c;
}

void release_backends() {
  g_comm.clear();
  for (auto& c : g_ctx) c.reset();
}

std::string backend_param_name(const ::testing::TestParamInfo<parallel::Backend>& info) {
  return parallel::backend_name(info.param);
}

std::vector<double> mpi_bcast_from_root(std::vector<double> v) {
  int n = static_cast<int>(v.size());
  PT_MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD));
  v.resize(static_cast<size_t>(n));
  PT_MPI_CHECK(MPI_Bcast(v.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return v;
}

bool mpi_all_true(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  PT_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return all == 1;
}

std::vector<double> mpi_all_gather(double v) {
  std::vector<double> all(static_cast<size_t>(parallel::Runtime::get().world_size()));
  PT_MPI_CHECK(MPI_Allgather(&v, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD));
  return all;
}

Tensor device_f32(Context& ctx, const std::vector<double>& values) {
  return make_tensor(ctx, {static_cast<int64_t>(values.size())}, DType::F32, values);
}

std::vector<double> host_f64(Context& ctx, const Tensor& t) { return t.to_host_f64(ctx); }

}  // namespace pt::test
