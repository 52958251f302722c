#include "io/h5_util.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/fault_injection.h"
#include "io/h5_errors.h"
#include "io/h5_output_driver.h"

namespace pt::io {

void set_hdf5_error_printing(bool verbose) {
  if (!verbose) PT_H5_CHECK(H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr));  // verbose: HDF5's default prints
}

}  // namespace pt::io
#include "io/input_file.h"

namespace pt::io::h5 {

namespace {

// What fail_call takes from HDF5's error stack: the innermost message, and an operating-system
// error with its file where HDF5's file driver reported one ("..., filename = 'x.h5', ...,
// errno = 28, error message = 'No space left on device', ...").
struct StackCause {
  std::string innermost, file, os_error;
  bool writing = false;
};

std::string quoted_field(const std::string& desc, const std::string& key) {
  const size_t at = desc.find(key + " = '");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 4, to = desc.find('\'', from);
  return to == std::string::npos ? "" : desc.substr(from, to - from);
}

herr_t collect_cause(unsigned n, const H5E_error2_t* e, void* data) {
  auto& c = *static_cast<StackCause*>(data);
  const std::string desc = e->desc ? e->desc : "";
  if (n == 0) c.innermost = std::string(e->func_name ? e->func_name : "?") + ": " + desc;
  if (c.os_error.empty()) {
    c.os_error = quoted_field(desc, "error message");
    if (!c.os_error.empty()) {
      c.file = quoted_field(desc, "filename");
      c.writing = desc.find("write") != std::string::npos;
    }
  }
  return 0;
}

// What the current error stack says, cleared for the next call.
StackCause take_cause() {
  StackCause cause;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_cause, &cause);
  H5Eclear2(H5E_DEFAULT);
  return cause;
}

}  // namespace

void fail_call(const char* file, int line, const char* expr) {
  const StackCause cause = take_cause();
  if (!cause.os_error.empty())
    fail_at(file, line,
            std::string(cause.writing ? "cannot write '" : "cannot read '") + cause.file + "': " + cause.os_error);
  fail_internal_at(file, line,
                   std::string("HDF5 error in ") + expr + (cause.innermost.empty() ? "" : ": " + cause.innermost));
}

namespace {
// Refuses, naming `what`, a dataset stored through a filter this library cannot decode: before a
// read that would fail deep inside HDF5.
void check_filters(hid_t dset, const std::string& what) {
  Id dcpl(PT_H5_CHECK(H5Dget_create_plist(dset)), H5Pclose);
  const int n = PT_H5_CHECK(H5Pget_nfilters(dcpl));
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, config = 0;
    size_t nvalues = 0;
    char name[256] = {0};
    const H5Z_filter_t id =
        H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &nvalues, nullptr, sizeof name, name, &config);
    PT_H5_CHECK(id);
    htri_t avail;
    {
      QuietErrors quiet;  // "not available" is the answer sought, not an error to print
      avail = H5Zfilter_avail(id);
    }
    unsigned info = 0;
    const bool decodes = avail > 0 && H5Zget_filter_info(id, &info) >= 0 && (info & H5Z_FILTER_CONFIG_DECODE_ENABLED);
    PT_CHECK(decodes, what + " is stored through the HDF5 filter '" + std::string(name[0] ? name : "unnamed") +
                          "' (id " + std::to_string(id) +
                          "), which this program's HDF5 cannot decode: rewrite it uncompressed or with gzip");
  }
}
}  // namespace

void read_dataset(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, void* buf, const std::string& what) {
  check_filters(dset, what);
  if (H5Dread(dset, mem_type, mem_space, file_space, H5P_DEFAULT, buf) >= 0) return;
  const StackCause cause = take_cause();
  PT_FAIL(what + " cannot be read (" + (cause.os_error.empty() ? cause.innermost : cause.os_error) +
          "): the file is damaged or truncated");
}

std::string where(hid_t obj) {
  char buf[4096] = {0};
  const ssize_t n = H5Fget_name(obj, buf, sizeof buf);
  std::string out = "'" + std::string(n > 0 ? buf : "?") + "'";
  const ssize_t m = H5Iget_name(obj, buf, sizeof buf);
  if (m > 0 && std::string(buf) != "/") out += " " + std::string(buf);
  return out;
}

QuietErrors::QuietErrors() {
  PT_H5_CHECK(H5Eget_auto2(H5E_DEFAULT, &func_, &data_));
  PT_H5_CHECK(H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr));
}
QuietErrors::~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

void write_file(const std::string& path, const std::string& what, const std::function<void(hid_t file)>& body) {
  // A failed system call is kept by the driver rather than reported to HDF5 (h5_output_driver.h),
  // so closing the file works whatever happened, and the failure is told after it.
  int first_errno = 0;
  auto failed = [&] { PT_FAIL(what + " not written: " + std::strerror(first_errno)); };
  Id fapl(PT_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
  use_output_driver(fapl, &first_errno, fault::disk_full(path));
  PT_H5_CHECK(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18));
  PT_H5_CHECK(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG));
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (file < 0 && first_errno != 0) failed();
  PT_H5_CHECK(file);
  try {
    body(file);
  } catch (const std::exception&) {
    H5Fclose(file);
    if (first_errno != 0) failed();  // the cause of what body saw
    throw;
  }
  const herr_t closed = H5Fclose(file);  // flushes and syncs
  if (first_errno != 0) failed();
  PT_H5_CHECK(closed);
}

