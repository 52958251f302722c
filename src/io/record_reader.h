#pragma once
// Reading back what RunRecord wrote, for a run that continues an earlier one's record (train
// --resume): a root text attribute and a table's rows.
#include <optional>
#include <string>

#include "io/table.h"

namespace pt::io {

// The root string attribute `key` of the HDF5 file at `path`; nothing when the file is not an
// HDF5 file or has no such string attribute.
std::optional<std::string> read_record_text(const std::string& path, const std::string& key);

// Appends the rows of table `/<into.name()>` of the record at `path` to `into`, reading each of
// into's columns by name (the file may hold more columns). False, with nothing appended, when
// the file has no such table; a column missing or of another type is an error naming it.
bool read_table_rows(const std::string& path, ResultTable& into);

}  // namespace pt::io
