// `bench allreduce` over 3 CPU ranks: every collective of its table runs, checks its result
// exactly (a wrong element fails the run) and reports nccl-tests' bus-bandwidth factor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "cpu/test_io_h5.h"

namespace pt::test {
namespace {

using namespace pt::test::h5read;

TEST(BenchCollectives, EveryCollectiveChecksItsResultAndScalesBusBandwidth) {
  const std::string out = scratch_dir("bench_collectives") + "/c.h5";
  const CliResult r =
      run_paratrain_mpi(3, "bench allreduce --backend mpi --collective all_reduce,reduce_scatter,all_gather,broadcast "
                           "--bytes 4K,100K --steps 2 --warmup 1 --out " +
                               out);
  ASSERT_EQ(r.rc, 0) << r.output;
  Handle f = open_file(out);
  Handle d = open_dataset(f, "allreduce");
  const auto names = read_string_field(d, "collective");
  const auto wrong = read_field<int64_t>(d, "wrong", H5T_NATIVE_INT64);
  const auto count = read_field<int64_t>(d, "count", H5T_NATIVE_INT64);
  const auto algbw = read_field<double>(d, "algbw_GBps", H5T_NATIVE_DOUBLE);
  const auto busbw = read_field<double>(d, "busbw_GBps", H5T_NATIVE_DOUBLE);
  ASSERT_EQ(names.size(), 8u);
  const std::vector<std::string> order = {"all_reduce", "all_reduce", "reduce_scatter", "reduce_scatter",
                                          "all_gather", "all_gather", "broadcast",      "broadcast"};
  EXPECT_EQ(names, order);
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(wrong[i], 0) << names[i];
    EXPECT_EQ(count[i] % 3, 0) << "whole blocks, one per rank";
    const double factor = names[i] == "all_reduce" ? 4.0 / 3 : names[i] == "broadcast" ? 1.0 : 2.0 / 3;
    EXPECT_NEAR(busbw[i] / algbw[i], factor, 1e-9) << names[i];
  }
  const CliResult bad = run_paratrain_mpi(
      2, "bench allreduce --backend mpi --collective gather --out " + scratch_dir("bench_collectives_bad") + "/x.h5");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.output.find("unknown collective 'gather'"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace pt::test
