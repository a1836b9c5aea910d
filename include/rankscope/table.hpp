#pragma once
// A tidy table with typed columns: what a command writes as CSV (to_csv) and what the Python module returns as one
// array per column, from the same function, so the two can never disagree on a column. Reals are written with
// format_number (shortest round-trip), so a reader of the CSV gets back the identical doubles.
//
//   Table table({{"variant", Table::Text}, {"layer", Table::Integer}, {"mean", Table::Real}});
//   table.add({"SAN", 3, 0.25});
//   write_csv_atomically(out / "residual.csv", table.to_csv(), provenance);
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rankscope {

struct CsvTable;

class Table {
public:
    enum Kind {
        Integer,   // int64
        Unsigned,  // uint64 (seeds)
        Real,      // double; a missing cell is NaN here and an empty CSV cell
        Text,
    };
    // One cell of a row; its kind must match the column's (Missing only in Real columns).
    struct Cell {
        enum Type { Missing, Signed, UnsignedValue, Double, String } type = Missing;
        std::int64_t integer = 0;
        std::uint64_t unsigned_integer = 0;
        double real = 0;
        std::string text;
        Cell() = default;  // missing
        Cell(int value) : type(Signed), integer(value) {}
        Cell(long value) : type(Signed), integer(value) {}
        Cell(long long value) : type(Signed), integer(value) {}
        Cell(unsigned long value) : type(UnsignedValue), unsigned_integer(value) {}
        Cell(unsigned long long value) : type(UnsignedValue), unsigned_integer(value) {}
        Cell(double value) : type(Double), real(value) {}
        Cell(std::string value) : type(String), text(std::move(value)) {}
        Cell(const char* value) : type(String), text(value) {}
    };
    struct Column {
        std::string name;
        Kind kind = Real;
        std::vector<std::int64_t> integers;    // Integer
        std::vector<std::uint64_t> unsigneds;  // Unsigned
        std::vector<double> reals;             // Real
        std::vector<char> missing;             // Real: 1 where the cell is missing
        std::vector<std::string> texts;        // Text
    };

    explicit Table(const std::vector<std::pair<std::string, Kind>>& columns);
    // Throws std::logic_error when the row's length or a cell's type does not fit the columns (a programming error).
    void add(const std::vector<Cell>& row);
    const std::vector<Column>& columns() const { return columns_; }
    const Column& column(const std::string& name) const;  // throws std::logic_error when absent
    std::size_t rows() const { return rows_; }
    CsvTable to_csv() const;

private:
    std::vector<Column> columns_;
    std::size_t rows_ = 0;
};

}  // namespace rankscope
