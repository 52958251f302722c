// `paratrain demo accumulation`: the four sums against known values and an independent fp16
// emulation written here, and the subcommand end to end (table in its HDF5 file).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli/demo.h"
#include "common/test_util.h"
#include "cpu/test_io_h5.h"

namespace pt::cli {
namespace {

using namespace pt::test::h5read;

// Round to the nearest fp16 value (ties to even), in fp64: normal numbers keep 11
// significant bits, below 2^-14 the spacing is fixed at 2^-24. No overflow in these tests.
double round_to_half(double x) {
  if (x == 0) return x;
  int e = 0;
  std::frexp(x, &e);  // x = m·2^e, 0.5 ≤ |m| < 1
  const int exp = std::max(e - 11, -24);
  return std::nearbyint(std::ldexp(x, -exp)) * std::ldexp(1.0, exp);
}

const AccumulationCase& find(const std::vector<AccumulationCase>& cases, const std::string& name) {
  for (const auto& c : cases)
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

TEST(DemoAccumulation, KnownSumsForAThousandTimesPointZeroOne) {
  const auto cases = accumulation_experiment(1000, 0.01f);
  ASSERT_EQ(cases.size(), 4u);
  // The course's numbers: 10.0001, 9.9531, 10.0021, 10.0021 (here exactly).
  EXPECT_EQ(find(cases, "fp32").sum, 10.000133514404296875);
  EXPECT_EQ(find(cases, "fp16").sum, 9.953125);
  EXPECT_EQ(find(cases, "fp16 into fp32").sum, 10.00213623046875);  // 1000 × fp16(0.01), exact
  EXPECT_EQ(find(cases, "fp16 cast to fp32").sum, 10.00213623046875);
  EXPECT_EQ(find(cases, "fp16").accumulator, "fp16");
  EXPECT_EQ(find(cases, "fp16 into fp32").accumulator, "fp32");
}

TEST(DemoAccumulation, MatchesAnIndependentEmulation) {
  for (auto [count, value] : {std::pair<int64_t, float>{1000, 0.01f}, {5000, 0.1f}, {777, 1.0f / 3.0f}}) {
    float f32 = 0;
    double f16 = 0;
    float mixed = 0;
    const double v16 = round_to_half(value);
    for (int64_t i = 0; i < count; ++i) {
      f32 += value;
      f16 = round_to_half(f16 + v16);
      mixed += static_cast<float>(v16);
    }
    const auto cases = accumulation_experiment(count, value);
    EXPECT_EQ(find(cases, "fp32").sum, f32) << count << " × " << value;
    EXPECT_EQ(find(cases, "fp16").sum, f16) << count << " × " << value;
    EXPECT_EQ(find(cases, "fp16 into fp32").sum, mixed) << count << " × " << value;
    EXPECT_EQ(find(cases, "fp16 cast to fp32").sum, mixed) << count << " × " << value;
  }
  // An fp16 sum of 0.1s stalls at 256, where half an ulp (0.125) exceeds the addend.
  EXPECT_EQ(find(accumulation_experiment(5000, 0.1f), "fp16").sum, 256.0);
}

int run(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(DemoAccumulation, SubcommandPrintsAndRecordsTheTable) {
  const std::string bin = test::paratrain_binary();
  const std::string dir = test::scratch_dir("demo_accumulation");
  const std::string out = dir + "/acc.h5", log = dir + "/log.txt";
  ASSERT_EQ(run(bin + " demo accumulation --out " + out + " > " + log + " 2>&1"), 0);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("9.95312500"), std::string::npos) << text;

  Handle f = open_file(out);
  ASSERT_GE(f.id, 0);
  Handle d = open_dataset(f, "/accumulation");
  ASSERT_GE(d.id, 0);
  EXPECT_EQ(read_string_field(d, "case"),
            (std::vector<std::string>{"fp32", "fp16", "fp16 into fp32", "fp16 cast to fp32"}));
  const auto sums = read_field<double>(d, "sum", H5T_NATIVE_DOUBLE);
  EXPECT_EQ(sums, (std::vector<double>{10.000133514404296875, 9.953125, 10.00213623046875, 10.00213623046875}));
  EXPECT_EQ(string_attr(f, "option.count"), "1000");
  EXPECT_EQ(string_attr(f, "subcommand"), "demo accumulation");

  // A second run refuses to replace the file without --overwrite, and leaves it alone.
  EXPECT_NE(run(bin + " demo accumulation --out " + out + " > " + log + " 2>&1"), 0);
  std::ifstream in2(log);
  const std::string err((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("already exists"), std::string::npos) << err;
  EXPECT_EQ(run(bin + " demo accumulation --count 10 --overwrite --out " + out + " > /dev/null"), 0);
}

}  // namespace
}  // namespace pt::cli
