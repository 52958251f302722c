// Copy-engine collectives on one node (--comm-engine ce): the data of an all-reduce, a
// reduce-scatter or an all-gather on registered buffers moves by peer-to-peer copies that the
// GPUs' copy engines run over NVLink, so the SMs stay with backward; the only SM work is one sum
// pass over this rank's chunk (cuda/comm_reduce.h). Everything else goes through NCCL.
//
// Protocol. Ranks only ever pull: a rank copies what it needs out of a peer's buffer into its own
// memory, so data is visible to its own later work as soon as its own copy has completed. Ranks
// tell each other where they are through flags in each GPU's memory: for every peer p and every
// milestone kind, flags[kind][p] on rank r is the number of the last collective in which p reached
// that milestone towards r. Peers write them remotely from a stream (cuStreamWriteValue32, which
// fences the stream's earlier writes), streams wait for them (cuStreamWaitValue32: no SM, no
// host). Each kind is written by one stream in collective order, so each flag only grows. Every
// rank issues the same collectives in the same order, as with NCCL. The milestones:
//   ready    my input is final: pull from it            (announcing stream, after the compute stream)
//   reduced  my chunk is summed: pull it                 (main stream, after the sum)
//   done     I have finished reading your buffer         (the gather stream that read it last)
// all-reduce (chunk r of the buffer is rank r's): announce ready; pull chunk r of each peer into
// staging (8 MiB pieces, two slots, so pulls and sums overlap); sum in rank order into chunk r;
// announce reduced; pull each peer's reduced chunk into place, then announce done to it.
// reduce-scatter: the same without the second pull.  all-gather: announce ready; pull each
// peer's block; announce done.  A collective completes (its Work) once this rank's pulls are done
// and every peer has announced done, so no peer still reads the buffer when the compute stream
// writes it again. The main stream does not wait for that: the next collective's pulls and sum
// start at once (the next bucket during backward), unless it touches memory of one not yet
// complete.
// Collectives pipeline. Two copy streams per peer: the sum's pulls (into staging; gated only by
// the peer's ready and by the sum that last read the slot) and the gather pulls (the reduced
// chunks, all-gather blocks, and done); on one stream a bucket's first pulls queued behind the
// previous bucket's second pull, which waits for the peer's sum. And ready has a stream of its
// own: announced by the main stream it waited for this rank's previous sum, so every collective
// paid a pull, a sum and two flag hops in a chain across the ranks (about 0.2 ms on 4 ranks,
// slower than backward makes buckets). Measured: docs/reports/2026-11-28_ce-pipeline_2xh200-4xh200.md.
//
// Failure. Waits on the device have no timeout of their own: the host's waits on a collective
// (Work::synchronize, barrier, synchronize) are bounded by comm_timeout_s() like NCCL's and end
// the job naming the rank and the operation; a dead peer process ends the job through the
// launcher.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <vector>

#include "core/error.h"
#include "cuda/comm_reduce.h"
#include "parallel/bounded_wait.h"
#include "parallel/comm_engine.h"
#include "parallel/comm_trace.h"
#include "parallel/communicator.h"
#include "parallel/runtime.h"
#include "parallel/stream_work.h"

namespace pt::parallel {

std::unique_ptr<Communicator> make_nccl_communicator(Context& ctx, int comm_sms);

namespace {

// The stream memory operations and the allocation lookup come from the driver at run time, so
// the program still starts where no driver is installed (CPU machines).
struct DriverCalls {
  using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  WriteValue32 write32 = nullptr;
  WaitValue32 wait32 = nullptr;
  AddressRange range = nullptr;
};

template <class F>
F driver_entry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  PT_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found));
  PT_CHECK(found == cudaDriverEntryPointSuccess && fn != nullptr,
           std::string("--comm-engine ce: the CUDA driver does not provide ") + symbol);
  return reinterpret_cast<F>(fn);
}

