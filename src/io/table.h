#pragma once
// ResultTable: one row per configuration, typed columns (int64, double, string) whose names
// carry their units ("fwd_ms", "busbw_GBps"). Printed on stdout and written to HDF5 as a
// compound dataset by RunRecord. Every benchmark reports through this one type.
#include <cstdint>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

namespace pt::io {

using Value = std::variant<int64_t, double, std::string>;

enum class ColumnType { Int, Double, String };

struct Column {
  std::string name;
  ColumnType type;
  std::string description;  // one line: meaning and unit (HDF5 attribute, docs)
  int print_precision = 3;  // digits after the point when printed (doubles)
};

class ResultTable {
 public:
  explicit ResultTable(std::string name, std::string description = "");

  ResultTable& add_int(const std::string& name, const std::string& description = "");
  ResultTable& add_double(const std::string& name, const std::string& description = "", int precision = 3);
  ResultTable& add_string(const std::string& name, const std::string& description = "");

  // A row under construction; every column must be set before the next row starts or the
  // table is written (missing doubles may be NaN by design: set them explicitly).
  class RowBuilder {
   public:
    RowBuilder& set(const std::string& column, int64_t v);
    RowBuilder& set(const std::string& column, int v) { return set(column, static_cast<int64_t>(v)); }
    RowBuilder& set(const std::string& column, double v);
    RowBuilder& set(const std::string& column, const std::string& v);
    RowBuilder& set(const std::string& column, const char* v) { return set(column, std::string(v)); }
    // Every column not set yet gets "no measurement": NaN (doubles), 0 (ints), "" (strings) —
    // for rows such as an out-of-memory configuration that has only its identity.
    RowBuilder& fill_unset();

   private:
    friend class ResultTable;
    RowBuilder(ResultTable& t, size_t row) : table_(t), row_(row) {}
    ResultTable& table_;
    size_t row_;
  };
  RowBuilder add_row();

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::vector<Column>& columns() const { return columns_; }
  size_t rows() const { return rows_.size(); }
  const Value& at(size_t row, size_t col) const { return rows_.at(row).at(col); }
  int column_index(const std::string& name) const;  // -1 if absent

  // Aligned plain-text table (header, rule, rows). Throws if a row is incomplete.
  void print(std::ostream& os) const;
  // Checks every cell is set with its column's type; throws naming the first hole.
  void validate() const;

 private:
  std::string name_, description_;
  std::vector<Column> columns_;
  std::vector<std::vector<Value>> rows_;
  std::vector<std::vector<bool>> set_;
};

}  // namespace pt::io
