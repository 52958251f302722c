#include "cli/config_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <vector>

#include "cli/option_rules.h"
#include "cli/options.h"
#include "core/error.h"
#include "io/input_file.h"
#include "parallel/runtime.h"

namespace pt::cli {

namespace po = boost::program_options;

namespace {

constexpr const char* kConfig = "config";
constexpr const char* kPrintConfig = "print-config";

// Blanks at either end go, as parse_config_file trims them.
std::string trim(const std::string& s) {
  const char* blanks = " \t\r\n";
  const size_t first = s.find_first_not_of(blanks);
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(blanks) - first + 1);
}

// One `name = value` line of a config file.
struct Line {
  int number;
  std::string key, value;
};

// The options the last config file set that the command line did not: an error later that names
// one of them is reported with its file and line (config_file_source).
struct FromFile {
  std::string path;
  std::vector<Line> lines;
};
FromFile& from_file() {
  static FromFile f;
  return f;
}

std::string where(const std::string& path, int line) {
  return "--config '" + path + "' line " + std::to_string(line) + ": ";
}

// The file's `name = value` lines, read by parse_config_file's rules ('#' starts a comment, blanks
// at either end go); anything else it would refuse, and what paratrain refuses beyond it, refused
// here with the line's number.
std::vector<Line> scan(const std::string& path, const std::string& text, const po::options_description& desc) {
  std::vector<Line> lines;
  std::istringstream in(text);
  int number = 0;
  for (std::string raw; std::getline(in, raw);) {
    const std::string at = where(path, ++number);
    const std::string s = trim(raw.substr(0, raw.find('#')));
    if (s.empty()) continue;
    if (s.front() == '[' && s.back() == ']')
      throw po::error(at + "'" + s + "': sections are not used; write each option as name = value, with its long name");
    const size_t eq = s.find('=');
    if (eq == std::string::npos) throw po::error(at + "'" + s + "' is not name = value");
    Line l{number, trim(s.substr(0, eq)), trim(s.substr(eq + 1))};
    if (l.key == kConfig || l.key == kPrintConfig)
      throw po::error(at + "--" + l.key + " goes on the command line, not in a config file");
    try {
      refuse_retired_spellings(desc, {"--" + l.key});
    } catch (const po::error& e) {
      throw po::error(at + e.what());
    }
    if (!desc.find_nothrow(l.key, false))
      throw po::error(at + "unrecognised option '" + l.key + "' (names are the long options', as --help lists them)");
    PT_CHECK(!l.value.empty(), at + "'" + l.key + "' has no value; leave the line out for the option's default");
    lines.push_back(l);
  }
  return lines;
}

// Each value as the same flag would be checked (alone, and with the earlier line of its name: a
// name given twice is refused unless its option is a list), the error naming the line.
void check_values(const std::string& path, const std::vector<Line>& lines, const po::parsed_options& parsed,
                  const po::options_description& desc) {
  std::map<std::string, size_t> first;  // name → its first line's index
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string at = where(path, lines[i].number);
    po::parsed_options one(&desc);
    const auto [earlier, is_first] = first.emplace(lines[i].key, i);
    if (!is_first) one.options.push_back(parsed.options[earlier->second]);
    one.options.push_back(parsed.options[i]);
    try {
      check_integer_words(desc, one);
      po::variables_map vm;
      po::store(one, vm);
      check_option_values(vm);
    } catch (const po::multiple_occurrences&) {
      throw po::error(at + "'" + lines[i].key + "' is given again (first on line " +
                      std::to_string(lines[earlier->second].number) + "); give each option once");
    } catch (const po::error& e) {
      throw po::error(at + e.what());
    } catch (const std::exception& e) {
      PT_FAIL(at + error_text(e, false));
    }
  }
}

// Whether parse_config_file reads `text` back as it is.
bool writable(const std::string& text) { return text.find('#') == std::string::npos && trim(text) == text; }

}  // namespace

void add_config_options(po::options_description& desc) {
  // clang-format off
  desc.add_options()
      (kConfig, po::value<std::string>(),
       "options from this file: name = value lines, long names (examples: configs/); flags "
       "override it")
      (kPrintConfig, po::bool_switch(), "print the effective configuration as a --config file and exit");
  // clang-format on
}

po::parsed_options read_config_file(const std::string& path, const po::options_description& desc) {
  io::require_regular_file(path, "--config '" + path + "'", "a config file");
  std::ifstream in(path, std::ios::binary);
  PT_CHECK(in.is_open(), "--config '" + path + "': cannot read: " + std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  PT_CHECK(!in.bad(), "--config '" + path + "': cannot read: " + std::strerror(errno));
  const std::vector<Line> lines = scan(path, text, desc);
  std::istringstream again(text);
  po::parsed_options parsed(&desc);
  try {
    parsed = po::parse_config_file(again, desc);
  } catch (const po::error& e) {
    throw po::error("--config '" + path + "': " + e.what());
  }
  PT_CHECK(parsed.options.size() == lines.size(), "--config '" + path + "': read " + std::to_string(lines.size()) +
                                                      " options, Boost " + std::to_string(parsed.options.size()));
  check_values(path, lines, parsed, desc);
  from_file() = {path, lines};
  return parsed;
}

void store_config_file(const std::string& path, const po::options_description& desc, po::variables_map& vm) {
  const po::parsed_options parsed = read_config_file(path, desc);
  // What the command line gave stays; the file's line for it is no source of a later error.
  std::vector<Line>& lines = from_file().lines;
  std::vector<Line> used;
  for (const Line& l : lines)
    if (!vm.count(l.key) || vm[l.key].defaulted()) used.push_back(l);
  lines = used;
  po::store(parsed, vm);
}

std::string config_file_source(const std::string& why) {
  const FromFile& f = from_file();
  for (const Line& l : f.lines)
    if (error_names_option(why, "--" + l.key, l.value)) return where(f.path, l.number);
  return "";
}

void write_config(std::ostream& out, const po::options_description& desc, const po::variables_map& vm) {
  out << "# paratrain's effective configuration (--print-config), to run with --config FILE; flags\n"
         "# given with it override the file. '# name = value  # default' lines show defaults.\n\n";
  for (const auto& d : desc.options()) {  // in --help's order
    const std::string& name = d->long_name();
    if (name == kConfig || name == kPrintConfig || !vm.count(name)) continue;
    const auto texts = option_value_texts(vm[name].value());
    PT_CHECK(texts.has_value(), "--print-config: --" + name + " holds a value a config file cannot hold");
    const bool by_default = vm[name].defaulted();
    for (const std::string& t : *texts) {
      PT_CHECK(by_default || writable(t), "--print-config: --" + name + " '" + t +
                                              "' cannot be written in a config file, which ends a value at '#' "
                                              "and drops blanks at its ends");
      out << (by_default ? "# " : "") << name << " = " << t << (by_default ? "  # default" : "") << "\n";
    }
  }
}

bool print_config_if_asked(const po::options_description& desc, const po::variables_map& vm) {
  if (!vm.count(kPrintConfig) || !vm[kPrintConfig].as<bool>()) return false;
  std::ostringstream text;
  write_config(text, desc, vm);  // a refusal before anything is printed
  if (parallel::Runtime::get().is_root()) {
    std::cout << text.str() << std::flush;
    PT_CHECK(static_cast<bool>(std::cout), "--print-config: cannot write the configuration to standard output");
  }
  return true;
}

}  // namespace pt::cli
