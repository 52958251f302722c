// MPI Communicator: host buffers, non-blocking MPI collectives on a duplicate of
// MPI_COMM_WORLD, progress driven by MPI_Test from every call into the communicator.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.h"
#include "dist/bounded_wait.h"
#include "dist/comm_trace.h"
#include "dist/communicator.h"

namespace pt::dist {

namespace {

MPI_Datatype mpi_type(DType t, const char* op) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    default: break;
  }
  PT_FAIL(std::string(op) + " on the mpi communicator supports fp32 and fp64 tensors, got " +
          dtype_name(t));
}

int mpi_count(int64_t n, const char* op) {
  PT_CHECK(n <= INT_MAX, std::string(op) + ": " + std::to_string(n) +
                             " elements exceed MPI's int count; split the buffer");
  return static_cast<int>(n);
}

// Divides every element by `world` (MPI has no average reduction).
void divide(void* p, DType t, int64_t n, int world) {
  if (t == DType::F32) {
    const float s = 1.0f / static_cast<float>(world);
    float* x = static_cast<float*>(p);
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  } else {
    const double s = 1.0 / world;
    double* x = static_cast<double*>(p);
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  }
}

std::string describe_op(const char* op, const Tensor& t) {
  return std::string("mpi ") + op + " (" + std::to_string(t.numel()) + " " + dtype_name(t.dtype()) + ")";
}

class MpiCommunicator;

class MpiWork : public Work {
 public:
  MpiWork(MpiCommunicator& comm, std::string op, std::function<void()> on_complete);
  ~MpiWork() override;
  MPI_Request* request() { return &req_; }
  // test() stamps the entry's end time when it first sees the request complete.
  void trace_into(CommTrace* trace, size_t entry) {
    trace_ = trace;
    trace_entry_ = entry;
  }
  void wait() override;
  bool test() override;
  void synchronize() override { wait(); }