const DriverCalls& driver() {
  static const DriverCalls calls = [] {
    DriverCalls c;
    c.write32 = driver_entry<DriverCalls::WriteValue32>("cuStreamWriteValue32");
    c.wait32 = driver_entry<DriverCalls::WaitValue32>("cuStreamWaitValue32");
    c.range = driver_entry<DriverCalls::AddressRange>("cuMemGetAddressRange");
    return c;
  }();
  return calls;
}

void cu_check(CUresult rc, const std::string& what) {
  PT_CHECK(rc == CUDA_SUCCESS, "--comm-engine ce: " + what + " failed (CUresult " + std::to_string(int(rc)) + ")");
}

// Milestone kinds (the rows of each rank's flag array).
enum Milestone : int { kReady = 0, kReduced = 1, kDone = 2, kMilestones = 3 };
// A pull's size (a multiple of every element size): staging stays small, pulls stay long.
constexpr int64_t kPieceBytes = int64_t(8) << 20;

// Rank r's chunk of n elements: [n·r/W, n·(r+1)/W).
int64_t chunk_begin(int64_t n, int r, int world) { return n * r / world; }

// One allocation every rank registered: its base here and, by rank, where each peer's copy of it
// is mapped in this process (this rank's own base at its own index).
struct Region {
  char* base = nullptr;
  size_t bytes = 0;
  std::vector<char*> at;  // by rank
  int uses = 0;
};

class CeCommunicator;

class CeRegistration : public Registration {
 public:
  CeRegistration(CeCommunicator& comm, char* base) : comm_(comm), base_(base) {}
  ~CeRegistration() override;

 private:
  CeCommunicator& comm_;
  char* base_;
};

