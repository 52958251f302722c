#include "core/error.h"

#include <cublas_api.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstring>

namespace pt {

namespace {
std::string location(const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  return std::string(base ? base + 1 : file) + ":" + std::to_string(line);
}
}  // namespace

std::string error_text(const std::exception& e, bool with_location) {
  if (const auto* pe = dynamic_cast<const Error*>(&e))
    return with_location || pe->internal() ? pe->what() : pe->message();
  return e.what();
}

void fail_at(const char* file, int line, const std::string& msg) { throw Error(msg, location(file, line)); }

void fail_internal_at(const char* file, int line, const std::string& msg) {
  throw Error(msg, location(file, line), /*internal=*/true);
}

std::string cuda_error_string(int code) {
  return std::string(cudaGetErrorName(static_cast<cudaError_t>(code))) + " (" +
         cudaGetErrorString(static_cast<cudaError_t>(code)) + ")";
}

std::string cublas_error_string(int code) { return cublasGetStatusString(static_cast<cublasStatus_t>(code)); }

std::string nccl_error_string(int code) { return ncclGetErrorString(static_cast<ncclResult_t>(code)); }

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, len);
}

}  // namespace pt
