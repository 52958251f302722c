#include "cli/option_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "core/error.h"

namespace pt::cli {

namespace po = boost::program_options;

namespace {

// One concept, its spellings: the first is the one the docs use.
const std::vector<std::vector<std::string>> kSpellings = {
    {"context-length", "context", "contexts", "seq"},  // tokens per sequence, T
    {"batch-size", "batch"},                           // sequences per step
    {"precision", "precisions", "dtype"},
    {"num-heads", "heads"},
    {"attention", "impl"},
    {"steps", "iters"},  // measured (bench) or trained (train) steps
    {"sizes", "size"},
    {"collectives", "collective"},
};

// A numeric option's range. min_open: the bound itself is refused. zero_ok: 0 is accepted
// below `min` (it means a documented default: the option's --help says which).
struct NumericRule {
  const char* name;
  double min, max;
  bool min_open;
  bool zero_ok;
};
constexpr double kInf = HUGE_VAL;
const NumericRule kNumericRules[] = {
    {"steps", 1, kInf, false, false},
    {"iters", 1, kInf, false, false},
    {"warmup", 0, kInf, false, false},
    {"warmup-steps", 0, kInf, false, false},
    {"batch-size", 1, kInf, false, false},
    {"batch", 1, kInf, false, false},
    {"context-length", 1, kInf, false, false},
    {"context", 1, kInf, false, false},
    {"contexts", 1, kInf, false, false},
    {"seq", 1, kInf, false, false},
    {"d-model", 1, kInf, false, false},
    {"num-layers", 1, kInf, false, false},
    {"num-heads", 1, kInf, false, false},
    {"heads", 1, kInf, false, false},
    {"d-ff", 1, kInf, false, false},
    {"head-dim", 1, kInf, false, false},
    {"vocab-size", 1, kInf, false, true},  // bench ddp: 0 keeps the size's vocabulary
    {"lr", 0, kInf, true, false},
    {"min-lr", 0, kInf, false, false},
    {"weight-decay", 0, kInf, false, false},
    {"beta1", 0, 1, false, false},
    {"beta2", 0, 1, false, false},
    {"eps", 0, kInf, true, false},
    {"grad-clip", 0, kInf, false, false},    // 0: no clipping
    {"cosine-steps", 1, kInf, false, true},  // 0: --steps
    {"save-every", 1, kInf, false, true},    // 0: only at the end
    {"log-every", 1, kInf, false, false},
    {"grad-accum", 1, kInf, false, false},
    {"bucket-mb", 0, kInf, false, false},  // 0: one bucket per parameter
    {"peak-tflops", 0, kInf, true, true},  // 0: from the device
    {"budget-ms", 0, kInf, true, false},
    {"devices", 1, kInf, false, false},
    {"tp", 1, kInf, false, false},
    {"pp", 1, kInf, false, false},
    {"gpus-per-node", 1, kInf, false, false},
    {"memory-gb", 0, kInf, true, false},
    {"hbm-gbps", 0, kInf, true, false},
    {"link-gbps", 0, kInf, true, false},
    {"inter-node-gbps", 0, kInf, true, false},
    {"count", 0, kInf, false, false},
    {"update-sms", 0, kInf, false, false},  // 0: GEMMs keep every SM
};

const NumericRule* rule_for(const std::string& name) {
  for (const NumericRule& r : kNumericRules)
    if (name == r.name) return &r;
  return nullptr;
}

std::string range_text(const NumericRule& r) {
  std::ostringstream o;
  o << (r.min_open ? "> " : ">= ") << r.min;
  if (r.max < kInf) o << " and < " << r.max;  // only the betas have an upper bound: [0, 1)
  if (r.zero_ok) o << ", or 0 (see --help)";
  return o.str();
}

// The value of a numeric option as a double, if it is one.
bool numeric_value(const boost::any& v, double& out) {
  return visit_option_value<int, int64_t, uint64_t, double, float>(v, [&](auto x) { out = static_cast<double>(x); });
}

}  // namespace

void apply_spellings(const po::options_description& desc, std::vector<std::string>& args) {
  for (std::string& a : args) {
    if (a.rfind("--", 0) != 0 || a.size() < 3) continue;
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (desc.find_nothrow(name, false)) continue;
    for (const auto& group : kSpellings) {
      if (std::find(group.begin(), group.end(), name) == group.end()) continue;
      for (const std::string& known : group)
        if (desc.find_nothrow(known, false)) {
          a = "--" + known + (eq == std::string::npos ? "" : a.substr(eq));
          break;
        }
    }
  }
}

std::string spellings_help(const po::options_description& desc) {
  std::string out;
  for (const auto& group : kSpellings)
    for (const std::string& known : group) {
      if (!desc.find_nothrow(known, false)) continue;
      std::string others;
      for (const std::string& s : group)
        if (s != known && !desc.find_nothrow(s, false)) others += (others.empty() ? "--" : ", --") + s;
      if (!others.empty()) out += "  --" + known + " is also spelled " + others + "\n";
      break;
    }
  return out;
}

void check_numeric(const std::string& flag, double value) {
  PT_CHECK(std::isfinite(value), "--" + flag + " must be a finite number, got " + std::to_string(value));
  const NumericRule* r = rule_for(flag);
  if (!r) return;
  const bool ok = (r->zero_ok && value == 0) ||
                  ((r->min_open ? value > r->min : value >= r->min) && (r->max == kInf || value < r->max));
  if (ok) return;
  std::ostringstream got;
  got << value;
  PT_FAIL("--" + flag + " must be " + range_text(*r) + ", got " + got.str());
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
          " on the command line: every value follows its --option (lists take commas: --sizes small,xl), "
          "and switches such as --overwrite take no value");
}

}  // namespace pt::cli
