// .csv matrices. The rule (io.hpp, README): blank lines and '#' lines are skipped; a cell may be quoted ("1"); the first
// remaining line is a header iff every cell is non-empty and non-numeric; every other line must be all numbers, with
// the same number of cells.
// Anything else is an error naming the line and column, so no data row is ever dropped silently.
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

// Splits on commas, or on whitespace (spaces and tabs) when the line has no comma.
std::vector<std::string> split_fields(const std::string& line) {
    std::vector<std::string> fields;
    if (line.find(',') != std::string::npos) {
        std::size_t start = 0;
        for (std::size_t comma; (comma = line.find(',', start)) != std::string::npos; start = comma + 1)
            fields.push_back(line.substr(start, comma - start));
        fields.push_back(line.substr(start));
    } else {
        std::size_t at = 0;
        while (at < line.size()) {
            at = line.find_first_not_of(" \t", at);
            if (at == std::string::npos) break;
            const std::size_t end = std::min(line.find_first_of(" \t", at), line.size());
            fields.push_back(line.substr(at, end - at));
            at = end;
        }
    }
    return fields;
}

// The cell without surrounding blanks, and without one pair of surrounding double quotes: "1" is the number 1 (a
// spreadsheet's export may quote every cell; a quoted first row of numbers was read as a header and dropped).
std::string trim(const std::string& field) {
    const auto first = field.find_first_not_of(" \t");
    if (first == std::string::npos) return "";
    std::string cell = field.substr(first, field.find_last_not_of(" \t") - first + 1);
    if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') cell = cell.substr(1, cell.size() - 2);
    return cell;
}

// Whether the whole trimmed cell is one number in strtod's syntax (a header cell is not). `problem` gets why such a
// cell is still refused as data, "" when it is not: hexadecimal ("0x10" was read as 16), beyond float64 (1e400 was
// read as inf, and said "Inf at [1, 0]" of a file holding no inf), NaN or Inf (said with the line and column).
bool parse_number(const std::string& trimmed, double& value, std::string& problem) {
    if (trimmed.empty()) return false;
    char* end = nullptr;
    errno = 0;
    value = std::strtod(trimmed.c_str(), &end);
    if (end != trimmed.c_str() + trimmed.size()) return false;
    const std::size_t digits = trimmed.find_first_not_of("+-");
    std::string why;
    if (digits != std::string::npos && trimmed.compare(digits, 1, "0") == 0 && trimmed.size() > digits + 1 &&
        (trimmed[digits + 1] == 'x' || trimmed[digits + 1] == 'X'))
        why = "is hexadecimal (write it in decimal)";
    else if (errno == ERANGE && std::isinf(value))
        why = "is beyond the float64 range";  // 1e400: strtod gave inf, the file has no inf
    else if (!std::isfinite(value))
        why = "is not finite (the measures take finite matrices)";
    problem = why;
    return true;
}

}  // namespace

HostArray read_csv_matrix(const std::string& path) {
    const std::string contents = read_file_limited(path, kMaxCsvFileBytes, "CSV file");
    std::vector<double> values;
    std::int64_t columns = -1, rows = 0, line_number = 0;
    bool first_line = true;
    std::size_t start = 0;
    while (start < contents.size()) {
        std::size_t end = contents.find('\n', start);
        if (end == std::string::npos) end = contents.size();
        std::string line = contents.substr(start, end - start);
        start = end + 1;
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const auto first_char = line.find_first_not_of(" \t");
        if (first_char == std::string::npos || line[first_char] == '#') continue;
        const auto fields = split_fields(line);
        std::vector<std::string> cells;
        cells.reserve(fields.size());
        for (const auto& field : fields) cells.push_back(trim(field));
        if (first_line) {
            first_line = false;
            bool header = true;
            for (const auto& cell : cells) {
                double ignored;
                std::string refused;
                if (cell.empty() || parse_number(cell, ignored, refused)) header = false;
            }
            if (header) {
                columns = static_cast<std::int64_t>(cells.size());
                continue;
            }
        }
        if (columns >= 0 && static_cast<std::int64_t>(cells.size()) != columns)
            throw Error("line " + std::to_string(line_number) + " has " + std::to_string(cells.size()) +
                            " columns, expected " + std::to_string(columns),
                        path);
        for (std::size_t c = 0; c < cells.size(); ++c) {
            double value;
            std::string problem;
            const bool number = parse_number(cells[c], value, problem);
            if (number && !problem.empty())
                throw Error(fmt::format("line {}, column {}: '{}' {}", line_number, c + 1, printable(cells[c], 40), problem),
                            path);
            if (!number)
                throw Error("line " + std::to_string(line_number) + ", column " + std::to_string(c + 1) + ": " +
                                (cells[c].empty() ? std::string("empty cell")
                                                  : "'" + printable(cells[c], 40) + "' is not a number") +
                                (rows == 0 && columns < 0 ? " (a header line must have only non-empty, non-numeric cells)"
                                                          : ""),
                            path);
            values.push_back(value);
        }
        columns = static_cast<std::int64_t>(cells.size());
        ++rows;
    }
    if (rows == 0) throw Error("no numeric rows", path);
    return make_f64_array({rows, columns}, values);
}

}  // namespace rankscope
