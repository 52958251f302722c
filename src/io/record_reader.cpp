#include "io/record_reader.h"

#include <hdf5.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/h5_util.h"
#include "io/input_file.h"

namespace pt::io {

namespace {
// Opens `path` read-only, or an invalid id when it is not an HDF5 file (quietly). Anything but a
// regular file is refused before HDF5 opens it (io/input_file.h).
h5::Id try_open(const std::string& path) {
  require_regular_file(path, "record '" + path + "'", "a record");
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0) return {};
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  return f >= 0 ? h5::Id(f, H5Fclose) : h5::Id();
}
}  // namespace

std::optional<std::string> read_record_text(const std::string& path, const std::string& key) {
  h5::Id file = try_open(path);
  if (file < 0) return std::nullopt;
  {
    h5::QuietErrors quiet;
    if (H5Aexists(file, key.c_str()) <= 0) return std::nullopt;
  }
  h5::Id attr(PT_H5_CHECK(H5Aopen(file, key.c_str(), H5P_DEFAULT)), H5Aclose);
  h5::Id type(PT_H5_CHECK(H5Aget_type(attr)), H5Tclose);
  if (H5Tget_class(type) != H5T_STRING) return std::nullopt;
  return h5::read_string_attr(file, key);
}

bool read_table_rows(const std::string& path, ResultTable& into) {
  h5::Id file = try_open(path);
  PT_CHECK(file >= 0, "'" + path + "' is not an HDF5 file");
  const std::string name = "/" + into.name();
  {
    h5::QuietErrors quiet;
    if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  h5::Id dset(PT_H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT)), H5Dclose);
  h5::Id ftype(PT_H5_CHECK(H5Dget_type(dset)), H5Tclose);
  PT_CHECK(H5Tget_class(ftype) == H5T_COMPOUND, "'" + path + "': " + name + " is not a table");
  // A table is a 1-D list of rows: another shape would be read flattened, its rows out of order.
  const auto dims = h5::dataset_shape(dset);
  PT_CHECK(dims.size() == 1, "'" + path + "': table " + name + " is " + std::to_string(dims.size()) +
                                 "-D; a table is 1-D, one row per entry (the file was not written by paratrain)");
  h5::Id space(PT_H5_CHECK(H5Dget_space(dset)), H5Sclose);
  const auto rows = static_cast<size_t>(PT_H5_CHECK(H5Sget_simple_extent_npoints(space)));
  // Each column read on its own through a one-member compound type: HDF5 matches it by name.
  const auto& cols = into.columns();
  std::vector<std::vector<char>> data(cols.size());
  std::vector<size_t> width(cols.size(), 8);
  for (size_t c = 0; c < cols.size(); ++c) {
    const int member = H5Tget_member_index(ftype, cols[c].name.c_str());
    PT_CHECK(member >= 0, "'" + path + "': table " + name + " has no column '" + cols[c].name + "'");
    h5::Id mtype(PT_H5_CHECK(H5Tget_member_type(ftype, static_cast<unsigned>(member))), H5Tclose);
    const H5T_class_t cls = H5Tget_class(mtype);
    const bool ok = cols[c].type == ColumnType::String ? cls == H5T_STRING
                    : cols[c].type == ColumnType::Int  ? cls == H5T_INTEGER
                                                       : cls == H5T_FLOAT;
    PT_CHECK(ok, "'" + path + "': column '" + cols[c].name + "' of " + name + " has another type");
    h5::Id field;
    if (cols[c].type == ColumnType::String) {
      // Fixed-length strings, read in their own character set (HDF5 converts neither to the other).
      PT_CHECK(PT_H5_CHECK(H5Tis_variable_str(mtype)) == 0, "'" + path + "': column '" + cols[c].name + "' of " + name +
                                                                " holds variable-length strings, not the "
                                                                "fixed-length ones paratrain writes");
      width[c] = H5Tget_size(mtype);
      field = h5::fixed_string_type(width[c]);
      PT_H5_CHECK(H5Tset_cset(field, H5Tget_cset(mtype)));
    }
    const hid_t ftype_c = cols[c].type == ColumnType::Int      ? H5T_NATIVE_INT64
                          : cols[c].type == ColumnType::Double ? H5T_NATIVE_DOUBLE
                                                               : static_cast<hid_t>(field);
    h5::Id mem(PT_H5_CHECK(H5Tcreate(H5T_COMPOUND, width[c])), H5Tclose);
    PT_H5_CHECK(H5Tinsert(mem, cols[c].name.c_str(), 0, ftype_c));
    data[c].assign(width[c] * rows, '\0');
    if (rows > 0) h5::read_dataset(dset, mem, H5S_ALL, H5S_ALL, data[c].data(), "'" + path + "': table " + name);
  }
  for (size_t r = 0; r < rows; ++r) {
    auto row = into.add_row();
    for (size_t c = 0; c < cols.size(); ++c) {
      const char* cell = data[c].data() + r * width[c];
      if (cols[c].type == ColumnType::Int) {
        int64_t v;
        std::memcpy(&v, cell, 8);
        row.set(cols[c].name, v);
      } else if (cols[c].type == ColumnType::Double) {
        double v;
        std::memcpy(&v, cell, 8);
        row.set(cols[c].name, v);
      } else {
        row.set(cols[c].name, std::string(cell, strnlen(cell, width[c])));
      }
    }
  }
  return true;
}

}  // namespace pt::io
