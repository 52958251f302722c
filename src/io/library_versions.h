#pragma once
// The versions of what this program runs on, for `paratrain --version` and every run record:
// CUDA driver and runtime, cuBLAS, NCCL, MPI, HDF5, and the CUDA architectures compiled in.
#include <string>
#include <utility>
#include <vector>

namespace pt::io {

// (record attribute name, value) in a fixed order; a library that cannot answer says
// "unavailable (...)" instead of failing (no driver on a CPU machine, MPI not initialised).
std::vector<std::pair<std::string, std::string>> library_versions();

// `paratrain --version`: the program, its revision and build, then library_versions().
std::string version_report();

}  // namespace pt::io
