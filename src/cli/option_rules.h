#pragma once
// The rules every subcommand's options obey, in one place (issue 15, "flags mean what they
// say"): one spelling per concept in every subcommand, numeric ranges, and no empty or stray
// values. cli/options.cpp's parse_or_help applies them to every command line.
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace pt::cli {

// Refuses, as a usage error (exit 2), a spelling an option had before every concept got one
// name in every subcommand (`bench gemm --context 512`: --context-length), naming the one that replaced it.
void refuse_retired_spellings(const boost::program_options::options_description& desc,
                              const std::vector<std::string>& args);

// Refuses, with one line naming the option: an empty value given for a text or list option;
// a numeric option given a non-finite value or one outside its range (kNumericRules in
// option_rules.cpp; a zero that means "the default" is allowed only where the rule says so,
// and the option's --help says what it means).
void check_option_values(const boost::program_options::variables_map& vm);

// Refuses, naming the option, an integer word outside the range of the type its option parses
// into: `--seed -1` (an unsigned option would wrap it to 2^64 - 1), `--steps 4294967298`.
// Before po::store, which would wrap or call it merely invalid.
void check_integer_words(const boost::program_options::options_description& desc,
                         const boost::program_options::parsed_options& parsed);

// Refuses any word on the command line that belongs to no option ("train --steps 2 50", or
// "--overwrite false": switches take no value).
void refuse_stray_words(const std::vector<std::string>& stray);

// The numeric range of `flag` ("lr", "context-length", ...) checked on a value from a list
// option (parse_int_list / parse_double_list); no-op for a flag without a rule.
void check_numeric(const std::string& flag, double value);

// Calls f with the value an option holds when its type is one of Ts (the first that matches);
// false when it holds none of them.
template <typename... Ts, typename F>
bool visit_option_value(const boost::any& v, F&& f) {
  auto visit = [&](const auto* p) {
    if (p) f(*p);
    return p != nullptr;
  };
  return (visit(boost::any_cast<Ts>(&v)) || ...);
}

}  // namespace pt::cli
