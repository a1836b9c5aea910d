#include "rankscope/table.hpp"

#include <cmath>
#include <stdexcept>

#include "rankscope/provenance.hpp"

namespace rankscope {

Table::Table(const std::vector<std::pair<std::string, Kind>>& columns) {
    for (const auto& [name, kind] : columns) {
        Column column;
        column.name = name;
        column.kind = kind;
        columns_.push_back(std::move(column));
    }
}

void Table::add(const std::vector<Cell>& row) {
    if (row.size() != columns_.size())
        throw std::logic_error("table row of " + std::to_string(row.size()) + " cells for " +
                               std::to_string(columns_.size()) + " columns");
    for (std::size_t i = 0; i < row.size(); ++i) {
        const Cell& cell = row[i];
        Column& column = columns_[i];
        const bool fits = (column.kind == Integer && cell.type == Cell::Signed) ||
                          (column.kind == Unsigned && cell.type == Cell::UnsignedValue) ||
                          (column.kind == Real && (cell.type == Cell::Double || cell.type == Cell::Missing)) ||
                          (column.kind == Text && cell.type == Cell::String);
        if (!fits) throw std::logic_error("table cell of the wrong type in column '" + column.name + "'");
    }
    for (std::size_t i = 0; i < row.size(); ++i) {
        const Cell& cell = row[i];
        Column& column = columns_[i];
        switch (column.kind) {
            case Integer: column.integers.push_back(cell.integer); break;
            case Unsigned: column.unsigneds.push_back(cell.unsigned_integer); break;
            case Real:
                column.reals.push_back(cell.type == Cell::Missing ? NAN : cell.real);
                column.missing.push_back(cell.type == Cell::Missing);
                break;
            case Text: column.texts.push_back(cell.text); break;
        }
    }
    ++rows_;
}

const Table::Column& Table::column(const std::string& name) const {
    for (const auto& column : columns_)
        if (column.name == name) return column;
    throw std::logic_error("no table column '" + name + "'");
}

CsvTable Table::to_csv() const {
    CsvTable csv;
    for (const auto& column : columns_) csv.columns.push_back(column.name);
    for (std::size_t r = 0; r < rows_; ++r) {
        std::vector<std::string> cells;
        for (const auto& column : columns_) {
            switch (column.kind) {
                case Integer: cells.push_back(std::to_string(column.integers[r])); break;
                case Unsigned: cells.push_back(std::to_string(column.unsigneds[r])); break;
                case Real: cells.push_back(column.missing[r] ? "" : format_number(column.reals[r])); break;
                case Text: cells.push_back(column.texts[r]); break;
            }
        }
        csv.add(std::move(cells));
    }
    return csv;
}

}  // namespace rankscope
