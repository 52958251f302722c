// Backend-independent parts of the Communicator: names, the timeout, buffer checks, factory.
#include "parallel/communicator.h"
#include "core/enum_names.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/accelerator_specs.h"
#include "core/env.h"
#include "core/error.h"
#include "parallel/runtime.h"

namespace pt::parallel {

// Defined in comm_mpi.cpp and comm_nccl.cpp.
std::unique_ptr<Communicator> make_mpi_communicator(Context& ctx);
std::unique_ptr<Communicator> make_nccl_communicator(Context& ctx, int comm_sms);
std::unique_ptr<Communicator> make_ce_communicator(Context& ctx, int comm_sms);

namespace {
constexpr EnumName<Backend> kBackends[] = {{Backend::NCCL, "nccl"}, {Backend::MPI, "mpi"}};
constexpr EnumName<CommEngine> kEngines[] = {
    {CommEngine::NCCL, "nccl"}, {CommEngine::CE, "ce"}, {CommEngine::Auto, "auto"}};
}  // namespace

CommEngine comm_engine_from_name(const std::string& name) { return enum_from_name(kEngines, name, "--comm-engine"); }
const char* comm_engine_name(CommEngine e) { return enum_name(kEngines, e); }

Backend backend_from_name(const std::string& name) {
  return enum_from_name(kBackends, name, "the communication backend");
}
const char* backend_name(Backend b) { return enum_name(kBackends, b); }

Backend backend_for(Device device) { return device.is_cuda() ? Backend::NCCL : Backend::MPI; }

namespace {
double timeout_override = 0;  // set_comm_timeout_s (--comm-timeout); 0: the environment's or 300 s
}

void set_comm_timeout_s(double seconds) {
  PT_CHECK(std::isfinite(seconds) && seconds > 0,
           "--comm-timeout must be a positive number of seconds, got " + std::to_string(seconds));
  timeout_override = seconds;
}

double comm_timeout_s() {
  // Read once, and always (parse_or_help asks at start-up): every rank must agree for the whole
  // run, and a malformed value is an error even where --comm-timeout overrides it.
  static const double from_env = env::positive_number("PARATRAIN_COMM_TIMEOUT_S", "seconds").value_or(300.0);
  return timeout_override > 0 ? timeout_override : from_env;
}

void comm_fatal(const std::string& op, const std::string& reason) {
  const std::string what = "communication failure in " + op + ": " + reason;
  if (Runtime::initialized()) Runtime::get().abort(what);
  // Without a runtime there is no job to end; the caller's process goes down instead.
  PT_FAIL(what);
}

void Communicator::check_buffer(const Tensor& t, const char* op) const {
  PT_CHECK(t.defined(), std::string(op) + ": undefined tensor");
  PT_CHECK(t.is_contiguous(), std::string(op) + ": tensor must be contiguous, got " + t.describe());
  PT_CHECK(t.device() == device_, std::string(op) + " on the " + name() + " communicator needs " + device_.str() +
                                      " buffers, got " + t.describe());
}

bool Communicator::check_blocks(const Tensor& small, const Tensor& big, const char* op) const {
  check_buffer(small, op);
  check_buffer(big, op);
  PT_CHECK(small.dtype() == big.dtype(),
           std::string(op) + ": send and receive dtypes differ (" + small.describe() + " vs " + big.describe() + ")");
  PT_CHECK(big.numel() == small.numel() * world_,
           std::string(op) + ": the large buffer must hold world_size (" + std::to_string(world_) + ") blocks of " +
               std::to_string(small.numel()) + " elements, got " + big.describe());
  const size_t esize = dtype_size(small.dtype());
  auto* s = static_cast<const char*>(small.data());
  auto* b = static_cast<const char*>(big.data());
  if (s == b + static_cast<size_t>(rank_) * small.nbytes()) return true;
  const bool disjoint = s + small.nbytes() <= b || b + big.nbytes() <= s;
  PT_CHECK(disjoint || small.numel() == 0, std::string(op) + ": buffers overlap but the small one is not block " +
                                               std::to_string(rank_) + " of the large one (element size " +
                                               std::to_string(esize) + ")");
  return false;
}

namespace {
// --comm-sms auto by GPU: the row of the accelerator the device's name denotes (core's
// match_accelerator, by preset), else kAutoCommSmsDefault. The fastest count for the XL model's
// overlapped strategies (bucketed, ZeRO-1): docs/reports/2026-11-27_comm-sms-auto_4xh100.md.
struct AutoCommSmsRow {
  const char* preset;
  int comm_sms;
};
constexpr AutoCommSmsRow kAutoCommSms[] = {
    {"h100-sxm", 32},
    {"h200", 32},
};
// Every other GPU, not measured: 16, the best of the first sweep on H200s
// (docs/reports/2026-11-21_comm-sms_2xh200.md).
constexpr int kAutoCommSmsDefault = 16;
}  // namespace

int auto_comm_sms_for(const std::string& device_name, int sm_count) {
  int comm_sms = kAutoCommSmsDefault;
  if (const AcceleratorSpec* spec = match_accelerator(device_name))
    for (const AutoCommSmsRow& row : kAutoCommSms)
      if (spec->preset == row.preset) comm_sms = row.comm_sms;
  return std::min(comm_sms, sm_count / 4);
}

int auto_comm_sms(const Context& ctx) {
  return ctx.is_cuda() ? auto_comm_sms_for(ctx.target().name, ctx.sm_count()) : 0;
}

namespace {
// The copy engines, or why they cannot serve this job. Collective: every rank gets the same answer.
std::unique_ptr<Communicator> try_copy_engines(Context& ctx, int comm_sms, std::string& why) {
  const Runtime& rt = Runtime::get();
  if (rt.world_size() < 2) {
    why = "one rank has no peer";
    return nullptr;
  }
  if (rt.node_count() > 1) {
    why = "the ranks are on " + std::to_string(rt.node_count()) + " nodes" +
          (rt.emulated_nodes() ? " (PARATRAIN_TEST_SPLIT_NODES)" : "");
    return nullptr;
  }
  try {
    return make_ce_communicator(ctx, comm_sms);
  } catch (const CeUnavailable& e) {
    why = e.what();
    return nullptr;
  }
}
}  // namespace

std::unique_ptr<Communicator> make_communicator(Backend backend, Context& ctx, int comm_sms, CommEngine engine) {
  PT_CHECK(Runtime::initialized(), "make_communicator: parallel::Runtime::init has not run");
  const bool ce_sms = comm_sms == kCommSmsAuto && engine != CommEngine::NCCL;
  if (comm_sms == kCommSmsAuto) comm_sms = auto_comm_sms(ctx);
  PT_CHECK(comm_sms >= 0, "--comm-sms must be auto or >= 0, got " + std::to_string(comm_sms));
  if (backend == Backend::NCCL) {
    PT_CHECK(ctx.is_cuda(), "the NCCL backend needs a CUDA device (this rank runs on " + ctx.device().str() +
                                "; use the mpi backend)");
    PT_CHECK(comm_sms < ctx.sm_count(), "--comm-sms " + std::to_string(comm_sms) + " leaves none of the " +
                                            std::to_string(ctx.sm_count()) + " SMs to compute");
    if (engine == CommEngine::NCCL) return make_nccl_communicator(ctx, comm_sms);
    std::string why;
    if (auto ce = try_copy_engines(ctx, ce_sms ? 0 : comm_sms, why)) return ce;
    PT_CHECK(engine == CommEngine::Auto, "--comm-engine ce: the copy engines cannot serve this job: " + why);
    return make_nccl_communicator(ctx, comm_sms);
  }
  PT_CHECK(engine != CommEngine::CE,
           "--comm-engine ce needs CUDA devices (this rank runs on " + ctx.device().str() + ")");
  return make_mpi_communicator(ctx);
}

}  // namespace pt::parallel