 private:
  MpiCommunicator& comm_;
  std::string op_;
  MPI_Request req_ = MPI_REQUEST_NULL;
  std::function<void()> on_complete_;  // host post-processing, run once by wait()
  bool complete_ = false, finished_ = false;
  CommTrace* trace_ = nullptr;
  size_t trace_entry_ = 0;
};

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(Context& ctx) : Communicator(Device::cpu(), 0, 1) {
    PT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_));
    // Our own communicator keeps our traffic apart from anybody else's use of MPI_COMM_WORLD.
    MPI_Request req;
    PT_MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &req));
    wait_request(&req, "mpi communicator creation (MPI_Comm_idup)");
    PT_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  }

  ~MpiCommunicator() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  Backend backend() const override { return Backend::MPI; }

  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    check_buffer(t, "all_reduce");
    MPI_Datatype type = mpi_type(t.dtype(), "all_reduce");
    std::function<void()> done;
    if (op == ReduceOp::Average)
      done = [p = t.data(), d = t.dtype(), n = t.numel(), w = world_] { divide(p, d, n, w); };
    auto work = start("all_reduce", t, -1, std::move(done));
    PT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, t.data(), mpi_count(t.numel(), "all_reduce"), type,
                                MPI_SUM, comm_, work->request()));
    return work;
  }

  WorkPtr broadcast_async(Tensor& t, int root) override {
    check_buffer(t, "broadcast");
    PT_CHECK(root >= 0 && root < world_, "broadcast: root " + std::to_string(root) + " out of range");
    MPI_Datatype type = mpi_type(t.dtype(), "broadcast");
    auto work = start("broadcast", t, root, nullptr);
    PT_MPI_CHECK(MPI_Ibcast(t.data(), mpi_count(t.numel(), "broadcast"), type, root, comm_,
                            work->request()));
    return work;
  }

  WorkPtr reduce_async(Tensor& t, int root, ReduceOp op) override {
    check_buffer(t, "reduce");
    PT_CHECK(root >= 0 && root < world_, "reduce: root " + std::to_string(root) + " out of range");
    MPI_Datatype type = mpi_type(t.dtype(), "reduce");
    std::function<void()> done;
    if (op == ReduceOp::Average && rank_ == root)
      done = [p = t.data(), d = t.dtype(), n = t.numel(), w = world_] { divide(p, d, n, w); };
    auto work = start("reduce", t, root, std::move(done));
    const bool at_root = rank_ == root;
    PT_MPI_CHECK(MPI_Ireduce(at_root ? MPI_IN_PLACE : t.data(), at_root ? t.data() : nullptr,
                             mpi_count(t.numel(), "reduce"), type, MPI_SUM, root, comm_, work->request()));
    return work;
  }

  WorkPtr reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op) override {
    const bool in_place = check_blocks(recv, send, "reduce_scatter");
    MPI_Datatype type = mpi_type(recv.dtype(), "reduce_scatter");
    const int64_t n = recv.numel();
    // MPI_IN_PLACE would leave the result at the start of the buffer, not in block `rank`:
    // reduce into scratch and copy it into place on completion.
    auto scratch = in_place ? std::make_shared<std::vector<char>>(recv.nbytes()) : nullptr;
    void* out = in_place ? scratch->data() : recv.data();
    auto done = [scratch, dst = recv.data(), bytes = recv.nbytes(), d = recv.dtype(), n, w = world_,
                 avg = op == ReduceOp::Average] {
      if (scratch) std::memcpy(dst, scratch->data(), bytes);
      if (avg) divide(dst, d, n, w);
    };
    auto work = start("reduce_scatter", send, -1, done);
    PT_MPI_CHECK(MPI_Ireduce_scatter_block(send.data(), out, mpi_count(n, "reduce_scatter"), type,
                                           MPI_SUM, comm_, work->request()));
    return work;
  }

  WorkPtr all_gather_async(const Tensor& send, Tensor& recv) override {
    const bool in_place = check_blocks(send, recv, "all_gather");
    MPI_Datatype type = mpi_type(recv.dtype(), "all_gather");
    const int n = mpi_count(send.numel(), "all_gather");
    mpi_count(recv.numel(), "all_gather");
    auto work = start("all_gather", recv, -1, nullptr);
    // In place is MPI's own convention here: our block already sits where we receive it.
    PT_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.data(), in_place ? 0 : n,
                                in_place ? MPI_DATATYPE_NULL : type, recv.data(), n, type, comm_,
                                work->request()));
    return work;
  }

  void barrier() override {
    MPI_Request req;
    PT_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    wait_request(&req, "mpi barrier");
  }

  void synchronize() override {
    bounded_wait([&] { poll(); return outstanding_.empty(); },
                 [&](double s) { timeout("mpi synchronize (" + std::to_string(outstanding_.size()) +
                                         " collectives outstanding)", s); });
  }

  void poll() override {
    // test() unregisters completed work, so iterate over a copy.
    std::vector<MpiWork*> pending = outstanding_;
    for (MpiWork* w : pending) w->test();
  }

  void enroll(MpiWork* w) { outstanding_.push_back(w); }
  void retire(MpiWork* w) {
    outstanding_.erase(std::remove(outstanding_.begin(), outstanding_.end(), w), outstanding_.end());
  }

  [[noreturn]] void timeout(const std::string& op, double elapsed) {
    comm_fatal(op, "not complete after " + std::to_string(static_cast<int>(elapsed)) +
                       " s (limit PARATRAIN_COMM_TIMEOUT_S=" + std::to_string(comm_timeout_s()) +
                       " s); a peer rank is gone or stuck");
  }

 private:
  // `big` is the collective's largest buffer (named in errors, and in the trace); root -1 when
  // the op has none. The caller issues the MPI request right after.
  std::unique_ptr<MpiWork> start(const char* kind, const Tensor& big, int root,
                                 std::function<void()> on_complete) {
    poll();  // every new collective also advances the ones in flight
    auto work = std::make_unique<MpiWork>(*this, describe_op(kind, big), std::move(on_complete));
    if (trace_ != nullptr) {
      TracedCollective c(kind, big.data(), static_cast<int64_t>(big.nbytes()), root);
      c.host_start = std::chrono::steady_clock::now();
      work->trace_into(trace_, trace_->add(std::move(c)));
    }
    return work;
  }

  void wait_request(MPI_Request* req, const std::string& op) {
    bounded_wait(
        [&] {
          int flag = 0;
          PT_MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
          return flag != 0;
        },
        [&](double s) { timeout(op, s); });
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<MpiWork*> outstanding_;
};

MpiWork::MpiWork(MpiCommunicator& comm, std::string op, std::function<void()> on_complete)
    : comm_(comm), op_(std::move(op)), on_complete_(std::move(on_complete)) {
  comm_.enroll(this);
}

MpiWork::~MpiWork() {
  if (finished_) return;
  try {
    wait();
  } catch (const std::exception& e) {
    comm_fatal(op_, std::string("abandoned request failed: ") + e.what());
  }
}

bool MpiWork::test() {
  if (complete_) return true;
  int flag = 0;
  PT_MPI_CHECK(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
  if (flag) {
    complete_ = true;
    comm_.retire(this);
    if (trace_ != nullptr) {
      TracedCollective& c = trace_->at(trace_entry_);
      c.host_end = std::chrono::steady_clock::now();
      c.host_done = true;
    }
  }
  return complete_;
}

void MpiWork::wait() {
  if (finished_) return;
  bounded_wait([&] { return test(); }, [&](double s) { comm_.timeout(op_, s); });
  finished_ = true;
  if (on_complete_) on_complete_();
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(Context& ctx) {
  return std::make_unique<MpiCommunicator>(ctx);
}

}  // namespace pt::dist
