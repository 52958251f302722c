#include "cli/option_rules.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <sstream>
#include <type_traits>

#include "core/error.h"

namespace pt::cli {

namespace po = boost::program_options;

namespace {

// Spellings that no option has any more, each with the names that replaced it: the one the
// subcommand knows goes in the hint. Every concept has one spelling in every subcommand, and an
// option that sweeps takes a comma list under that same name.
const std::vector<std::pair<std::string, std::vector<std::string>>> kRetired = {
    {"context", {"context-length"}},
    {"contexts", {"context-length"}},
    {"seq", {"context-length"}},
    {"batch", {"batch-size"}},
    {"iters", {"steps"}},
    {"dtype", {"precision"}},
    {"precisions", {"precision"}},
    {"impl", {"attention"}},
    {"heads", {"num-heads"}},
    {"sizes", {"model", "bytes"}},
    {"size", {"model", "bytes"}},
    {"collectives", {"collective"}},
};

// A numeric option's range, in the type its value is used in. min_open / max_open: the bound
// itself is refused. zero_ok: 0 is accepted below `min` (it means a documented default: the
// option's --help says which). fp32: the value is used as a float (the optimizer's
// hyperparameters, the gradient clip), so one that rounds to 0, to a subnormal or to infinity
// there is refused rather than silently changed. An integer used as an int (or a size no run
// could allocate beyond it) has max kInt32Max.
struct NumericRule {
  const char* name;
  double min, max;
  bool min_open, max_open;
  bool zero_ok;
  bool fp32;
};
constexpr double kInf = HUGE_VAL;
constexpr double kInt32Max = std::numeric_limits<int32_t>::max();
constexpr bool kOpen = true, kClosed = false, kZeroOk = true, kNoZero = false, kFp32 = true, kFp64 = false;

// A count held in an int64_t, a size held in an int, and the other shapes below.
constexpr NumericRule count(const char* name, double min = 1, bool zero_ok = kNoZero) {
  return {name, min, kInf, kClosed, kClosed, zero_ok, kFp64};
}
constexpr NumericRule size32(const char* name, double min = 1, bool zero_ok = kNoZero) {
  return {name, min, kInt32Max, kClosed, kClosed, zero_ok, kFp64};
}
constexpr NumericRule positive(const char* name, bool fp32, bool zero_ok = kNoZero) {
  return {name, 0, kInf, kOpen, kClosed, zero_ok, fp32};
}
constexpr NumericRule non_negative(const char* name, bool fp32) {
  return {name, 0, kInf, kClosed, kClosed, kNoZero, fp32};
}

const NumericRule kNumericRules[] = {
    count("steps"),
    size32("warmup", 0),
    count("warmup-steps", 0),
    size32("batch-size"),
    size32("context-length"),
    size32("d-model"),
    size32("num-layers"),
    size32("num-heads"),
    size32("d-ff"),
    size32("head-dim"),
    size32("vocab-size", 1, kZeroOk),  // token ids are int32; bench ddp: 0 keeps the size's vocabulary
    positive("lr", kFp32),
    non_negative("min-lr", kFp32),
    non_negative("weight-decay", kFp32),
    {"beta1", 0, 1, kClosed, kOpen, kNoZero, kFp32},
    {"beta2", 0, 1, kClosed, kOpen, kNoZero, kFp32},
    positive("eps", kFp32),
    non_negative("grad-clip", kFp32),   // 0: no clipping
    count("cosine-steps", 1, kZeroOk),  // 0: --steps
    count("save-every", 1, kZeroOk),    // 0: only at the end
    count("log-every"),
    count("eval-every", 1, kZeroOk),   // 0: only after the last step
    count("eval-tokens", 1, kZeroOk),  // 0: eight batches
    size32("grad-accum"),
    non_negative("bucket-mb", kFp64),         // 0: one bucket per parameter
    positive("peak-tflops", kFp64, kZeroOk),  // 0: from the device
    positive("budget-ms", kFp64, kZeroOk),    // 0: always --steps
    positive("comm-timeout", kFp64),
    size32("devices"),
    size32("tp"),
    size32("pp"),
    size32("gpus-per-node"),
    size32("algos"),
    positive("memory-gb", kFp64),
    positive("hbm-gbps", kFp64),
    positive("link-gbps", kFp64),
    positive("inter-node-gbps", kFp64),
    count("count", 0),
    {"value", -65504, 65504, kClosed, kClosed, kNoZero, kFp64},  // demo: finite in fp16 too
    size32("update-sms", 0),                                     // 0: GEMMs keep every SM
};

const NumericRule* rule_for(const std::string& name) {
  for (const NumericRule& r : kNumericRules)
    if (name == r.name) return &r;
  return nullptr;
}

// The shortest text that reads back as v ("1e-50", "0.99999999999", "4294967298").
std::string number_text(double v) {
  for (int digits = 6;; ++digits) {
    std::ostringstream o;
    o << std::setprecision(digits) << v;
    if (digits >= 17 || std::strtod(o.str().c_str(), nullptr) == v) return o.str();
  }
}

std::string range_text(const NumericRule& r) {
  std::string out = (r.min_open ? "> " : ">= ") + number_text(r.min);
  if (r.max < kInf) out += (r.max_open ? " and < " : " and <= ") + number_text(r.max);
  if (r.zero_ok) out += ", or 0 (see --help)";
  return out;
}

// The integer type an option's value is parsed into, as [lo, hi]; false for other types.
bool integer_range(const po::value_semantic* semantic, long double& lo, long double& hi) {
  auto is = [&](auto* type_tag) {
    using T = std::remove_pointer_t<decltype(type_tag)>;
    if (!dynamic_cast<const po::typed_value<T>*>(semantic)) return false;
    lo = static_cast<long double>(std::numeric_limits<T>::min());
    hi = static_cast<long double>(std::numeric_limits<T>::max());
    return true;
  };
  return is(static_cast<int*>(nullptr)) || is(static_cast<int64_t*>(nullptr)) || is(static_cast<uint64_t*>(nullptr));
}

// The value of a numeric option as a double, if it is one.
bool numeric_value(const boost::any& v, double& out) {
  return visit_option_value<int, int64_t, uint64_t, double, float>(v, [&](auto x) { out = static_cast<double>(x); });
}

}  // namespace

void refuse_retired_spellings(const po::options_description& desc, const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a.rfind("--", 0) != 0) continue;
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (desc.find_nothrow(name, false)) continue;
    for (const auto& [old, replacements] : kRetired) {
      if (name != old) continue;
      for (const std::string& now : replacements)
        if (desc.find_nothrow(now, false))
          throw po::error("--" + old + " is spelled --" + now + " now (one spelling per concept in every subcommand)");
    }
  }
}

