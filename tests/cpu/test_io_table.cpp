// ResultTable: typed cells, validation with messages that name the hole, aligned printing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "io/table.h"

namespace pt::io {
namespace {

// Expects `fn` to throw pt::Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

ResultTable example() {
  ResultTable t("bench_model", "train step timings");
  t.add_string("size", "model size").add_int("context", "tokens").add_double("fwd_ms", "forward, ms", 2);
  t.add_row().set("size", "small").set("context", 128).set("fwd_ms", 1.234);
  t.add_row().set("size", "xl").set("context", 1024).set("fwd_ms", 105.5);
  return t;
}

TEST(IoTable, StoresTypedCells) {
  ResultTable t = example();
  ASSERT_EQ(t.rows(), 2u);
  ASSERT_EQ(t.columns().size(), 3u);
  EXPECT_EQ(t.column_index("context"), 1);
  EXPECT_EQ(t.column_index("nope"), -1);
  EXPECT_EQ(std::get<std::string>(t.at(1, 0)), "xl");
  EXPECT_EQ(std::get<int64_t>(t.at(1, 1)), 1024);
  EXPECT_DOUBLE_EQ(std::get<double>(t.at(0, 2)), 1.234);
  EXPECT_EQ(t.columns()[2].print_precision, 2);
  EXPECT_EQ(t.columns()[2].description, "forward, ms");
  EXPECT_NO_THROW(t.validate());
}

TEST(IoTable, FillUnsetMarksMissingMeasurements) {
  ResultTable t("fill");
  t.add_string("name").add_int("bytes").add_double("ms").add_string("note");
  t.add_row().set("name", "oom").set("bytes", int64_t{7}).fill_unset();
  EXPECT_NO_THROW(t.validate());
  EXPECT_EQ(std::get<std::string>(t.at(0, 0)), "oom");
  EXPECT_EQ(std::get<int64_t>(t.at(0, 1)), 7) << "set cells are kept";
  EXPECT_TRUE(std::isnan(std::get<double>(t.at(0, 2))));
  EXPECT_EQ(std::get<std::string>(t.at(0, 3)), "");
}

TEST(IoTable, PrintsAlignedWithHeaderAndRule) {
  std::ostringstream os;
  example().print(os);
  // Strings left-aligned, numbers right-aligned, doubles at the column's precision.
  const std::string expected = "size   context  fwd_ms\n"
                               "----------------------\n"
                               "small      128    1.23\n"
                               "xl        1024  105.50\n";
  EXPECT_EQ(os.str(), expected);
}

TEST(IoTable, PrintsNonFiniteAndEmptyTables) {
  ResultTable t("t");
  t.add_double("x_ms", "", 1).add_string("note");
  t.add_row().set("x_ms", std::numeric_limits<double>::quiet_NaN()).set("note", "oom");
  t.add_row().set("x_ms", -std::numeric_limits<double>::infinity()).set("note", "");
  std::ostringstream os;
  t.print(os);
  EXPECT_EQ(os.str(), "x_ms  note\n----------\n nan  oom\n-inf\n");

  ResultTable empty("e");
  empty.add_int("n");
  std::ostringstream os2;
  empty.print(os2);
  EXPECT_EQ(os2.str(), "n\n-\n");
}

TEST(IoTable, IntegerIntoDoubleColumnIsAllowed) {
  ResultTable t("t");
  t.add_double("batch");
  t.add_row().set("batch", 4);
  EXPECT_DOUBLE_EQ(std::get<double>(t.at(0, 0)), 4.0);
}

TEST(IoTable, RejectsUnknownColumnAndWrongType) {
  ResultTable t = example();
  expect_error([&] { t.add_row().set("ctx", 1); }, {"bench_model", "no column 'ctx'", "context"});
  ResultTable u = example();
  expect_error([&] { u.add_row().set("context", 1.5); }, {"'context'", "int", "not double"});
  ResultTable v = example();
  expect_error([&] { v.add_row().set("fwd_ms", "fast"); }, {"'fwd_ms'", "not string"});
}

TEST(IoTable, IncompleteRowIsNamedBeforeTheNextRowOrOnOutput) {
  ResultTable t = example();
  t.add_row().set("size", "medium").set("fwd_ms", 3.0);
  expect_error([&] { t.validate(); }, {"row 2", "'context'"});
  std::ostringstream os;
  expect_error([&] { t.print(os); }, {"row 2", "'context'"});
  expect_error([&] { t.add_row(); }, {"row 2", "'context'"});
}

TEST(IoTable, RejectsBadColumns) {
  ResultTable t("t");
  t.add_int("a");
  expect_error([&] { t.add_double("a"); }, {"duplicate column 'a'"});
  expect_error([&] { t.add_int(""); }, {"needs a name"});
  expect_error([&] { t.add_double("p", "", 40); }, {"precision"});
  t.add_row().set("a", 1);
  expect_error([&] { t.add_int("b"); }, {"'b'", "after rows"});
  ResultTable none("none");
  expect_error([&] { none.add_row(); }, {"add columns before rows"});
  expect_error([] { ResultTable(""); }, {"needs a name"});
}

}  // namespace
}  // namespace pt::io
