#include "io/library_versions.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <hdf5.h>
#include <mpi.h>
#include <nccl.h>

#include "core/build_info.h"
#include "core/cuda_arch.h"

namespace pt::io {

namespace {

// CUDA encodes versions as 1000·major + 10·minor.
std::string cuda_version(cudaError_t rc, int v) {
  if (rc != cudaSuccess) return std::string("unavailable (") + cudaGetErrorName(rc) + ")";
  if (v == 0) return "unavailable (no driver)";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string cublas_version() {
  int v[3] = {0, 0, 0};
  const libraryPropertyType props[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
  for (int i = 0; i < 3; ++i)
    if (cublasGetProperty(props[i], &v[i]) != CUBLAS_STATUS_SUCCESS) return "unavailable";
  return std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
}

// NCCL ≥ 2.9 encodes 10000·major + 100·minor + patch.
std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unavailable";
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> library_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  int v = 0;
  cudaError_t rc = cudaDriverGetVersion(&v);
  out.emplace_back("cuda_driver_version", cuda_version(rc, v));
  v = 0;
  rc = cudaRuntimeGetVersion(&v);
  out.emplace_back("cuda_runtime_version", cuda_version(rc, v));
  cudaGetLastError();  // a failed query above must not poison a later launch check
  out.emplace_back("cuda_architectures", compiled_cuda_architectures());
  out.emplace_back("cublas_version", cublas_version());
  out.emplace_back("nccl_version", nccl_version());
  // MPI_Get_library_version and MPI_Get_version may be called before MPI_Init.
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0, major = 0, minor = 0;
  const bool mpi_ok =
      MPI_Get_library_version(lib, &len) == MPI_SUCCESS && MPI_Get_version(&major, &minor) == MPI_SUCCESS;
  out.emplace_back("mpi_library", mpi_ok ? trim(std::string(lib, static_cast<size_t>(len))) : "unavailable");
  out.emplace_back("mpi_version", mpi_ok ? std::to_string(major) + "." + std::to_string(minor) : "unavailable");
  unsigned h5maj = 0, h5min = 0, h5rel = 0;
  out.emplace_back("hdf5_version",
                   H5get_libversion(&h5maj, &h5min, &h5rel) >= 0
                       ? std::to_string(h5maj) + "." + std::to_string(h5min) + "." + std::to_string(h5rel)
                       : "unavailable");
  return out;
}

std::string version_report() {
  std::string text = std::string("paratrain ") + program_version() + " (git " + git_revision() + ")\n";
  for (auto [name, value] : library_versions()) {
    for (char& c : name)
      if (c == '_') c = ' ';
    text += "  " + name + std::string(name.size() < 22 ? 22 - name.size() : 1, ' ') + value + "\n";
  }
  return text;
}

}  // namespace pt::io
