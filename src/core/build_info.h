#pragma once
// What this program is and how it was started: the version, the git revision it was built from
// (taken at build time), where its data lives, and the command line (for run records).
#include <string>

namespace pt {

const char* program_version();  // "0.1.0"
const char* git_revision();     // 12 hex digits, "-dirty" when built from a modified tree, or "unknown"
// The sample token file: beside the installed program (<prefix>/share/paratrain/data/) when it
// runs from an installed tree, else in the source tree it was built from.
std::string sample_data_path();

// The command line as typed, set once by main().
const std::string& invocation();
void set_invocation(int argc, char** argv);

}  // namespace pt
