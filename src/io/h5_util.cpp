#include "io/h5_util.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/input_file.h"

namespace pt::io::h5 {

QuietErrors::QuietErrors() {
  PT_H5_CHECK(H5Eget_auto2(H5E_DEFAULT, &func_, &data_));
  PT_H5_CHECK(H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr));
}
QuietErrors::~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

Id create_file(const std::string& path) {
  Id fapl(PT_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)), H5Pclose);
  PT_H5_CHECK(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18));
  PT_H5_CHECK(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG));
  return Id(PT_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl)), H5Fclose);
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

Id open_attr(hid_t obj, const std::string& name) {
  PT_CHECK(has_attr(obj, name), "attribute '" + name + "' is missing");
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
  PT_CHECK(H5Tget_class(type) == H5T_STRING, "attribute '" + name + "' is not a string");
  Id space(PT_H5_CHECK(H5Aget_space(attr)), H5Sclose);
  PT_CHECK(PT_H5_CHECK(H5Sget_simple_extent_npoints(space)) == 1, "attribute '" + name + "' is not a scalar");
  if (PT_H5_CHECK(H5Tis_variable_str(type)) > 0) {
    Id mem = vlen_string_type();
    char* p = nullptr;
    PT_H5_CHECK(H5Aread(attr, mem, &p));
    std::string s = p ? p : "";
    PT_H5_CHECK(H5free_memory(p));
    return s;
  }
  const size_t width = H5Tget_size(type);
  Id mem = fixed_string_type(width);
  std::string s(width, '\0');
  PT_H5_CHECK(H5Aread(attr, mem, s.data()));
  s.resize(std::strlen(s.c_str()));  // null padding or termination
  return s;
}

int64_t read_int_attr(hid_t obj, const std::string& name) {
  Id attr = open_attr(obj, name);
  Id type(PT_H5_CHECK(H5Aget_type(attr)), H5Tclose);
  PT_CHECK(H5Tget_class(type) == H5T_INTEGER, "attribute '" + name + "' is not an integer");
  int64_t v = 0;
  PT_H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, &v));
  return v;
}

double read_double_attr(hid_t obj, const std::string& name) {
  Id attr = open_attr(obj, name);
  Id type(PT_H5_CHECK(H5Aget_type(attr)), H5Tclose);
  const H5T_class_t c = H5Tget_class(type);
  PT_CHECK(c == H5T_FLOAT || c == H5T_INTEGER, "attribute '" + name + "' is not a number");
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
