#include "core/error.h"

#include <cublas_api.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstring>

namespace pt {

void fail_at(const char* file, int line, const std::string& msg) {
  const char* base = std::strrchr(file, '/');
  throw Error(msg + " (" + (base ? base + 1 : file) + ":" + std::to_string(line) + ")");
}

std::string cuda_error_string(int code) {
  return std::string(cudaGetErrorName(static_cast<cudaError_t>(code))) + " (" +
         cudaGetErrorString(static_cast<cudaError_t>(code)) + ")";
}

std::string cublas_error_string(int code) {
  return cublasGetStatusString(static_cast<cublasStatus_t>(code));
}

std::string nccl_error_string(int code) {
  return ncclGetErrorString(static_cast<ncclResult_t>(code));
}

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, len);
}

}  // namespace pt
