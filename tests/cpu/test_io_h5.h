#pragma once
// Reading HDF5 files back in io tests through the plain C API, independently of the writer's
// helpers (what h5py would see: field names, classes, sizes, values, attributes).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace pt::test::h5read {

// Closes an id at scope exit.
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
  operator hid_t() const { return id; }
};

inline Handle open_file(const std::string& path) {
  return {H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
}
inline Handle open_dataset(hid_t file, const std::string& path) {
  return {H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose};
}

inline std::vector<hsize_t> shape_of(hid_t dset) {
  Handle space{H5Dget_space(dset), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<size_t>(rank > 0 ? rank : 0));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return dims;
}

// The file type of member `name` of a compound dataset (class and size checked by callers).
inline Handle member_type(hid_t dset, const std::string& name) {
  Handle type{H5Dget_type(dset), H5Tclose};
  const int idx = H5Tget_member_index(type, name.c_str());
  if (idx < 0) return {-1, H5Tclose};
  return {H5Tget_member_type(type, static_cast<unsigned>(idx)), H5Tclose};
}

// One field of every row, read with a one-member memory compound (HDF5 picks it by name).
template <typename T>
std::vector<T> read_field(hid_t dset, const std::string& name, hid_t native) {
  const size_t n = shape_of(dset).at(0);
  Handle mem{H5Tcreate(H5T_COMPOUND, sizeof(T)), H5Tclose};
  H5Tinsert(mem, name.c_str(), 0, native);
  std::vector<T> out(n);
  if (n) {
    EXPECT_GE(H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
  }
  return out;
}

inline std::vector<std::string> read_string_field(hid_t dset, const std::string& name) {
  const size_t n = shape_of(dset).at(0);
  Handle ftype = member_type(dset, name);
  const size_t width = H5Tget_size(ftype);
  Handle mem{H5Tcreate(H5T_COMPOUND, width), H5Tclose};
  Handle str{H5Tcopy(ftype), H5Tclose};
  H5Tinsert(mem, name.c_str(), 0, str);
  std::vector<char> buf(n * width);
  if (n) {
    EXPECT_GE(H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), 0);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    const char* p = &buf[i * width];
    out.emplace_back(p, strnlen(p, width));  // null padding is not part of the value
  }
  return out;
}

inline bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

inline std::string string_attr(hid_t obj, const std::string& name) {
  Handle attr{H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose};
  Handle type{H5Aget_type(attr), H5Tclose};
  EXPECT_EQ(H5Tget_class(type), H5T_STRING) << name;
  EXPECT_GT(H5Tis_variable_str(type), 0) << name << " should be a variable-length string";
  char* p = nullptr;
  EXPECT_GE(H5Aread(attr, type, &p), 0);
  std::string s = p ? p : "";
  H5free_memory(p);
  return s;
}

inline std::vector<std::string> string_list_attr(hid_t obj, const std::string& name) {
  Handle attr{H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose};
  Handle type{H5Aget_type(attr), H5Tclose};
  Handle space{H5Aget_space(attr), H5Sclose};
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
  if (n) {
    EXPECT_GE(H5Aread(attr, type, ptrs.data()), 0);
  }
  std::vector<std::string> out;
  for (char* p : ptrs) {
    out.emplace_back(p ? p : "");
    H5free_memory(p);
  }
  return out;
}

template <typename T>
std::vector<T> numeric_attr(hid_t obj, const std::string& name, hid_t native) {
  Handle attr{H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose};
  Handle space{H5Aget_space(attr), H5Sclose};
  std::vector<T> out(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  EXPECT_GE(H5Aread(attr, native, out.data()), 0);
  return out;
}

}  // namespace pt::test::h5read
