// `paratrain demo <what>`: small experiments. accumulation: fp32 versus fp16 accumulators.
#include "cli/demo.h"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/context.h"
#include "core/dtype.h"
#include "core/error.h"
#include "io/run_record.h"
#include "parallel/runtime.h"

namespace pt::cli {

namespace {

// IEEE fp16 addition: the fp32 sum of two halves rounded to half is correctly rounded,
// because fp32's 24 bits are at least 2·11 + 2 (double rounding is then innocuous).
uint16_t half_add(uint16_t a, uint16_t b) { return float_to_half_bits(half_bits_to_float(a) + half_bits_to_float(b)); }

int run_demo_accumulation(const std::vector<std::string>& args) {
  int64_t count = 1000;
  double value = 0.01;  // as typed; the fp32 and fp16 cases round it to their type
  std::string out;
  bool overwrite = false;
  po::options_description desc("demo accumulation options");
  // clang-format off
  desc.add_options()
      ("count", po::value(&count)->default_value(count), "number of additions")
      ("value", po::value(&value)->default_value(value, "0.01"), "the value added each time")
      ("out", po::value(&out), "HDF5 results file (default: <subcommand>-<time>.h5)")
      ("overwrite", po::bool_switch(&overwrite), "replace --out if it exists");
  // clang-format on
  const auto vm =
      parse_or_help(desc, args,
                    "paratrain demo accumulation [--count N] [--value X] [--out FILE] [--overwrite]\n\n"
                    "Adds X to zero N times with fp32 and fp16 accumulators and addends (fp16 emulated\n"
                    "exactly on the host) and prints the four sums: why mixed precision accumulates in fp32.");
  if (!vm) return 0;
  PT_CHECK(count > 0 && count <= 1000000000, "--count must be in 1..1e9 (got " + std::to_string(count) + ")");
  PT_CHECK(std::isfinite(value), "--value must be a finite number");

  io::RunRecord record("demo accumulation", out, overwrite);  // refuses an existing file now
  const auto cases = accumulation_experiment(count, static_cast<float>(value));

  io::ResultTable table("accumulation", "sum of --count additions of --value in four precision setups");
  table.add_string("case", "what is added to what")
      .add_string("accumulator", "type of the running sum")
      .add_string("addend", "type of each added value")
      .add_double("sum", "final sum", 8)
      .add_double("error", "sum minus count·value in fp64 (value as typed)", 8);
  for (const auto& c : cases)
    table.add_row()
        .set("case", c.name)
        .set("accumulator", c.accumulator)
        .set("addend", c.addend)
        .set("sum", c.sum)
        .set("error", c.sum - static_cast<double>(count) * value);

  Context ctx(Device::cpu());
  record.set_options(options_as_strings(*vm));
  record.set_attr("count", count);
  record.set_attr("value", value);
  record.collect_environment(ctx);  // collective: every rank takes part
  record.add_table(table);
  const bool root = !parallel::Runtime::initialized() || parallel::Runtime::get().is_root();
  if (root) {
    std::cout << "adding " << value << " to zero " << count << " times:\n\n";
    table.print(std::cout);
    record.commit();
    std::cout << "\nwrote " << record.path() << "\n";
  }
  return 0;
}

}  // namespace

std::vector<AccumulationCase> accumulation_experiment(int64_t count, float value) {
  const uint16_t value_h = float_to_half_bits(value);
  const float value_h_as_f32 = half_bits_to_float(value_h);
  float fp32 = 0.0f, mixed = 0.0f, cast = 0.0f;
  uint16_t fp16 = float_to_half_bits(0.0f);
  for (int64_t i = 0; i < count; ++i) {
    fp32 += value;
    fp16 = half_add(fp16, value_h);
    mixed += half_bits_to_float(value_h);  // torch: fp32 tensor += fp16 tensor promotes the addend
    cast += value_h_as_f32;                // torch: s += x.type(torch.float32)
  }
  return {
      {"fp32", "fp32", "fp32", fp32},
      {"fp16", "fp16", "fp16", half_bits_to_float(fp16)},
      {"fp16 into fp32", "fp32", "fp16", mixed},
      {"fp16 cast to fp32", "fp32", "fp16 cast to fp32", cast},
  };
}

const std::vector<Subcommand>& demo_subcommands() {
  static const std::vector<Subcommand> table = {
      {"accumulation", "fp32 vs fp16 accumulation: add 0.01 a thousand times four ways", run_demo_accumulation},
  };
  return table;
}

}  // namespace pt::cli
