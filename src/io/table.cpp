#include "io/table.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace pt::io {

namespace {
const char* type_name(ColumnType t) {
  switch (t) {
    case ColumnType::Int: return "int";
    case ColumnType::Double: return "double";
    case ColumnType::String: return "string";
  }
  return "?";
}

std::string format_cell(const Value& v, const Column& c) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  const double d = std::get<double>(v);
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::ostringstream o;
  o << std::fixed << std::setprecision(c.print_precision) << d;
  return o.str();
}
}  // namespace

ResultTable::ResultTable(std::string name, std::string description)
    : name_(std::move(name)), description_(std::move(description)) {
  PT_CHECK(!name_.empty(), "a result table needs a name");
}

int ResultTable::column_index(const std::string& name) const {
  for (size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i].name == name) return static_cast<int>(i);
  return -1;
}

static void add_column(ResultTable& t, std::vector<Column>& columns, size_t rows, Column c) {
  PT_CHECK(!c.name.empty(), "table '" + t.name() + "': a column needs a name");
  PT_CHECK(t.column_index(c.name) < 0, "table '" + t.name() + "': duplicate column '" + c.name + "'");
  PT_CHECK(rows == 0, "table '" + t.name() + "': column '" + c.name + "' added after rows exist");
  PT_CHECK(c.print_precision >= 0 && c.print_precision <= 17,
           "table '" + t.name() + "': column '" + c.name + "' precision must be 0..17");
  columns.push_back(std::move(c));
}

ResultTable& ResultTable::add_int(const std::string& name, const std::string& description) {
  add_column(*this, columns_, rows_.size(), {name, ColumnType::Int, description, 0});
  return *this;
}
ResultTable& ResultTable::add_double(const std::string& name, const std::string& description, int precision) {
  add_column(*this, columns_, rows_.size(), {name, ColumnType::Double, description, precision});
  return *this;
}
ResultTable& ResultTable::add_string(const std::string& name, const std::string& description) {
  add_column(*this, columns_, rows_.size(), {name, ColumnType::String, description, 0});
  return *this;
}

ResultTable::RowBuilder ResultTable::add_row() {
  PT_CHECK(!columns_.empty(), "table '" + name_ + "': add columns before rows");
  if (!rows_.empty()) {
    const size_t r = rows_.size() - 1;
    for (size_t c = 0; c < columns_.size(); ++c)
      PT_CHECK(set_[r][c], "table '" + name_ + "': row " + std::to_string(r) + " has no value for column '" +
                               columns_[c].name + "' (set every column before starting the next row)");
  }
  rows_.emplace_back(columns_.size());
  set_.emplace_back(columns_.size(), false);
  return RowBuilder(*this, rows_.size() - 1);
}

// One setter body: find the column, check the type, store.
template <typename T>
static void set_cell(ResultTable& t, std::vector<std::vector<Value>>& rows, std::vector<std::vector<bool>>& set,
                     size_t row, const std::string& column, ColumnType type, T v) {
  const int c = t.column_index(column);
  if (c < 0) {
    std::string names;
    for (const auto& col : t.columns()) names += (names.empty() ? "" : ", ") + col.name;
    PT_FAIL("table '" + t.name() + "' has no column '" + column + "' (columns: " + names + ")");
  }
  const Column& col = t.columns()[static_cast<size_t>(c)];
  PT_CHECK(col.type == type, "table '" + t.name() + "': column '" + column + "' holds " + type_name(col.type) +
                                 " values, not " + type_name(type));
  rows[row][static_cast<size_t>(c)] = Value(std::move(v));
  set[row][static_cast<size_t>(c)] = true;
}

ResultTable::RowBuilder& ResultTable::RowBuilder::set(const std::string& column, int64_t v) {
  // An integer is a fine value for a double column (batch sizes, counts); not the reverse.
  const int c = table_.column_index(column);
  if (c >= 0 && table_.columns_[static_cast<size_t>(c)].type == ColumnType::Double)
    return set(column, static_cast<double>(v));
  set_cell(table_, table_.rows_, table_.set_, row_, column, ColumnType::Int, v);
  return *this;
}
ResultTable::RowBuilder& ResultTable::RowBuilder::set(const std::string& column, double v) {
  set_cell(table_, table_.rows_, table_.set_, row_, column, ColumnType::Double, v);
  return *this;
}
ResultTable::RowBuilder& ResultTable::RowBuilder::set(const std::string& column, const std::string& v) {
  set_cell(table_, table_.rows_, table_.set_, row_, column, ColumnType::String, v);
  return *this;
}

ResultTable::RowBuilder& ResultTable::RowBuilder::fill_unset() {
  for (size_t c = 0; c < table_.columns_.size(); ++c) {
    if (table_.set_[row_][c]) continue;
    const Column& col = table_.columns_[c];
    switch (col.type) {
      case ColumnType::Int: set(col.name, int64_t{0}); break;
      case ColumnType::Double: set(col.name, std::numeric_limits<double>::quiet_NaN()); break;
      case ColumnType::String: set(col.name, std::string()); break;
    }
  }
  return *this;
}

void ResultTable::validate() const {
  for (size_t r = 0; r < rows_.size(); ++r)
    for (size_t c = 0; c < columns_.size(); ++c)
      PT_CHECK(set_[r][c], "table '" + name_ + "': row " + std::to_string(r) + " has no value for column '" +
                               columns_[c].name + "'");
}

void ResultTable::print(std::ostream& os) const {
  validate();
  const size_t nc = columns_.size();
  std::vector<std::vector<std::string>> cells(rows_.size(), std::vector<std::string>(nc));
  std::vector<size_t> width(nc);
  for (size_t c = 0; c < nc; ++c) width[c] = columns_[c].name.size();
  for (size_t r = 0; r < rows_.size(); ++r)
    for (size_t c = 0; c < nc; ++c) {
      cells[r][c] = format_cell(rows_[r][c], columns_[c]);
      width[c] = std::max(width[c], cells[r][c].size());
    }
  // Strings left-aligned, numbers right-aligned (so their points line up); two-space gaps.
  auto line = [&](auto cell_of) {
    std::string out;
    for (size_t c = 0; c < nc; ++c) {
      const std::string s = cell_of(c);
      const std::string pad(width[c] - s.size(), ' ');
      const bool left = columns_[c].type == ColumnType::String;
      out += (c ? "  " : "") + (left ? s + pad : pad + s);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();  // an empty last cell
    os << out << "\n";
  };
  line([&](size_t c) { return columns_[c].name; });
  size_t total = 0;
  for (size_t c = 0; c < nc; ++c) total += width[c] + (c ? 2 : 0);
  os << std::string(total, '-') << "\n";
  for (size_t r = 0; r < rows_.size(); ++r) line([&](size_t c) { return cells[r][c]; });
}

}  // namespace pt::io
