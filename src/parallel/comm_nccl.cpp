// NCCL Communicator: device buffers, one high-priority communication stream ordered against
// the compute stream with events, asynchronous errors polled on every host-side wait.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <vector>

#include "core/error.h"
#include "parallel/bounded_wait.h"
#include "parallel/comm_trace.h"
#include "parallel/communicator.h"
#include "parallel/stream_work.h"

namespace pt::parallel {

namespace {

ncclDataType_t nccl_type(DType t, const char* op) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::F64: return ncclFloat64;
    default: break;
  }
  PT_FAIL(std::string(op) + " on the nccl communicator supports float tensors, got " + dtype_name(t));
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Average ? ncclAvg : ncclSum; }

std::string describe_op(const char* op, const Tensor& t) {
  return std::string("nccl ") + op + " (" + std::to_string(t.numel()) + " " + dtype_name(t.dtype()) + ")";
}

class NcclCommunicator : public Communicator, public StreamWorkOwner {
 public:
  NcclCommunicator(Context& ctx, int comm_sms) : Communicator(ctx.device(), 0, 1), ctx_(ctx) {
    PT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_));
    PT_CUDA_CHECK(cudaSetDevice(ctx.device().index));

    // Bootstrap: rank 0's unique id reaches every rank over MPI (bounded like any wait).
    ncclUniqueId id;
    if (rank_ == 0) PT_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Request req;
    PT_MPI_CHECK(MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD, &req));
    bounded_wait(
        [&] {
          int flag = 0;
          PT_MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
          return flag != 0;
        },
        [&](double s) { comm_fatal("nccl bootstrap (unique id broadcast)", "timed out"); });
    // Blocking init: a rank that dies before joining MPI_Aborts the job, which ends this wait.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (comm_sms > 0) {
      // Every collective on exactly comm_sms CTAs (one SM each), so the SMs the GEMMs leave
      // free during an overlapped backward match what the collectives occupy.
      config.minCTAs = config.maxCTAs = comm_sms;
      reserved_sms_ = comm_sms;
    }
    PT_NCCL_CHECK(ncclCommInitRankConfig(&comm_, world_, id, rank_, &config));

    // Highest priority: when a collective and a backward kernel are both ready, the
    // collective's kernel is scheduled first, so communication hides behind compute.
    PT_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, ctx.stream_priorities().highest));
    PT_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  }

  ~NcclCommunicator() override {
    // No throwing here: finish outstanding work, then release everything.
    if (comm_ != nullptr) {
      cudaStreamSynchronize(stream_);
      ncclCommFinalize(comm_);
      ncclCommDestroy(comm_);
    }
    if (ready_) cudaEventDestroy(ready_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Backend backend() const override { return Backend::NCCL; }

  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    check_buffer(t, "all_reduce");
    const ncclDataType_t type = nccl_type(t.dtype(), "all_reduce");
    return launch("all_reduce", t, -1, t.numel(),
                  [&] { return ncclAllReduce(t.data(), t.data(), t.numel(), type, nccl_op(op), comm_, stream_); });
  }

  WorkPtr broadcast_async(Tensor& t, int root) override {
    check_buffer(t, "broadcast");
    PT_CHECK(root >= 0 && root < world_, "broadcast: root " + std::to_string(root) + " out of range");
    const ncclDataType_t type = nccl_type(t.dtype(), "broadcast");
    return launch("broadcast", t, root, t.numel(),
                  [&] { return ncclBroadcast(t.data(), t.data(), t.numel(), type, root, comm_, stream_); });
  }

  WorkPtr reduce_async(Tensor& t, int root, ReduceOp op) override {
    check_buffer(t, "reduce");
    PT_CHECK(root >= 0 && root < world_, "reduce: root " + std::to_string(root) + " out of range");
    const ncclDataType_t type = nccl_type(t.dtype(), "reduce");
    return launch("reduce", t, root, t.numel(),
                  [&] { return ncclReduce(t.data(), t.data(), t.numel(), type, nccl_op(op), root, comm_, stream_); });
  }

  WorkPtr reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op) override {
    check_blocks(recv, send, "reduce_scatter");  // NCCL's in-place convention is ours
    const ncclDataType_t type = nccl_type(recv.dtype(), "reduce_scatter");
    return launch("reduce_scatter", send, -1, recv.numel(), [&] {
      return ncclReduceScatter(send.data(), recv.data(), recv.numel(), type, nccl_op(op), comm_, stream_);
    });
  }

  WorkPtr all_gather_async(const Tensor& send, Tensor& recv) override {
    check_blocks(send, recv, "all_gather");
    const ncclDataType_t type = nccl_type(recv.dtype(), "all_gather");
    return launch("all_gather", recv, -1, send.numel(),
                  [&] { return ncclAllGather(send.data(), recv.data(), send.numel(), type, comm_, stream_); });
  }

  void barrier() override {
    // Drain both streams (bounded), then meet the other ranks on the host.
    wait_stream_host(ctx_.stream(), "nccl barrier (compute stream)");
    synchronize();
    MPI_Request req;
    PT_MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    bounded_wait(
        [&] {
          check_async("nccl barrier");
          int flag = 0;
          PT_MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
          return flag != 0;
        },
        [&](double s) { timeout("nccl barrier", s); });
  }

  void synchronize() override { wait_stream_host(stream_, "nccl synchronize"); }

  void poll() override { check_async("nccl poll"); }

  // Host-side bounded wait for `e`, polling NCCL's asynchronous error state meanwhile.
  void wait_event_host(cudaEvent_t e, const std::string& op) override {
    bounded_wait([&] { return event_done(e, op); }, [&](double s) { timeout(op, s); });
  }

  // True when `e` has completed; aborts on an asynchronous NCCL error.
  bool event_done(cudaEvent_t e, const std::string& op) override {
    check_async(op);
    const cudaError_t rc = cudaEventQuery(e);
    if (rc == cudaErrorNotReady) return false;
    PT_CUDA_CHECK(rc);
    return true;
  }

  void check_async(const std::string& op) {
    if (comm_ == nullptr) return;
    ncclResult_t async = ncclSuccess;
    PT_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess && async != ncclInProgress)
      fail(op,
           std::string("asynchronous NCCL error: ") + ncclGetErrorString(async) + " (" + ncclGetLastError(comm_) + ")");
  }

  [[noreturn]] void timeout(const std::string& op, double elapsed) {
    fail(op, "not complete after " + std::to_string(static_cast<int>(elapsed)) + " s (limit PARATRAIN_COMM_TIMEOUT_S=" +
                 std::to_string(comm_timeout_s()) + " s); a peer rank is gone or stuck");
  }

  // Aborting the communicator frees the NCCL kernels stuck on the GPU, so MPI_Abort can end
  // the process cleanly.
  [[noreturn]] void fail(const std::string& op, const std::string& reason) {
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    comm_fatal(op, reason);
  }

  void make_compute_wait(cudaEvent_t e) override { PT_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream(), e, 0)); }
  EventPool& events() override { return events_; }

 private:
  // `big` is the collective's largest buffer (named in errors, and in the trace); root -1 when
  // the op has none; count is the element count NCCL is given.
  template <class Call>
  WorkPtr launch(const char* kind, const Tensor& big, int root, int64_t count, Call&& call) {
    std::string op = describe_op(kind, big);
    // The collective reads what the compute stream has produced so far.
    PT_CUDA_CHECK(cudaEventRecord(ready_, ctx_.stream()));
    PT_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
    cudaEvent_t traced_end = nullptr;
    if (trace_ != nullptr) {
      // After the wait: the span starts when the collective can run, not when it was issued.
      TracedCollective c(kind, big.data(), static_cast<int64_t>(big.nbytes()), root);
      c.start = trace_->take_event();
      c.end = traced_end = trace_->take_event();
      PT_CUDA_CHECK(cudaEventRecord(c.start, stream_));
      trace_->add(std::move(c));
    }
    if (count > 0) {
      const ncclResult_t rc = call();
      if (rc != ncclSuccess) fail(op, std::string("NCCL returned ") + ncclGetErrorString(rc));
    }
    if (traced_end != nullptr) PT_CUDA_CHECK(cudaEventRecord(traced_end, stream_));
    cudaEvent_t done = events_.take();
    PT_CUDA_CHECK(cudaEventRecord(done, stream_));
    return std::make_unique<StreamWork>(*this, done, std::move(op));
  }

  Context& ctx_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // compute-stream position a collective waits for
  EventPool events_;             // completion events for reuse
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Context& ctx, int comm_sms) {
  return std::make_unique<NcclCommunicator>(ctx, comm_sms);
}

}  // namespace pt::parallel
