// main of the distributed suite (run under `mpiexec -n 2`): MPI through parallel::Runtime; rank 0
// prints the usual GoogleTest report, the other ranks print only their failures, tagged.
#include <gtest/gtest.h>

#include <cstdio>

#include "parallel/dist_util.h"
#include "parallel/runtime.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (t.result()->Failed()) std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, t.test_suite_name(), t.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  auto& rt = pt::parallel::Runtime::init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (!rt.is_root()) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rt.rank()));
  }
  const int rc = RUN_ALL_TESTS();
  pt::test::release_backends();
  rt.finalize();
  return rc;
}
