#pragma once
// Thin RAII and attribute helpers over the HDF5 C API (internal to io/): owned ids, string
// types, attributes and datasets with parents created, and reading attributes back.
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pt::io::h5 {

// HDF5 C API calls return a negative value on failure; fail_call reports it.
#define PT_H5_CHECK(expr)                                               \
  ([&]() {                                                              \
    auto pt_rc_ = (expr);                                               \
    if (pt_rc_ < 0) ::pt::io::h5::fail_call(__FILE__, __LINE__, #expr); \
    return pt_rc_;                                                      \
  }())

// The failure of an HDF5 call, in one line from HDF5's error stack (which HDF5 prints itself only
// under --verbose: set_hdf5_error_printing): an operating-system error HDF5 met writing or reading
// a file (the disk full, the file too large, an I/O error) as "cannot write 'FILE': <errno text>",
// a user-facing error; anything else as an internal one naming the call and HDF5's innermost
// message.
[[noreturn]] void fail_call(const char* file, int line, const char* expr);

// H5Dread, its failure one user-facing error naming `what` and the cause: a filter this library
// cannot decode (an lzf- or blosc-compressed tensor from h5py's plugins), checked first, or a
// damaged or truncated file (a checksum that does not match, a chunk cut short).
void read_dataset(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, void* buf, const std::string& what);

// "'FILE' /PATH" of an open object (a file, group, dataset or attribute's parent), for errors.
std::string where(hid_t obj);

// Owns one hid_t and closes it with the matching H5?close (errors on close are ignored:
// destructors must not throw, and the write that matters was already checked).
class Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Id() = default;
  Id(hid_t id, Closer close) : id_(id), close_(close) {}
  ~Id() { reset(); }
  Id(Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Id& operator=(Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  operator hid_t() const { return id_; }  // NOLINT: used wherever the C API wants a hid_t
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// Turns off HDF5's automatic error-stack printing for its lifetime: for probing calls
// whose failure is an expected answer (is this an HDF5 file? does this link exist?).
class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// Writes a new file at `path` (truncating one there): body(file) fills it, then it is closed
// and synced to disk. The 1.8 format: dense attribute storage (no 64 KiB header cap), readable
// by every h5py; objects left open are closed with the file (H5F_CLOSE_STRONG). A failed system
// call under it (a full disk, a quota, an I/O error) is one error naming `what` ("checkpoint
// 'ck.h5'") and the cause, e.g. "No space left on device"; `path` is then half-written (write
// it as a temporary file: io/atomic_file.h).
void write_file(const std::string& path, const std::string& what, const std::function<void(hid_t file)>& body);
// Opens an existing HDF5 file read-only; `what` names it in errors ("checkpoint 'x.h5'").
Id open_file_readonly(const std::string& path, const std::string& what);

// Fixed-length, null-padded UTF-8 string type of `width` bytes (h5py/numpy: dtype 'S<width>').
Id fixed_string_type(size_t width);
// Variable-length UTF-8 string type (h5py attributes: str).
Id vlen_string_type();

// Link-creation property list that creates missing parent groups ("/a/b/c" makes /a, /a/b).
Id lcpl_with_parents();

// Attributes on any object (replaced when present).
void write_attr(hid_t obj, const std::string& name, const std::string& value);
void write_attr(hid_t obj, const std::string& name, int64_t value);
void write_attr(hid_t obj, const std::string& name, double value);
void write_attr(hid_t obj, const std::string& name, const std::vector<std::string>& values);
void write_attr(hid_t obj, const std::string& name, const std::vector<int64_t>& values);

// Numeric and string datasets at `path` (parents created). shape's product must match.
void write_dataset(hid_t file, const std::string& path, const std::vector<double>& values,
                   const std::vector<int64_t>& shape);
void write_dataset(hid_t file, const std::string& path, const std::vector<int64_t>& values,
                   const std::vector<int64_t>& shape);
void write_dataset(hid_t file, const std::string& path, const std::vector<float>& values,
                   const std::vector<int64_t>& shape);
void write_strings(hid_t file, const std::string& path, const std::vector<std::string>& values);

// Reading back (checkpoints, tests). A missing attribute or wrong type throws naming it.
bool has_attr(hid_t obj, const std::string& name);
std::string read_string_attr(hid_t obj, const std::string& name);
int64_t read_int_attr(hid_t obj, const std::string& name);
double read_double_attr(hid_t obj, const std::string& name);

// Dimensions of a dataset's dataspace (empty for a scalar).
std::vector<int64_t> dataset_shape(hid_t dset);

}  // namespace pt::io::h5
