#pragma once
// Helpers of the distributed suite: one context and communicator per backend for the whole
// run, backend-parameterised fixtures (Mpi/…, Nccl/…), and cross-rank checks that use raw MPI
// so they do not depend on the Communicator under test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/context.h"
#include "parallel/communicator.h"
#include "parallel/runtime.h"

namespace pt::test {

// Whether NCCL tests can run: at least two ranks and a GPU for every rank of this node, found
// as the program finds it (the only visible one under per-rank binding, else the local rank's).
bool nccl_usable();
// The context of a backend: the CPU for MPI, this rank's GPU for NCCL (made on first use).
Context& backend_context(parallel::Backend b);
// The communicator of a backend (with --comm-sms comm_sms), created once per pair
// (collective: every rank reaches it together). NCCL's takes --comm-engine from
// PARATRAIN_TEST_COMM_ENGINE (default nccl), so the whole NCCL suite runs on either engine.
parallel::CommEngine test_comm_engine();
// A communicator on this rank's GPU with the given engine whatever the environment says (made
// once each; collective).
parallel::Communicator& engine_comm(parallel::CommEngine engine);
parallel::Communicator& backend_comm(parallel::Backend b, int comm_sms = 0);
// Destroys the communicators and contexts (main calls it before MPI_Finalize).
void release_backends();

// Skips unless the backend can run here (same decision on every rank).
#define PT_REQUIRE_BACKEND(b)                                               \
  do {                                                                      \
    if ((b) == ::pt::parallel::Backend::NCCL && !::pt::test::nccl_usable()) \
      GTEST_SKIP() << "NCCL tests need >= 2 ranks and one GPU per rank";    \
  } while (0)

// Fixture for tests that run once per backend; instantiated as Mpi/<Suite> and Nccl/<Suite>.
class BackendTest : public ::testing::TestWithParam<parallel::Backend> {
 protected:
  void SetUp() override {
    PT_REQUIRE_BACKEND(GetParam());
    ASSERT_GE(parallel::Runtime::get().world_size(), 2) << "run the dist suite under mpiexec -n 2 (or more)";
  }
  parallel::Backend backend() const { return GetParam(); }
  Context& ctx() const { return backend_context(GetParam()); }
  parallel::Communicator& comm() const { return backend_comm(GetParam()); }
  int rank() const { return parallel::Runtime::get().rank(); }
  int world() const { return parallel::Runtime::get().world_size(); }
};
std::string backend_param_name(const ::testing::TestParamInfo<parallel::Backend>& info);
#define PT_INSTANTIATE_BACKENDS(Suite)                                                    \
  INSTANTIATE_TEST_SUITE_P(Mpi, Suite, ::testing::Values(::pt::parallel::Backend::MPI),   \
                           ::pt::test::backend_param_name);                               \
  INSTANTIATE_TEST_SUITE_P(Nccl, Suite, ::testing::Values(::pt::parallel::Backend::NCCL), \
                           ::pt::test::backend_param_name)

// Raw-MPI checks, independent of the code under test.
std::vector<double> mpi_bcast_from_root(std::vector<double> v);  // rank 0's vector on all ranks
bool mpi_all_true(bool ok);                                      // logical AND over ranks
std::vector<double> mpi_all_gather(double v);                    // every rank's value, rank order

// A tensor of fp32 values on ctx's device, and back.
Tensor device_f32(Context& ctx, const std::vector<double>& values);
std::vector<double> host_f64(Context& ctx, const Tensor& t);

// A backend's shared context (which outlives the test) at another precision, and with or without
// FP8 Linear GEMMs (Context::set_fp8_linear: on an fp32 CPU context, the emulation), for one
// scope: both are restored at its end. Set before building a model.
class PrecisionScope {
 public:
  PrecisionScope(Context& ctx, Precision precision, bool fp8_linear = false)
      : ctx_(ctx), precision_(ctx.precision()), fp8_linear_(ctx.fp8_linear()) {
    ctx.set_precision(precision);
    ctx.set_fp8_linear(fp8_linear);
  }
  ~PrecisionScope() {
    ctx_.set_precision(precision_);
    ctx_.set_fp8_linear(fp8_linear_);
  }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Context& ctx_;
  Precision precision_;
  bool fp8_linear_;
};

}  // namespace pt::test