Id open_file_readonly(const std::string& path, const std::string& what) {
  require_regular_file(path, what, "it");
  QuietErrors quiet;
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  PT_CHECK(is_h5 > 0, what + ": not an HDF5 file (or unreadable)");
  Id fapl(PT_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
  PT_H5_CHECK(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG));
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  PT_CHECK(f >= 0, what + ": HDF5 could not open it (corrupt or truncated?)");
  return Id(f, H5Fclose);
}

Id fixed_string_type(size_t width) {
  Id t(PT_H5_CHECK(H5Tcopy(H5T_C_S1)), H5Tclose);
  PT_H5_CHECK(H5Tset_size(t, std::max<size_t>(1, width)));
  PT_H5_CHECK(H5Tset_strpad(t, H5T_STR_NULLPAD));
  PT_H5_CHECK(H5Tset_cset(t, H5T_CSET_UTF8));
  return t;
}

Id vlen_string_type() {
  Id t(PT_H5_CHECK(H5Tcopy(H5T_C_S1)), H5Tclose);
  PT_H5_CHECK(H5Tset_size(t, H5T_VARIABLE));
  PT_H5_CHECK(H5Tset_cset(t, H5T_CSET_UTF8));
  return t;
}

Id lcpl_with_parents() {
  Id lcpl(PT_H5_CHECK(H5Pcreate(H5P_LINK_CREATE)), H5Pclose);
  PT_H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1));
  PT_H5_CHECK(H5Pset_char_encoding(lcpl, H5T_CSET_UTF8));
  return lcpl;
}

namespace {

// Creates attribute `name` (replacing an existing one) and writes `buf` as `mem_type`.
void put_attr(hid_t obj, const std::string& name, hid_t file_type, hid_t mem_type, hid_t space, const void* buf) {
  if (PT_H5_CHECK(H5Aexists(obj, name.c_str())) > 0) PT_H5_CHECK(H5Adelete(obj, name.c_str()));
  Id acpl(PT_H5_CHECK(H5Pcreate(H5P_ATTRIBUTE_CREATE)), H5Pclose);
  PT_H5_CHECK(H5Pset_char_encoding(acpl, H5T_CSET_UTF8));
  Id attr(PT_H5_CHECK(H5Acreate2(obj, name.c_str(), file_type, space, acpl, H5P_DEFAULT)), H5Aclose);
  PT_H5_CHECK(H5Awrite(attr, mem_type, buf));
}

Id scalar_space() { return Id(PT_H5_CHECK(H5Screate(H5S_SCALAR)), H5Sclose); }

Id simple_space(const std::vector<int64_t>& shape) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return Id(PT_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)), H5Sclose);
}

// Creates dataset `path` (replacing one there, creating parents) and writes `buf`.
void put_raw(hid_t file, const std::string& path, hid_t type, const void* buf, const std::vector<int64_t>& shape) {
  htri_t exists;
  {
    QuietErrors quiet;  // fails, rather than answering no, when a parent group is missing
    exists = H5Lexists(file, path.c_str(), H5P_DEFAULT);
  }
  if (exists > 0) PT_H5_CHECK(H5Ldelete(file, path.c_str(), H5P_DEFAULT));
  Id space = simple_space(shape);
  Id lcpl = lcpl_with_parents();
  Id dset(PT_H5_CHECK(H5Dcreate2(file, path.c_str(), type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT)), H5Dclose);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n > 0) PT_H5_CHECK(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
}

template <typename T>
void put_dataset(hid_t file, const std::string& path, hid_t type, const std::vector<T>& values,
                 std::vector<int64_t> shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  int64_t n = 1;
  for (int64_t d : shape) {
    PT_CHECK(d >= 0, "dataset '" + path + "': negative dimension");
    n *= d;
  }
  PT_CHECK(n == static_cast<int64_t>(values.size()), "dataset '" + path + "': shape has " + std::to_string(n) +
                                                         " elements but " + std::to_string(values.size()) +
                                                         " values were given");
  put_raw(file, path, type, values.data(), shape);
}

// An attribute read into one value must hold one: a list would overrun the buffer.
void check_one_value(hid_t attr, hid_t obj, const std::string& name) {
  Id space(PT_H5_CHECK(H5Aget_space(attr)), H5Sclose);
  PT_CHECK(PT_H5_CHECK(H5Sget_simple_extent_npoints(space)) == 1,
           where(obj) + ": attribute '" + name + "' is not a single value");
}

Id open_attr(hid_t obj, const std::string& name) {
  PT_CHECK(has_attr(obj, name), where(obj) + ": attribute '" + name + "' is missing");
  return Id(PT_H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT)), H5Aclose);
}

}  // namespace

