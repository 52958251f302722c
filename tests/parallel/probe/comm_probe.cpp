// A two-rank program that fails on purpose, for the failure tests in tests/parallel.cmake:
//   hang <backend>:  rank 1 never joins the all-reduce; rank 0 must time out and end the job.
//   throw <backend>: rank 1 throws while rank 0 waits in the all-reduce; the job must end.
//   ok <backend>:    both join (the control case: exit 0).
// <backend> is mpi, nccl or ce (the NCCL backend with --comm-engine ce, on a registered buffer).
// Errors take the same path as paratrain's main: caught, then Runtime::abort with several ranks.
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "core/context.h"
#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/runtime.h"

using namespace pt;

int main(int argc, char** argv) {
  auto& rt = parallel::Runtime::init(&argc, &argv);
  try {
    PT_CHECK(argc == 3, "usage: comm_probe hang|throw|ok mpi|nccl|ce");
    const std::string mode = argv[1];
    const bool ce = std::string(argv[2]) == "ce";
    const parallel::Backend backend = ce ? parallel::Backend::NCCL : parallel::backend_from_name(argv[2]);
    if (backend == parallel::Backend::NCCL && cuda_device_count() < rt.local_size()) {
      if (rt.is_root()) std::cout << "probe: SKIP (needs one GPU per rank)" << std::endl;
      rt.finalize();
      return 77;
    }
    Context ctx(backend == parallel::Backend::NCCL ? Device::cuda(rt.local_rank()) : Device::cpu());
    auto comm =
        parallel::make_communicator(backend, ctx, 0, ce ? parallel::CommEngine::CE : parallel::CommEngine::NCCL);
    Tensor t = Tensor::zeros({1 << 16}, DType::F32, ctx, "probe");
    const parallel::RegistrationPtr registered = comm->register_buffer(t);
    // Both ranks first complete one all-reduce, so NCCL's lazy connection set-up is done and
    // the failure below happens where training would meet it: in a later collective.
    comm->all_reduce_async(t, parallel::ReduceOp::Sum)->synchronize();
    const bool misbehave = rt.rank() == 1 && mode != "ok";
    if (misbehave && mode == "throw") PT_FAIL("injected failure on rank 1");
    if (misbehave && mode == "hang") {
      std::this_thread::sleep_for(std::chrono::seconds(600));  // the abort ends this process
      return 0;
    }
    auto work = comm->all_reduce_async(t, parallel::ReduceOp::Sum);
    work->synchronize();
    comm->barrier();
    if (rt.is_root()) std::cout << "probe: all-reduce completed" << std::endl;
  } catch (const std::exception& e) {
    if (rt.world_size() > 1) rt.abort(std::string("error: ") + e.what());
    std::cerr << "probe: error: " << e.what() << std::endl;
    return 1;
  }
  rt.finalize();
  return 0;
}
