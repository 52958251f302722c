#pragma once
// `--config FILE`: options from a file in the INI format Boost.Program_options' parse_config_file
// reads, one `name = value` per line with the long option's name ("lr = 3e-4", "model = tiny"),
// `#` to the end of a line a comment, no [sections]. A list option may take several lines, one
// item each. Options given on the command line too keep the command line's value. Each value is
// checked as the same flag would be, and refused naming the file and its line.
// `--print-config` writes the effective configuration in the same format: fed back with --config
// it gives the same configuration (the defaults are written as comments, so they stay defaults).
#include <boost/program_options.hpp>

#include <ostream>
#include <string>

namespace pt::cli {

// --config and --print-config (add_run_options declares them for every subcommand that has the
// shared run options).
void add_config_options(boost::program_options::options_description& desc);

// The options `path` sets, ready for po::store. Refused: a file that is missing or not a regular
// file (exit 1); a line that is not `name = value`, a section, an unknown or retired name, a name
// given twice (but a list's), --config or --print-config inside the file (usage errors, exit 2);
// a value the flag would refuse (the flag's error and exit code). Every message starts with
// "--config FILE line N:".
boost::program_options::parsed_options read_config_file(const std::string& path,
                                                        const boost::program_options::options_description& desc);

// read_config_file's options stored into vm after the command line's, so that a flag given on both
// keeps the command line's value; the file's lines for the others become config_file_source's.
void store_config_file(const std::string& path, const boost::program_options::options_description& desc,
                       boost::program_options::variables_map& vm);

// "--config FILE line N: " when the error message `why` names an option the last stored config
// file set ("--lr ..." or its value quoted), so that main() points at the line; else "".
std::string config_file_source(const std::string& why);

// The configuration in vm as a config file: every option with a value but --config and
// --print-config, in --help's order, a default as a comment ("# lr = 0.0003  # default").
// A value the format cannot hold (one with '#', or spaces at either end) is refused naming it.
void write_config(std::ostream& out, const boost::program_options::options_description& desc,
                  const boost::program_options::variables_map& vm);

// With --print-config: writes the configuration on stdout (rank 0) and returns true, the caller
// then ends with exit 0 and runs nothing.
bool print_config_if_asked(const boost::program_options::options_description& desc,
                           const boost::program_options::variables_map& vm);

}  // namespace pt::cli
