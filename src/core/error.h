#pragma once
// Error type and return-code checks for CUDA, cuBLAS, NCCL and MPI (HDF5's: io/h5_util.h): every
// failure names file and line.
#include <stdexcept>
#include <string>

namespace pt {

// Thrown for every failure the program reports. what() is the message and, when known, the
// source location ("msg (file.cpp:123)"): what records and logs keep. main() prints one line:
// the message alone for a failure of the user's input (PT_CHECK, PT_FAIL), the location too
// for a failed library call (the PT_*_CHECK macros of CUDA, cuBLAS, NCCL, MPI and, in
// io/h5_util.h, HDF5: an internal error) or under --verbose.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg, const std::string& where = "", bool internal = false)
      : std::runtime_error(where.empty() ? msg : msg + " (" + where + ")"), message_(msg), internal_(internal) {}
  const std::string& message() const { return message_; }
  bool internal() const { return internal_; }

 private:
  std::string message_;
  bool internal_ = false;
};

// A device allocation that could not be satisfied even after the cache was emptied.
// Benchmarks catch it to record a configuration as OOM and go on.
class OutOfMemory : public Error {
 public:
  OutOfMemory(const std::string& msg, size_t requested_bytes) : Error(msg), requested_bytes(requested_bytes) {}
  size_t requested_bytes;
};

// What a user sees of any exception: a pt::Error's message, with its source location only when
// it is internal or `with_location` (--verbose); what() of anything else.
std::string error_text(const std::exception& e, bool with_location = false);

[[noreturn]] void fail_at(const char* file, int line, const std::string& msg);
// The same for a failed library call: an internal error, reported with its location.
[[noreturn]] void fail_internal_at(const char* file, int line, const std::string& msg);

// Human-readable names of library status codes (defined where each library is used).
std::string cuda_error_string(int code);
std::string cublas_error_string(int code);
std::string nccl_error_string(int code);
std::string mpi_error_string(int code);

}  // namespace pt

// PT_CHECK(cond, msg): user-facing precondition; msg is any expression convertible to std::string.
#define PT_CHECK(cond, msg)                                           \
  do {                                                                \
    if (!(cond)) ::pt::fail_at(__FILE__, __LINE__, std::string(msg)); \
  } while (0)

#define PT_FAIL(msg) ::pt::fail_at(__FILE__, __LINE__, std::string(msg))

// A library call that returns 0 on success: any other status fails, naming the call (its text,
// as written) and the library's text for the status.
#define PT_LIBRARY_CHECK(expr, expr_text, library, error_string)                                             \
  do {                                                                                                       \
    int pt_rc_ = static_cast<int>(expr);                                                                     \
    if (pt_rc_ != 0)                                                                                         \
      ::pt::fail_internal_at(__FILE__, __LINE__,                                                             \
                             std::string(library " error in ") + (expr_text) + ": " + error_string(pt_rc_)); \
  } while (0)

#define PT_CUDA_CHECK(expr) PT_LIBRARY_CHECK(expr, #expr, "CUDA", ::pt::cuda_error_string)
// After a kernel launch: reports launch-configuration errors at the launch site.
#define PT_CUDA_CHECK_LAUNCH() PT_CUDA_CHECK(cudaGetLastError())
#define PT_CUBLAS_CHECK(expr) PT_LIBRARY_CHECK(expr, #expr, "cuBLAS", ::pt::cublas_error_string)
#define PT_NCCL_CHECK(expr) PT_LIBRARY_CHECK(expr, #expr, "NCCL", ::pt::nccl_error_string)
#define PT_MPI_CHECK(expr) PT_LIBRARY_CHECK(expr, #expr, "MPI", ::pt::mpi_error_string)
