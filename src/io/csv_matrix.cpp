#include <fstream>
#include <sstream>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

// Splits on commas, or on whitespace when the line has no comma.
std::vector<std::string> split_fields(const std::string& line) {
    std::vector<std::string> fields;
    if (line.find(',') != std::string::npos) {
        std::stringstream stream(line);
        std::string field;
        while (std::getline(stream, field, ',')) fields.push_back(field);
        if (!line.empty() && line.back() == ',') fields.emplace_back();
    } else {
        std::stringstream stream(line);
        std::string field;
        while (stream >> field) fields.push_back(field);
    }
    return fields;
}

bool parse_number(const std::string& field, double& value) {
    const auto first = field.find_first_not_of(" \t\r");
    const auto last = field.find_last_not_of(" \t\r");
    if (first == std::string::npos) return false;
    const std::string trimmed = field.substr(first, last - first + 1);
    char* end = nullptr;
    value = std::strtod(trimmed.c_str(), &end);
    return end == trimmed.c_str() + trimmed.size();
}

}  // namespace

HostArray read_csv_matrix(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error("cannot open file", path);
    std::vector<double> values;
    std::int64_t columns = -1, rows = 0, line_number = 0;
    std::string line;
    while (std::getline(in, line)) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
        const auto fields = split_fields(line);
        std::vector<double> row;
        bool numeric = true;
        for (const auto& field : fields) {
            double value;
            if (!parse_number(field, value)) {
                numeric = false;
                break;
            }
            row.push_back(value);
        }
        if (!numeric) {
            if (rows == 0 && columns < 0) {  // a header line
                columns = static_cast<std::int64_t>(fields.size());
                continue;
            }
            throw Error("line " + std::to_string(line_number) + " has a non-numeric field", path);
        }
        if (columns >= 0 && static_cast<std::int64_t>(row.size()) != columns)
            throw Error("line " + std::to_string(line_number) + " has " + std::to_string(row.size()) +
                            " columns, expected " + std::to_string(columns),
                        path);
        columns = static_cast<std::int64_t>(row.size());
        values.insert(values.end(), row.begin(), row.end());
        ++rows;
    }
    if (rows == 0) throw Error("no numeric rows", path);
    return make_f64_array({rows, columns}, values);
}

}  // namespace rankscope
