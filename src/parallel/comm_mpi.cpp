// MPI Communicator: host buffers, non-blocking MPI collectives on a duplicate of
// MPI_COMM_WORLD, progress driven by MPI_Test from every call into the communicator.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/bounded_wait.h"
#include "parallel/comm_trace.h"
#include "parallel/communicator.h"

namespace pt::parallel {

namespace {

// The bf16 sum of the MPI communicator (MPI has no bf16 type): each pair of values is added in
// fp32 and the sum rounded to bf16 (nearest even), so every partial sum of a reduction is a bf16
// value, as in NCCL's ncclBfloat16 sum. (Where the fp32 addition of two bf16 values rounds at
// all, the addend is far below half a bf16 ulp, so this is the correctly rounded bf16 sum.)
// MPI promises no alignment for a type made of bytes: elements are read with memcpy.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const char* a = static_cast<const char*>(in);
  char* b = static_cast<char*>(inout);
  for (int i = 0; i < *len; ++i) {
    uint16_t x, y;
    std::memcpy(&x, a + 2 * i, 2);
    std::memcpy(&y, b + 2 * i, 2);
    const uint16_t sum = float_to_bf16_bits(bf16_bits_to_float(x) + bf16_bits_to_float(y));
    std::memcpy(b + 2 * i, &sum, 2);
  }
}

int mpi_count(int64_t n, const char* op) {
  PT_CHECK(n <= INT_MAX,
           std::string(op) + ": " + std::to_string(n) + " elements exceed MPI's int count; split the buffer");
  return static_cast<int>(n);
}

// Divides every element by `world` (MPI has no average reduction; fp32 and fp64 only: sum_of
// refuses bf16 averages).
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
    // bf16 (--grad-comm bf16): a 2-byte type of our own rather than MPI_UINT16_T, so that
    // nothing can sum it as integers by mistake, and its commutative sum.
    PT_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &bf16_));
    PT_MPI_CHECK(MPI_Type_commit(&bf16_));
    PT_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_));
  }

  ~MpiCommunicator() override {
    if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
    if (bf16_ != MPI_DATATYPE_NULL) MPI_Type_free(&bf16_);
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  Backend backend() const override { return Backend::MPI; }

  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    check_buffer(t, "all_reduce");
    MPI_Datatype type = type_of(t.dtype(), "all_reduce");
    MPI_Op sum = sum_of(t.dtype(), op, "all_reduce");
    std::function<void()> done;
    if (op == ReduceOp::Average)
      done = [p = t.data(), d = t.dtype(), n = t.numel(), w = world_] { divide(p, d, n, w); };
    auto work = start("all_reduce", t, -1, std::move(done));
    PT_MPI_CHECK(
        MPI_Iallreduce(MPI_IN_PLACE, t.data(), mpi_count(t.numel(), "all_reduce"), type, sum, comm_, work->request()));
    return work;
  }

  WorkPtr broadcast_async(Tensor& t, int root) override {
    check_buffer(t, "broadcast");
    PT_CHECK(root >= 0 && root < world_, "broadcast: root " + std::to_string(root) + " out of range");
    MPI_Datatype type = type_of(t.dtype(), "broadcast");
    auto work = start("broadcast", t, root, nullptr);
    PT_MPI_CHECK(MPI_Ibcast(t.data(), mpi_count(t.numel(), "broadcast"), type, root, comm_, work->request()));
    return work;
  }

  WorkPtr reduce_async(Tensor& t, int root, ReduceOp op) override {
    check_buffer(t, "reduce");
    PT_CHECK(root >= 0 && root < world_, "reduce: root " + std::to_string(root) + " out of range");
    MPI_Datatype type = type_of(t.dtype(), "reduce");
    MPI_Op sum = sum_of(t.dtype(), op, "reduce");
    std::function<void()> done;
    if (op == ReduceOp::Average && rank_ == root)
      done = [p = t.data(), d = t.dtype(), n = t.numel(), w = world_] { divide(p, d, n, w); };
    auto work = start("reduce", t, root, std::move(done));
    const bool at_root = rank_ == root;
    PT_MPI_CHECK(MPI_Ireduce(at_root ? MPI_IN_PLACE : t.data(), at_root ? t.data() : nullptr,
                             mpi_count(t.numel(), "reduce"), type, sum, root, comm_, work->request()));
    return work;
  }

  WorkPtr reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op) override {
    const bool in_place = check_blocks(recv, send, "reduce_scatter");
    MPI_Datatype type = type_of(recv.dtype(), "reduce_scatter");
    MPI_Op sum = sum_of(recv.dtype(), op, "reduce_scatter");
    const int64_t n = recv.numel();
    // MPI_IN_PLACE would leave the result at the start of the buffer, not in block `rank`:
    // reduce into scratch and copy it into place on completion.
    auto scratch = in_place ? std::make_shared<std::vector<char>>(recv.nbytes()) : nullptr;
    void* out = in_place ? scratch->data() : recv.data();
    auto done = [scratch, dst = recv.data(), bytes = recv.nbytes(), d = recv.dtype(), n, w = world_,
                 avg = op == ReduceOp::Average] {
      if (scratch && bytes > 0) std::memcpy(dst, scratch->data(), bytes);  // no null pointers for empty tensors
      if (avg) divide(dst, d, n, w);
    };
    auto work = start("reduce_scatter", send, -1, done);
    PT_MPI_CHECK(
        MPI_Ireduce_scatter_block(send.data(), out, mpi_count(n, "reduce_scatter"), type, sum, comm_, work->request()));
    return work;
  }

  WorkPtr all_gather_async(const Tensor& send, Tensor& recv) override {
    const bool in_place = check_blocks(send, recv, "all_gather");
    MPI_Datatype type = type_of(recv.dtype(), "all_gather");
    const int n = mpi_count(send.numel(), "all_gather");
    mpi_count(recv.numel(), "all_gather");
    auto work = start("all_gather", recv, -1, nullptr);
    // In place is MPI's own convention here: our block already sits where we receive it.
    PT_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.data(), in_place ? 0 : n,
                                in_place ? MPI_DATATYPE_NULL : type, recv.data(), n, type, comm_, work->request()));
    return work;
  }

  void barrier() override {
    MPI_Request req;
    PT_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    wait_request(&req, "mpi barrier");
  }

  void synchronize() override {
    bounded_wait(
        [&] {
          poll();
          return outstanding_.empty();
        },
        [&](double s) {
          timeout("mpi synchronize (" + std::to_string(outstanding_.size()) + " collectives outstanding)", s);
        });
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
  MPI_Datatype type_of(DType t, const char* op) const {
    switch (t) {
      case DType::F32: return MPI_FLOAT;
      case DType::F64: return MPI_DOUBLE;
      case DType::BF16: return bf16_;
      default: break;
    }
    PT_FAIL(std::string(op) + " on the mpi communicator supports fp32, fp64 and bf16 tensors, got " + dtype_name(t));
  }

  // The MPI reduction that sums t's type (an average divides the sum on completion). bf16 is
  // summed only: dividing in bf16 would round once more, so its users (--grad-comm bf16) sum
  // and then scale in fp32.
  MPI_Op sum_of(DType t, ReduceOp op, const char* what) const {
    if (t != DType::BF16) return MPI_SUM;
    PT_CHECK(op == ReduceOp::Sum, std::string(what) + " on the mpi communicator: bf16 supports ReduceOp::Sum "
                                                      "only (sum, then scale in fp32), not Average");
    return bf16_sum_;
  }

  // `big` is the collective's largest buffer (named in errors, and in the trace); root -1 when
  // the op has none. The caller issues the MPI request right after.
  std::unique_ptr<MpiWork> start(const char* kind, const Tensor& big, int root, std::function<void()> on_complete) {
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
  MPI_Datatype bf16_ = MPI_DATATYPE_NULL;  // 2 bytes, committed
  MPI_Op bf16_sum_ = MPI_OP_NULL;          // bf16_sum above
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

std::unique_ptr<Communicator> make_mpi_communicator(Context& ctx) { return std::make_unique<MpiCommunicator>(ctx); }

}  // namespace pt::parallel