void check_numeric(const std::string& flag, double value) {
  PT_CHECK(std::isfinite(value), "--" + flag + " must be a finite number, got " + number_text(value));
  const NumericRule* r = rule_for(flag);
  if (!r) return;
  if (r->zero_ok && value == 0) return;
  // The value the program computes with: a nonzero one must stay a normal number in its type.
  const double held = r->fp32 ? static_cast<float>(value) : value;
  const bool normal = r->fp32 ? std::isnormal(static_cast<float>(value)) : std::isnormal(value);
  if (value != 0 && !normal) {
    const char* became = std::isinf(held) ? "overflows to infinity" : held == 0 ? "rounds to 0" : "is subnormal";
    PT_FAIL("--" + flag + " " + number_text(value) + " " + became + " in " + (r->fp32 ? "fp32" : "fp64") +
            ", the type it is used in: a nonzero value must be a normal number, of magnitude " +
            (r->fp32 ? "1.2e-38 to 3.4e+38" : "2.2e-308 to 1.8e+308"));
  }
  const bool ok = (r->min_open ? held > r->min : held >= r->min) && (r->max_open ? held < r->max : held <= r->max);
  if (ok) return;
  const std::string rounded = held == value ? "" : " (" + number_text(held) + " in fp32, the type it is used in)";
  PT_FAIL("--" + flag + " must be " + range_text(*r) + ", got " + number_text(value) + rounded);
}

void check_integer_words(const po::options_description& desc, const po::parsed_options& parsed) {
  for (const po::option& o : parsed.options) {
    if (o.unregistered || o.position_key != -1) continue;
    const po::option_description* d = desc.find_nothrow(o.string_key, false);
    long double lo = 0, hi = 0;
    if (!d || !integer_range(d->semantic().get(), lo, hi)) continue;
    for (const std::string& word : o.value) {
      // The whole word as a decimal integer; anything else is left to Boost's own "invalid" error.
      const char* text = word.c_str();
      char* end = nullptr;
      errno = 0;
      const long double v = std::strtold(text, &end);
      const bool integer = end != text && *end == '\0' && word.find_first_of(".eExXpPnN") == std::string::npos;
      if (!integer) continue;
      PT_CHECK(errno != ERANGE && v >= lo && v <= hi, "--" + o.string_key + " " + word +
                                                          " is out of range: it must be an integer from " +
                                                          std::to_string(static_cast<long long>(lo)) + " to " +
                                                          std::to_string(static_cast<unsigned long long>(hi)));
    }
  }
}

void check_option_values(const po::variables_map& vm) {
  for (const auto& [name, value] : vm) {
    if (value.defaulted()) continue;  // the program's own defaults are in range by construction
    const boost::any& v = value.value();
    if (const auto* s = boost::any_cast<std::string>(&v)) {
      PT_CHECK(!s->empty(), "--" + name + " was given an empty value; leave the option out for its default");
    } else if (const auto* vs = boost::any_cast<std::vector<std::string>>(&v)) {
      bool any = false;
      for (const std::string& w : *vs) any = any || !w.empty();
      PT_CHECK(any, "--" + name + " was given an empty list; leave the option out for its default");
    } else if (double d = 0; numeric_value(v, d)) {
      check_numeric(name, d);
    }
  }
}

void refuse_stray_words(const std::vector<std::string>& stray) {
  if (stray.empty()) return;
  std::string words;
  for (const std::string& w : stray) words += (words.empty() ? "'" : ", '") + w + "'";
  PT_FAIL("unexpected " + std::string(stray.size() == 1 ? "word " : "words ") + words +
          " on the command line: every value follows its --option (lists take commas: --model small,xl), "
          "and switches such as --overwrite take no value");
}

}  // namespace pt::cli
