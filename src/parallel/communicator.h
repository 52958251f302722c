#pragma once
// Communicator: the collectives data parallelism needs (all-reduce, broadcast, reduce,
// reduce-scatter, all-gather, barrier), blocking and asynchronous, with one NCCL (device buffers) and one MPI
// (host buffers) implementation. Strategies and sharded optimizers are written against this.
//
// Ordering. NCCL work runs on the communicator's own stream: each collective first waits (an
// event) for everything already queued on the compute stream, and Work::wait() makes the
// compute stream wait for the collective. The host never blocks on the hot path. MPI work is
// non-blocking MPI; Work::wait() blocks the host until the request completes.
//
// MPI progress. There is no progress thread: Open MPI advances a non-blocking collective only
// inside MPI calls. Every new collective and every poll() tests all outstanding requests, and
// the gradient-sync strategies poll each time a gradient becomes ready, so on the CPU a large
// all-reduce advances between layers of backward. (A progress thread would need
// MPI_THREAD_MULTIPLE, which costs every MPI call a lock and is not what we measure.)
//
// Failures end the job. Every host-side wait is a test loop bounded by comm_timeout_s()
// (env PARATRAIN_COMM_TIMEOUT_S, default 300 s) that also polls NCCL's asynchronous errors; on
// a timeout or an error the NCCL communicator is aborted and parallel::Runtime::abort ends every
// rank with a message naming this rank and the operation.
#include <cstdint>
#include <memory>
#include <string>

#include "core/context.h"
#include "core/tensor.h"
#include "parallel/comm_engine.h"

namespace pt::parallel {

class CommTrace;  // dist/comm_trace.h

enum class Backend { MPI, NCCL };
Backend backend_from_name(const std::string& name);  // "mpi" | "nccl"; throws on others
const char* backend_name(Backend b);
// The backend for tensors on `device`: NCCL for CUDA, MPI for the CPU.
Backend backend_for(Device device);

enum class ReduceOp { Sum, Average };  // Average = Sum / world_size

// Seconds any host-side wait may take before the job is aborted: --comm-timeout
// (set_comm_timeout_s, before the first collective), else PARATRAIN_COMM_TIMEOUT_S, else 300.
double comm_timeout_s();
void set_comm_timeout_s(double seconds);

// Completion handle of one asynchronous collective. Buffers must stay alive and untouched
// until wait(). A handle destroyed before wait() waits (MPI requests cannot be abandoned).
class Work {
 public:
  virtual ~Work() = default;
  // Makes the result visible to later work: NCCL, the compute stream waits for the
  // collective (no host block); MPI, the host waits (bounded) and finishes the op (the
  // division of an average, the copy of an in-place reduce-scatter). Idempotent.
  virtual void wait() = 0;
  // Host-side completion check without blocking; also advances MPI progress.
  virtual bool test() = 0;
  // Host-side bounded wait until the collective has finished on the device (NCCL) or in MPI.
  virtual void synchronize() = 0;
};
using WorkPtr = std::unique_ptr<Work>;

// A buffer the other ranks' copy engines can reach (Communicator::register_buffer); unreachable
// again once destroyed.
class Registration {
 public:
  virtual ~Registration() = default;
};
using RegistrationPtr = std::unique_ptr<Registration>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual Backend backend() const = 0;
  const char* name() const { return backend_name(backend()); }
  // What moves the data of collectives on registered buffers: "nccl", "ce" or "mpi".
  virtual const char* engine() const { return name(); }
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  // Where buffers must live: the context's GPU for NCCL, the CPU for MPI.
  Device device() const { return device_; }
  // SMs the collectives run on when they are capped (NCCL's CTAs, --comm-sms); 0 = uncapped
  // (NCCL's own choice, or MPI, which uses no SMs). An overlapped gradient sync keeps GEMMs
  // off that many SMs while its collectives are in flight (Context::reserve_sms).
  int reserved_sms() const { return reserved_sms_; }