void write_attr(hid_t obj, const std::string& name, const std::string& value) {
  Id type = vlen_string_type();
  Id space = scalar_space();
  const char* p = value.c_str();
  put_attr(obj, name, type, type, space, &p);
}

void write_attr(hid_t obj, const std::string& name, int64_t value) {
  Id space = scalar_space();
  put_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space, &value);
}

void write_attr(hid_t obj, const std::string& name, double value) {
  Id space = scalar_space();
  put_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space, &value);
}

void write_attr(hid_t obj, const std::string& name, const std::vector<std::string>& values) {
  Id type = vlen_string_type();
  Id space = simple_space({static_cast<int64_t>(values.size())});
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  put_attr(obj, name, type, type, space, ptrs.data());
}

void write_attr(hid_t obj, const std::string& name, const std::vector<int64_t>& values) {
  Id space = simple_space({static_cast<int64_t>(values.size())});
  put_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space, values.data());
}

void write_dataset(hid_t file, const std::string& path, const std::vector<double>& values,
                   const std::vector<int64_t>& shape) {
  put_dataset(file, path, H5T_NATIVE_DOUBLE, values, shape);
}
void write_dataset(hid_t file, const std::string& path, const std::vector<int64_t>& values,
                   const std::vector<int64_t>& shape) {
  put_dataset(file, path, H5T_NATIVE_INT64, values, shape);
}
void write_dataset(hid_t file, const std::string& path, const std::vector<float>& values,
                   const std::vector<int64_t>& shape) {
  put_dataset(file, path, H5T_NATIVE_FLOAT, values, shape);
}

void write_strings(hid_t file, const std::string& path, const std::vector<std::string>& values) {
  size_t width = 1;
  for (const auto& v : values) width = std::max(width, v.size());
  std::vector<char> buf(values.size() * width, '\0');  // (n, width), null-padded
  for (size_t i = 0; i < values.size(); ++i) std::memcpy(&buf[i * width], values[i].data(), values[i].size());
  Id type = fixed_string_type(width);
  put_raw(file, path, type, buf.data(), {static_cast<int64_t>(values.size())});
}

bool has_attr(hid_t obj, const std::string& name) { return PT_H5_CHECK(H5Aexists(obj, name.c_str())) > 0; }

std::string read_string_attr(hid_t obj, const std::string& name) {
  Id attr = open_attr(obj, name);
  Id type(PT_H5_CHECK(H5Aget_type(attr)), H5Tclose);
  PT_CHECK(H5Tget_class(type) == H5T_STRING, where(obj) + ": attribute '" + name + "' is not a string");
  check_one_value(attr, obj, name);
  // Read in the attribute's own character set: HDF5 converts no ASCII string to UTF-8 or back.
  const H5T_cset_t cset = H5Tget_cset(type);
  if (PT_H5_CHECK(H5Tis_variable_str(type)) > 0) {
    Id mem = vlen_string_type();
    PT_H5_CHECK(H5Tset_cset(mem, cset));
    char* p = nullptr;
    PT_H5_CHECK(H5Aread(attr, mem, &p));
    std::string s = p ? p : "";
    PT_H5_CHECK(H5free_memory(p));
    return s;
  }
  const size_t width = H5Tget_size(type);
  Id mem = fixed_string_type(width);
  PT_H5_CHECK(H5Tset_cset(mem, cset));
  std::string s(width, '\0');
  PT_H5_CHECK(H5Aread(attr, mem, s.data()));
  s.resize(std::strlen(s.c_str()));  // null padding or termination
  return s;
}

int64_t read_int_attr(hid_t obj, const std::string& name) {
  Id attr = open_attr(obj, name);
  Id type(PT_H5_CHECK(H5Aget_type(attr)), H5Tclose);
  PT_CHECK(H5Tget_class(type) == H5T_INTEGER, where(obj) + ": attribute '" + name + "' is not an integer");
  check_one_value(attr, obj, name);
  int64_t v = 0;
  PT_H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, &v));
  return v;
}

double read_double_attr(hid_t obj, const std::string& name) {
  Id attr = open_attr(obj, name);
  Id type(PT_H5_CHECK(H5Aget_type(attr)), H5Tclose);
  const H5T_class_t c = H5Tget_class(type);
  PT_CHECK(c == H5T_FLOAT || c == H5T_INTEGER, where(obj) + ": attribute '" + name + "' is not a number");
  check_one_value(attr, obj, name);
  double v = 0;
  PT_H5_CHECK(H5Aread(attr, H5T_NATIVE_DOUBLE, &v));
  return v;
}

std::vector<int64_t> dataset_shape(hid_t dset) {
  Id space(PT_H5_CHECK(H5Dget_space(dset)), H5Sclose);
  const int rank = PT_H5_CHECK(H5Sget_simple_extent_ndims(space));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) PT_H5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  return std::vector<int64_t>(dims.begin(), dims.end());
}

}  // namespace pt::io::h5