class CeCommunicator : public Communicator, public StreamWorkOwner {
 public:
  CeCommunicator(Context& ctx, int comm_sms)
      : Communicator(ctx.device(), 0, 1), ctx_(ctx), nccl_(make_nccl_communicator(ctx, 0)) {
    rank_ = nccl_->rank();
    world_ = nccl_->world_size();
    PT_CHECK(world_ <= cuda::kMaxCeRanks, "--comm-engine ce serves at most " + std::to_string(cuda::kMaxCeRanks) +
                                              " ranks on a node, got " + std::to_string(world_));
    // The sum pass runs on comm_sms CTAs when given (and GEMMs keep off that many SMs while
    // collectives are in flight); otherwise on 16, with every SM left to the GEMMs.
    sum_blocks_ = comm_sms > 0 ? comm_sms : 16;
    reserved_sms_ = comm_sms;
    (void)driver();
    const int hi = ctx.stream_priorities().highest;
    PT_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, hi));
    PT_CUDA_CHECK(cudaStreamCreateWithPriority(&announce_, cudaStreamNonBlocking, hi));
    pull_.assign(world_, nullptr);
    gather_.assign(world_, nullptr);
    pulled_.assign(world_, {nullptr, nullptr});
    gathered_.assign(world_, nullptr);
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      PT_CUDA_CHECK(cudaStreamCreateWithPriority(&pull_[q], cudaStreamNonBlocking, hi));
      PT_CUDA_CHECK(cudaStreamCreateWithPriority(&gather_[q], cudaStreamNonBlocking, hi));
      for (auto& e : pulled_[q]) PT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      PT_CUDA_CHECK(cudaEventCreateWithFlags(&gathered_[q], cudaEventDisableTiming));
    }
    PT_CUDA_CHECK(cudaStreamCreateWithPriority(&complete_, cudaStreamNonBlocking, hi));
    for (cudaEvent_t* e : {&ready_, &announced_, &fork_, &summed_[0], &summed_[1]})
      PT_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    // The flags: zeroed and visible before any peer can write them.
    flags_ = Tensor::empty({kMilestones * world_}, DType::U32, device_, "ce_flags", MemCategory::Workspace);
    PT_CUDA_CHECK(cudaMemsetAsync(flags_.data(), 0, flags_.nbytes(), stream_));
    PT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    open_region(flags_, "ce flags", /*is_flags=*/true);
    // Two slots of one kPieceBytes piece per peer, whatever the element type: allocated once.
    staging_ =
        Tensor::empty({2 * (world_ - 1) * kPieceBytes / 4}, DType::U32, device_, "ce_staging", MemCategory::Workspace);
    nccl_->barrier();
  }

  ~CeCommunicator() override {
    // No throwing: finish what is queued (bounded: a lost peer ends the job), then release every
    // mapping and stream.
    try {
      if (complete_) wait_stream_host(complete_, "ce shutdown");
    } catch (const std::exception& e) {
      comm_fatal("ce shutdown", e.what());
    }
    for (auto& [base, region] : regions_)
      for (int q = 0; q < world_; ++q)
        if (q != rank_ && region.at[q]) cudaIpcCloseMemHandle(region.at[q]);
    for (auto& pair : pulled_)
      for (cudaEvent_t e : pair)
        if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : gathered_)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : {ready_, announced_, fork_, summed_[0], summed_[1]})
      if (e) cudaEventDestroy(e);
    for (const auto* streams : {&pull_, &gather_})
      for (cudaStream_t s : *streams)
        if (s) cudaStreamDestroy(s);
    for (auto& [range, e] : pending_) cudaEventDestroy(e);
    if (complete_) cudaStreamDestroy(complete_);
    if (announce_) cudaStreamDestroy(announce_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Backend backend() const override { return Backend::NCCL; }
  const char* engine() const override { return comm_engine_name(CommEngine::CE); }

  void set_trace(CommTrace* trace) override {
    trace_ = trace;
    nccl_->set_trace(trace);
  }

  RegistrationPtr register_buffer(const Tensor& t) override {
    check_buffer(t, "register_buffer");
    char* base = open_region(t, "register_buffer", /*is_flags=*/false);
    return std::make_unique<CeRegistration>(*this, base);
  }

  void unregister(char* base) {
    auto it = regions_.find(base);
    if (it == regions_.end() || --it->second.uses > 0) return;
    // Outstanding pulls may still read through the mappings.
    wait_stream_host(complete_, "ce unregister");
    for (int q = 0; q < world_; ++q)
      if (q != rank_ && it->second.at[q]) cudaIpcCloseMemHandle(it->second.at[q]);
    regions_.erase(it);
  }

  WorkPtr all_reduce_async(Tensor& t, ReduceOp op) override {
    const Region* reg = region_of(t);
    if (reg == nullptr || !summable(t)) return nccl_->all_reduce_async(t, op);
    check_buffer(t, "all_reduce");
    const int64_t n = t.numel();
    return run("all_reduce", t, [&](uint32_t k) {
      reduce_my_chunk(*reg, t, 0, n, op, k);
      announce(stream_, kReduced, k);
      pull_peer_chunks(*reg, t, 0, n, kReduced, k);
    });
  }

  WorkPtr reduce_scatter_async(const Tensor& send, Tensor& recv, ReduceOp op) override {
    const Region* reg = region_of(send);
    const bool in_place = check_blocks(recv, send, "reduce_scatter");
    if (reg == nullptr || !in_place || !summable(send)) return nccl_->reduce_scatter_async(send, recv, op);
    // Chunks are the blocks: rank r's block is [r·m, (r+1)·m) with m = n / world.
    return run("reduce_scatter", send, [&](uint32_t k) {
      reduce_my_chunk(*reg, send, 0, send.numel(), op, k);
      fork_gathers();
      for (int q = 0; q < world_; ++q)
        if (q != rank_) finish_reading(q, k);
    });
  }

  WorkPtr all_gather_async(const Tensor& send, Tensor& recv) override {
    const Region* reg = region_of(recv);
    const bool in_place = check_blocks(send, recv, "all_gather");
    if (reg == nullptr || !in_place) return nccl_->all_gather_async(send, recv);
    return run("all_gather", recv, [&](uint32_t k) { pull_peer_chunks(*reg, recv, 0, recv.numel(), kReady, k); });
  }

  WorkPtr broadcast_async(Tensor& t, int root) override { return nccl_->broadcast_async(t, root); }
  WorkPtr reduce_async(Tensor& t, int root, ReduceOp op) override { return nccl_->reduce_async(t, root, op); }

  void barrier() override {
    synchronize();
    nccl_->barrier();
  }

  void synchronize() override {
    wait_stream_host(complete_, "ce synchronize");
    nccl_->synchronize();
  }

  void poll() override { nccl_->poll(); }

  // Host-side bounded wait for `e`, polling NCCL's asynchronous errors meanwhile.
  void wait_event_host(cudaEvent_t e, const std::string& op) override {
    bounded_wait([&] { return event_done(e, op); },
                 [&](double s) {
                   comm_fatal(op, "not complete after " + std::to_string(static_cast<int>(s)) +
                                      " s (limit PARATRAIN_COMM_TIMEOUT_S=" + std::to_string(comm_timeout_s()) +
                                      " s); a peer rank is gone or stuck");
                 });
  }

  bool event_done(cudaEvent_t e, const std::string& /*op*/) override {
    nccl_->poll();
    const cudaError_t rc = cudaEventQuery(e);
    if (rc == cudaErrorNotReady) return false;
    PT_CUDA_CHECK(rc);
    return true;
  }

  void make_compute_wait(cudaEvent_t e) override { PT_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream(), e, 0)); }
  EventPool& events() override { return events_; }

 private:
  static bool summable(const Tensor& t) { return t.dtype() == DType::F32 || t.dtype() == DType::BF16; }

  // The registered allocation t lies in, or nullptr.
  const Region* region_of(const Tensor& t) const {
    if (world_ == 1 || !t.defined() || t.numel() == 0) return nullptr;
    auto* p = static_cast<char*>(t.data());
    auto it = regions_.upper_bound(p);
    if (it == regions_.begin()) return nullptr;
    --it;
    const Region& r = it->second;
    return p + t.nbytes() <= r.base + r.bytes ? &r : nullptr;
  }

  // Maps every rank's allocation holding t into every other rank (collective); returns its base.
  char* open_region(const Tensor& t, const char* op, bool is_flags) {
    CUdeviceptr base = 0;
    size_t bytes = 0;
    cu_check(driver().range(&base, &bytes, reinterpret_cast<CUdeviceptr>(t.data())), "cuMemGetAddressRange");
    // The base as a pointer, by the tensor's offset in its allocation (no integer-to-pointer cast).
    char* key = static_cast<char*>(t.data()) - (reinterpret_cast<CUdeviceptr>(t.data()) - base);
    struct Announce {
      cudaIpcMemHandle_t handle;
      uint64_t bytes;
      uint64_t offset;  // of t in the allocation
      uint64_t tensor_bytes;
    } mine{};
    PT_CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, key));
    mine.bytes = bytes;
    mine.offset = static_cast<uint64_t>(static_cast<char*>(t.data()) - key);
    mine.tensor_bytes = t.nbytes();
    std::vector<Announce> all(world_);
    PT_MPI_CHECK(
        MPI_Allgather(&mine, sizeof(Announce), MPI_BYTE, all.data(), sizeof(Announce), MPI_BYTE, MPI_COMM_WORLD));
    for (int q = 0; q < world_; ++q)
      PT_CHECK(all[q].tensor_bytes == mine.tensor_bytes && all[q].offset == mine.offset,
               std::string(op) + ": rank " + std::to_string(q) + " registered another buffer shape than rank " +
                   std::to_string(rank_) + " (every rank registers the same buffers in the same order)");
    auto [it, fresh] = regions_.try_emplace(key);
    Region& r = it->second;
    ++r.uses;
    if (!fresh) return key;
    r.base = key;
    r.bytes = bytes;
    r.at.assign(world_, nullptr);
    r.at[rank_] = key;
    std::string failure;
    for (int q = 0; q < world_ && failure.empty(); ++q) {
      if (q == rank_) continue;
      void* peer = nullptr;
      const cudaError_t rc = cudaIpcOpenMemHandle(&peer, all[q].handle, cudaIpcMemLazyEnablePeerAccess);
      if (rc != cudaSuccess) {
        cudaGetLastError();  // the error is reported below, once every rank knows
        failure = "cannot map rank " + std::to_string(q) + "'s GPU memory into rank " + std::to_string(rank_) + " (" +
                  cudaGetErrorString(rc) + ")";
      }
      r.at[q] = static_cast<char*>(peer);
    }
    // Every rank learns whether every mapping opened, so all fail (or fall back) together.
    int ok = failure.empty() ? 1 : 0, all_ok = 0;
    PT_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all_ok) {
      for (int q = 0; q < world_; ++q)
        if (q != rank_ && r.at[q]) cudaIpcCloseMemHandle(r.at[q]);
      regions_.erase(it);
      throw CeUnavailable(failure.empty() ? "another rank could not map this rank's GPU memory" : failure);
    }
    if (is_flags) {
      peer_flags_.assign(world_, 0);
      for (int q = 0; q < world_; ++q)
        if (q != rank_) peer_flags_[q] = reinterpret_cast<CUdeviceptr>(r.at[q] + all[q].offset);
    }
    return key;
  }

  // Address of element `at` of t (in region reg) in rank q's copy.
  static char* peer_ptr(const Region& reg, const Tensor& t, int q, int64_t at) {
    const size_t offset = static_cast<char*>(t.data()) - reg.base + size_t(at) * dtype_size(t.dtype());
    return reg.at[q] + offset;
  }

  // Runs one collective on the copy engines: ready announced once the compute stream's work so
  // far (and any incomplete collective on overlapping memory) is done, then body(k) (the pulls,
  // the sums, and each gather stream's done) after it; completes on the completion stream once
  // every peer has announced done. Returns its completion.
  template <class Body>
  WorkPtr run(const char* kind, const Tensor& big, Body&& body) {
    std::string op =
        std::string("ce ") + kind + " (" + std::to_string(big.numel()) + " " + dtype_name(big.dtype()) + ")";
    const uint32_t k = ++seq_;
    PT_CUDA_CHECK(cudaEventRecord(ready_, ctx_.stream()));
    PT_CUDA_CHECK(cudaStreamWaitEvent(announce_, ready_, 0));
    const auto* lo = static_cast<const char*>(big.data());
    const std::pair<const char*, const char*> range{lo, lo + big.nbytes()};
    after_overlapping(range);
    cudaEvent_t traced_end = nullptr;
    if (trace_ != nullptr) {
      TracedCollective c(kind, big.data(), static_cast<int64_t>(big.nbytes()), -1);
      c.start = trace_->take_event();
      c.end = traced_end = trace_->take_event();
      PT_CUDA_CHECK(cudaEventRecord(c.start, announce_));
      trace_->add(std::move(c));
    }
    announce(announce_, kReady, k);
    PT_CUDA_CHECK(cudaEventRecord(announced_, announce_));
    PT_CUDA_CHECK(cudaStreamWaitEvent(stream_, announced_, 0));
    body(k);
    // Completion: this rank's last work on the main stream (which waited for the sums' pulls)
    // and on every gather stream, then every peer's done.
    PT_CUDA_CHECK(cudaEventRecord(fork_, stream_));
    PT_CUDA_CHECK(cudaStreamWaitEvent(complete_, fork_, 0));
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      PT_CUDA_CHECK(cudaEventRecord(gathered_[q], gather_[q]));
      PT_CUDA_CHECK(cudaStreamWaitEvent(complete_, gathered_[q], 0));
      wait_flag(complete_, kDone, q, k);
    }
    if (traced_end != nullptr) PT_CUDA_CHECK(cudaEventRecord(traced_end, complete_));
    cudaEvent_t done = events_.take();
    PT_CUDA_CHECK(cudaEventRecord(done, complete_));
    cudaEvent_t tracked = events_.take();
    PT_CUDA_CHECK(cudaEventRecord(tracked, complete_));
    pending_.push_back({range, tracked});
    return std::make_unique<StreamWork>(*this, done, std::move(op));
  }

  // The announcing stream (and so everything after it) waits for every incomplete collective whose
  // memory overlaps `range` (two collectives on one buffer in a row); completed ones are forgotten.
  void after_overlapping(const std::pair<const char*, const char*>& range) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      const cudaError_t rc = cudaEventQuery(it->second);
      if (rc == cudaSuccess) {
        events_.recycle(it->second);
        it = pending_.erase(it);
        continue;
      }
      if (rc != cudaErrorNotReady) PT_CUDA_CHECK(rc);
      if (it->first.first < range.second && range.first < it->first.second)
        PT_CUDA_CHECK(cudaStreamWaitEvent(announce_, it->second, 0));
      ++it;
    }
  }

  // Every peer's `kind` flag for this rank ← k (after s's earlier work).
  void announce(cudaStream_t s, Milestone kind, uint32_t k) {
    for (int q = 0; q < world_; ++q)
      if (q != rank_) write_flag(s, q, kind, k);
  }

  void write_flag(cudaStream_t s, int q, Milestone kind, uint32_t k) {
    const CUdeviceptr addr = peer_flags_[q] + sizeof(uint32_t) * (size_t(kind) * world_ + rank_);
    cu_check(driver().write32(reinterpret_cast<CUstream>(s), addr, k, CU_STREAM_WRITE_VALUE_DEFAULT),
             "cuStreamWriteValue32");
  }

  // `s` waits until peer q has announced `kind` for collective k (or a later one) to this rank.
  void wait_flag(cudaStream_t s, Milestone kind, int q, uint32_t k) {
    const auto addr = reinterpret_cast<CUdeviceptr>(static_cast<uint32_t*>(flags_.data()) + kind * world_ + q);
    cu_check(driver().wait32(reinterpret_cast<CUstream>(s), addr, k, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32");
  }

  // Peer q's buffer is read no more in collective k: tell q. Written on the gather stream, after
  // the main stream's work so far (which waited for the sum's pulls), so every collective's done
  // comes from one stream, in order.
  void finish_reading(int q, uint32_t k) { write_flag(gather_[q], q, kDone, k); }

  // The gather streams start after everything the main stream has queued.
  void fork_gathers() {
    PT_CUDA_CHECK(cudaEventRecord(fork_, stream_));
    for (int q = 0; q < world_; ++q)
      if (q != rank_) PT_CUDA_CHECK(cudaStreamWaitEvent(gather_[q], fork_, 0));
  }

  // Elements [lo, hi) of t: this rank's chunk ← op over the ranks' chunks, pulled in pieces into
  // two staging slots (a slot is refilled once the sum that last read it, of this collective or
  // an earlier one, is done). The pulls wait for nothing else of this rank: they only write
  // staging, so they run ahead of the main stream's sums and gathers.
  void reduce_my_chunk(const Region& reg, const Tensor& t, int64_t lo, int64_t hi, ReduceOp op, uint32_t k) {
    const int64_t n = hi - lo;
    const int64_t c0 = lo + chunk_begin(n, rank_, world_), c1 = lo + chunk_begin(n, rank_ + 1, world_);
    const size_t esize = dtype_size(t.dtype());
    const int64_t piece = std::max<int64_t>(1, kPieceBytes / int64_t(esize));
    for (int q = 0; q < world_; ++q)
      if (q != rank_) wait_flag(pull_[q], kReady, q, k);
    char* mine = static_cast<char*>(t.data());
    for (int64_t at = c0; at < c1; at += piece) {
      const int64_t len = std::min(piece, c1 - at);
      const int slot = next_slot_;
      next_slot_ ^= 1;
      cuda::CeReduceParams p;
      p.dst = mine + size_t(at) * esize;
      p.n = len;
      p.dtype = t.dtype();
      p.scale = op == ReduceOp::Average ? 1.0f / static_cast<float>(world_) : 1.0f;
      for (int q = 0, k = 0; q < world_; ++q) {
        if (q == rank_) {
          p.src[p.n_src++] = p.dst;
          continue;
        }
        char* stage = static_cast<char*>(staging_.data()) + size_t((slot * (world_ - 1) + k++) * piece) * esize;
        if (slot_used_[slot]) PT_CUDA_CHECK(cudaStreamWaitEvent(pull_[q], summed_[slot], 0));
        PT_CUDA_CHECK(
            cudaMemcpyAsync(stage, peer_ptr(reg, t, q, at), size_t(len) * esize, cudaMemcpyDeviceToDevice, pull_[q]));
        PT_CUDA_CHECK(cudaEventRecord(pulled_[q][slot], pull_[q]));
        PT_CUDA_CHECK(cudaStreamWaitEvent(stream_, pulled_[q][slot], 0));
        p.src[p.n_src++] = stage;
      }
      cuda::ce_reduce(stream_, p, sum_blocks_);
      PT_CUDA_CHECK(cudaEventRecord(summed_[slot], stream_));
      slot_used_[slot] = true;
    }
  }

  // Elements [lo, hi) of t: every peer's chunk ← that peer's copy of it, once the peer has
  // announced `kind` for collective k; then done to that peer (its copy stream's last read).
  void pull_peer_chunks(const Region& reg, const Tensor& t, int64_t lo, int64_t hi, Milestone kind, uint32_t k) {
    const int64_t n = hi - lo;
    const size_t esize = dtype_size(t.dtype());
    fork_gathers();
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      const int64_t c0 = lo + chunk_begin(n, q, world_), c1 = lo + chunk_begin(n, q + 1, world_);
      wait_flag(gather_[q], kind, q, k);
      if (c1 > c0)
        PT_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(t.data()) + size_t(c0) * esize, peer_ptr(reg, t, q, c0),
                                      size_t(c1 - c0) * esize, cudaMemcpyDeviceToDevice, gather_[q]));
      finish_reading(q, k);
    }
  }

  Context& ctx_;
  std::unique_ptr<Communicator> nccl_;  // every collective the copy engines do not take
  int sum_blocks_ = 16;
  cudaStream_t stream_ = nullptr;                   // the collectives' order: sums, reduced announcements
  cudaStream_t announce_ = nullptr;                 // ready announcements, in collective order
  std::vector<cudaStream_t> pull_;                  // by peer rank: pulls for this rank's sum, into staging
  std::vector<cudaStream_t> gather_;                // by peer rank: reduced chunks, all-gather blocks, done
  std::vector<std::array<cudaEvent_t, 2>> pulled_;  // by peer rank and staging slot
  std::vector<cudaEvent_t> gathered_;               // by peer rank: a collective's last gather work
  cudaEvent_t ready_ = nullptr, announced_ = nullptr, fork_ = nullptr, summed_[2] = {nullptr, nullptr};
  int next_slot_ = 0;                // staging slots alternate across pieces and collectives
  std::array<bool, 2> slot_used_{};  // summed_[slot] recorded at least once
  EventPool events_;
  Tensor flags_;                         // (kMilestones, world) uint32: [kind][p], from peer p
  std::vector<CUdeviceptr> peer_flags_;  // by peer rank: that peer's flag array, mapped here
  cudaStream_t complete_ = nullptr;      // collectives' completions, in order
  std::vector<std::pair<std::pair<const char*, const char*>, cudaEvent_t>> pending_;  // maybe incomplete
  std::map<char*, Region> regions_;                                                   // by base address
  Tensor staging_;                                                                    // 2 slots × (world − 1) pieces
  uint32_t seq_ = 0;
};

CeRegistration::~CeRegistration() { comm_.unregister(base_); }

}  // namespace

std::unique_ptr<Communicator> make_ce_communicator(Context& ctx, int comm_sms) {
  return std::make_unique<CeCommunicator>(ctx, comm_sms);
}

}  // namespace pt::parallel