  // All tensors are contiguous fp32 or bf16 (MPI also fp64; NCCL also fp16 and fp64) on
  // device(). Counts are elements. bf16 sums round every partial sum to bf16 (MPI: an fp32
  // add, then round to nearest even); the MPI communicator refuses ReduceOp::Average on bf16.
  // t ← op over ranks of t (in place).
  virtual WorkPtr all_reduce_async(Tensor& t, ReduceOp op) = 0;
  // t ← root's t.
  virtual WorkPtr broadcast_async(Tensor& t, int root) = 0;
  // On root, t ← op over ranks of t (in place); the other ranks' t is left unchanged.
  virtual WorkPtr reduce_async(Tensor& t, int root, ReduceOp op) = 0;
  // send (world·n), recv (n): recv ← op over ranks of block `rank` of send. recv may be that
  // block of send itself (in place); otherwise the two must not overlap.
  virtual WorkPtr reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op) = 0;
  // send (n), recv (world·n): block r of recv ← rank r's send. send may be block `rank` of
  // recv (in place); otherwise the two must not overlap.
  virtual WorkPtr all_gather_async(const Tensor& send, Tensor& recv) = 0;

  // Blocking forms: async + wait (on the GPU the host still does not block).
  void all_reduce(Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }
  void broadcast(Tensor& t, int root) { broadcast_async(t, root)->wait(); }
  void reduce(Tensor& t, int root, ReduceOp op) { reduce_async(t, root, op)->wait(); }
  void reduce_scatter(const Tensor& send, Tensor& recv, ReduceOp op) { reduce_scatter_async(send, recv, op)->wait(); }
  void all_gather(const Tensor& send, Tensor& recv) { all_gather_async(send, recv)->wait(); }

  // Every rank reaches this point (host-side, bounded). On NCCL it also drains the
  // communication stream first, so timings that follow start from idle.
  virtual void barrier() = 0;
  // Host-side bounded wait for every collective issued so far.
  virtual void synchronize() = 0;
  // Cheap: advances outstanding MPI requests; checks NCCL's asynchronous error state.
  virtual void poll() {}

  // Collective: every rank registers a buffer of the same size, at the same offset in its
  // allocation, in the same order. Collectives whose buffers lie in a registered one may then run
  // on the copy engines (--comm-engine ce: all_reduce, in-place reduce_scatter and all_gather);
  // all others go through NCCL. The NCCL and MPI communicators keep nothing (nullptr). Drop the
  // handle only when no collective on the buffer is outstanding.
  virtual RegistrationPtr register_buffer(const Tensor& t) { return nullptr; }

  // Records every collective issued from now on into `trace` (dist/comm_trace.h); nullptr
  // stops. Attach and detach only while no collective is outstanding (after synchronize()).
  virtual void set_trace(CommTrace* trace) { trace_ = trace; }
  CommTrace* trace() const { return trace_; }

 protected:
  Communicator(Device device, int rank, int world) : device_(device), rank_(rank), world_(world) {}
  // Shape, dtype, device and aliasing checks shared by both implementations.
  void check_buffer(const Tensor& t, const char* op) const;
  // Returns true when the op is in place (recv/send is block `rank` of the larger buffer).
  bool check_blocks(const Tensor& small, const Tensor& big, const char* op) const;

  Device device_;
  int rank_, world_;
  int reserved_sms_ = 0;
  CommTrace* trace_ = nullptr;
};

// Collective over MPI_COMM_WORLD (every rank calls it). NCCL: rank 0 makes the unique id and
// broadcasts it over MPI; the communicator uses ctx's GPU (the rank's local_rank) and orders
// itself against ctx's compute stream. MPI: a duplicate of MPI_COMM_WORLD. ctx must outlive
// the communicator.
// comm_sms > 0 (NCCL only; MPI ignores it) caps every NCCL collective at that many CTAs
// (ncclConfig_t minCTAs = maxCTAs = comm_sms) and sets reserved_sms(); 0 leaves NCCL its own
// choice (24 CTAs for 2 H200s over NVLink) and GEMMs every SM; kCommSmsAuto picks
// auto_comm_sms(ctx).
// engine (comm_engine.h) applies to the NCCL backend; with ce, comm_sms > 0 sets the CTAs of the
// sum pass and reserves that many SMs, and 0 or auto runs it on 16 CTAs with no reservation.
constexpr int kCommSmsAuto = -1;
std::unique_ptr<Communicator> make_communicator(Backend backend, Context& ctx, int comm_sms = 0,
                                                CommEngine engine = CommEngine::NCCL);
// --comm-sms auto: 0 on the CPU; on a GPU the count measured best for it (auto_comm_sms_for, from
// the device's name), at most a quarter of its SMs.
int auto_comm_sms(const Context& ctx);
// The rule itself, for a GPU of this name and SM count (the table in communicator.cpp).
int auto_comm_sms_for(const std::string& device_name, int sm_count);

// Used by both implementations: ends the job naming this rank, the operation and the reason.
[[noreturn]] void comm_fatal(const std::string& op, const std::string& reason);

}  // namespace pt::parallel
