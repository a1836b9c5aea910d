// Sweep grids: reading (JSON through nlohmann::json, TOML through toml++), expansion into cells, cell keys, and the
// tidy union of the cells' tables.
#include <fmt/ranges.h>
#include <fmt/format.h>
#include <toml++/toml.h>
#include <utf8proc.h>

#include <algorithm>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "rankscope/error.hpp"
#include "rankscope/file_hash.hpp"
#include "rankscope/io.hpp"
#include "rankscope/provenance.hpp"
#include "rankscope/sweep.hpp"

namespace rankscope {
namespace {

// The flags a grid may not set: the sweep sets --out and --threads for every cell; --format only changes a cell's
// standard output, which the sweep does not keep, and --help computes nothing.
const std::set<std::string> kReservedSettings = {"out", "threads", "format", "help"};

void check_setting_name(const std::string& name, const std::string& path) {
    const bool valid = !name.empty() && name.front() != '-' &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
                       });
    if (!valid)
        throw Error(fmt::format("setting '{}' is not a flag name (lower-case letters, digits and '-', without the leading "
                                "'--')",
                                name),
                    path);
    if (name == "out" || name == "threads")
        throw Error(fmt::format("setting '{}' is set by the sweep itself (each cell gets its own --out, and --threads from "
                                "--cell-threads)",
                                name),
                    path);
    if (kReservedSettings.count(name))
        throw Error(fmt::format("setting '{}' changes only what a cell prints, which the sweep does not keep (its tables "
                                "come from each cell's files)",
                                name),
                    path);
}

// A JSON scalar as a setting.
SweepSetting json_setting(const std::string& name, const nlohmann::ordered_json& value, const std::string& path) {
    SweepSetting setting;
    setting.name = name;
    if (value.is_boolean()) {
        setting.boolean = true;
        setting.value = value.get<bool>() ? "true" : "false";
    } else if (value.is_number_integer()) {
        setting.value = value.is_number_unsigned() ? std::to_string(value.get<std::uint64_t>())
                                                   : std::to_string(value.get<std::int64_t>());
    } else if (value.is_number_float()) {
        setting.value = format_number(value.get<double>());
    } else if (value.is_string()) {
        setting.value = value.get<std::string>();
    } else if (value.is_array()) {
        throw Error(fmt::format("setting '{}' is a list here: a flag's list is one string (\"mean,rank1\"), and values "
                                "to sweep over go under \"axes\"",
                                name),
                    path);
    } else {
        throw Error(fmt::format("setting '{}' must be a number, a string or a boolean (got {})", name, value.type_name()),
                    path);
    }
    return setting;
}

// `restore` maps toml++'s text back to the file's (see hide_non_ascii below).
SweepSetting toml_setting(const std::string& name, const toml::node& value, const std::string& path,
                          const std::function<std::string(const std::string&)>& restore) {
    SweepSetting setting;
    setting.name = name;
    if (auto b = value.as_boolean()) {
        setting.boolean = true;
        setting.value = b->get() ? "true" : "false";
    } else if (auto i = value.as_integer()) {
        setting.value = std::to_string(i->get());
    } else if (auto f = value.as_floating_point()) {
        setting.value = format_number(f->get());
    } else if (auto s = value.as_string()) {
        setting.value = s->get();
    } else if (value.is_array()) {
        throw Error(fmt::format("setting '{}' is a list here: a flag's list is one string (\"mean,rank1\"), and values "
                                "to sweep over go under [axes]",
                                restore(name)),
                    path);
    } else {
        throw Error(fmt::format("setting '{}' must be a number, a string or a boolean", restore(name)), path);
    }
    return setting;
}

void finish_grid(SweepGrid& grid) {
    const auto& experiments = sweep_experiments();
    if (grid.experiment.empty())
        throw Error("no experiment: the grid needs \"experiment\" = one of " + fmt::format("{}", fmt::join(experiments, ", ")),
                    grid.path);
    if (std::find(experiments.begin(), experiments.end(), grid.experiment) == experiments.end())
        throw Error(fmt::format("unknown experiment '{}' (expected {})", grid.experiment, fmt::join(experiments, ", ")),
                    grid.path);
    std::set<std::string> names;
    for (const auto& setting : grid.fixed) {
        check_setting_name(setting.name, grid.path);
        names.insert(setting.name);
    }
    if (grid.axes.empty()) throw Error("no axes: a sweep needs at least one axis with values", grid.path);
    for (const auto& axis : grid.axes) {
        check_setting_name(axis.name, grid.path);
        if (!names.insert(axis.name).second)
            throw Error(fmt::format("setting '{}' is both fixed and an axis", axis.name), grid.path);
        if (axis.values.empty()) throw Error(fmt::format("axis '{}' has no values", axis.name), grid.path);
        std::set<std::string> seen;
        for (const auto& value : axis.values)
            if (!seen.insert(value.value).second)
                throw Error(fmt::format("axis '{}' repeats the value {}", axis.name, value.value), grid.path);
    }
}

SweepGrid parse_json_grid(const std::string& text, const std::string& path) try {
    // Keeps the file's order of axes and fixed settings; the checks of every JSON reader (depth, NUL, one line).
    const nlohmann::ordered_json document = parse_ordered_json_text(text, path);
    if (!document.is_object()) throw Error("a grid must be a JSON object", path);
    SweepGrid grid;
    grid.path = path;
    for (const auto& [key, value] : document.items()) {
        if (key == "experiment") {
            if (!value.is_string()) throw Error("\"experiment\" must be a string", path);
            grid.experiment = value.get<std::string>();
        } else if (key == "fixed") {
            if (!value.is_object()) throw Error("\"fixed\" must be an object of settings", path);
            for (const auto& [name, setting] : value.items()) grid.fixed.push_back(json_setting(name, setting, path));
        } else if (key == "axes") {
            if (!value.is_object()) throw Error("\"axes\" must be an object of lists", path);
            for (const auto& [name, values] : value.items()) {
                if (!values.is_array()) throw Error(fmt::format("axis '{}' must be a list of values", name), path);
                SweepAxis axis;
                axis.name = name;
                for (const auto& item : values) axis.values.push_back(json_setting(name, item, path));
                grid.axes.push_back(std::move(axis));
            }
        } else {
            throw Error(fmt::format("unknown key '{}' (expected experiment, fixed, axes)", key), path);
        }
    }
    return grid;
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, path);
}

// toml++ 3.3.0 (Debian 12) classifies non-ASCII characters with generated bit tables, and some are wrong: asked
// whether U+02FF (or anything in U+00A1..U+0499, U+2D6E..U+3167, U+FC66..U+FEFE) is whitespace, it reaches
// __builtin_unreachable() — undefined behaviour on a grid file (found by fuzz_sweep_toml: "\xcb\xbf" at the start of a
// line, and "\xcf\x9c" after a malformed value, where toml++'s error path scans characters a string would have held).
// So toml++ never sees a non-ASCII character: each distinct one is replaced by its own code point of Unicode's
// private-use planes 15-16 (U+F0000...), which every classifier rejects early, and the strings read from the document
// are mapped back. Valid TOML reads the same, except that an escape into planes 15-16 is refused (it could decode to a
// stand-in); invalid TOML is still refused by toml++, now without undefined behaviour.
struct HiddenNonAscii {
    std::string text;
    std::map<utf8proc_int32_t, utf8proc_int32_t> original;  // stand-in -> the file's character

    std::string restore(const std::string& value) const {
        if (original.empty()) return value;
        std::string out;
        const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(value.data());
        for (std::size_t i = 0; i < value.size();) {
            utf8proc_int32_t c = 0;
            const auto size = utf8proc_iterate(bytes + i, static_cast<utf8proc_ssize_t>(value.size() - i), &c);
            if (size <= 0) return value;  // toml++ only returns what it decoded: never here
            const auto it = original.find(c);
            if (it == original.end()) {
                out.append(value, i, static_cast<std::size_t>(size));
            } else {
                utf8proc_uint8_t encoded[4];
                out.append(reinterpret_cast<const char*>(encoded),
                           static_cast<std::size_t>(utf8proc_encode_char(it->second, encoded)));
            }
            i += static_cast<std::size_t>(size);
        }
        return out;
    }
};

HiddenNonAscii hide_non_ascii(const std::string& text, const std::string& path) {
    constexpr utf8proc_int32_t kPerPlane = 0xFFFE;  // U+F0000..U+FFFFD and U+100000..U+10FFFD (not U+xFFFE/U+xFFFF)
    HiddenNonAscii hidden;
    // An escape into planes 15-16 (\U000Fxxxx, \U0010xxxx) could decode to a stand-in and be mapped back to another
    // character: refused (private-use characters have no place in a grid; a literal string holding such text too).
    for (std::size_t at = text.find("\\U"); at != std::string::npos; at = text.find("\\U", at + 1))
        if (text.compare(at + 2, 3, "000") == 0 && at + 5 < text.size() && (text[at + 5] == 'F' || text[at + 5] == 'f'))
            throw Error("not valid TOML here: an escape into Unicode's private-use planes 15-16 (\\U000F...)", path);
        else if (text.compare(at + 2, 4, "0010") == 0)
            throw Error("not valid TOML here: an escape into Unicode's private-use planes 15-16 (\\U0010...)", path);
    std::map<utf8proc_int32_t, utf8proc_int32_t> stand_in;  // the file's character -> stand-in
    const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    for (std::size_t i = 0; i < text.size();) {
        if (static_cast<unsigned char>(text[i]) < 0x80) {
            hidden.text += text[i++];
            continue;
        }
        utf8proc_int32_t c = 0;
        const auto size = utf8proc_iterate(bytes + i, static_cast<utf8proc_ssize_t>(text.size() - i), &c);
        if (size <= 0 || c < 0) throw Error(fmt::format("not valid TOML: not UTF-8 at byte {}", i + 1), path);
        auto it = stand_in.find(c);
        if (it == stand_in.end()) {
            const auto k = static_cast<utf8proc_int32_t>(stand_in.size());
            if (k >= 2 * kPerPlane) throw Error("not valid TOML here: too many distinct non-ASCII characters", path);
            it = stand_in.emplace(c, 0xF0000 + (k / kPerPlane) * 0x10000 + k % kPerPlane).first;
            hidden.original[it->second] = c;
        }
        utf8proc_uint8_t encoded[4];
        hidden.text.append(reinterpret_cast<const char*>(encoded),
                           static_cast<std::size_t>(utf8proc_encode_char(it->second, encoded)));
        i += static_cast<std::size_t>(size);
    }
    return hidden;
}

SweepGrid parse_toml_grid(const std::string& text, const std::string& path) {
    const HiddenNonAscii hidden = hide_non_ascii(text, path);
    toml::table document;
    try {
        document = toml::parse(hidden.text, path);
    } catch (const toml::parse_error& error) {
        throw Error(fmt::format("not valid TOML: {} (line {})", hidden.restore(std::string(error.description())),
                                error.source().begin.line),
                    path);
    }
    const std::function<std::string(const std::string&)> restore = [&](const std::string& s) { return hidden.restore(s); };
    SweepGrid grid;
    grid.path = path;
    for (const auto& [key, value] : document) {
        const std::string name(key.str());
        if (name == "experiment") {
            if (!value.is_string()) throw Error("experiment must be a string", path);
            grid.experiment = hidden.restore(value.as_string()->get());
        } else if (name == "fixed") {
            if (!value.is_table()) throw Error("[fixed] must be a table of settings", path);
            for (const auto& [setting_name, setting] : *value.as_table())
                grid.fixed.push_back(toml_setting(std::string(setting_name.str()), setting, path, restore));
        } else if (name == "axes") {
            if (!value.is_table()) throw Error("[axes] must be a table of lists", path);
            for (const auto& [axis_name, values] : *value.as_table()) {
                SweepAxis axis;
                axis.name = std::string(axis_name.str());
                if (!values.is_array())
                    throw Error(fmt::format("axis '{}' must be a list of values", restore(axis.name)), path);
                for (const auto& item : *values.as_array()) axis.values.push_back(toml_setting(axis.name, item, path, restore));
                grid.axes.push_back(std::move(axis));
            }
        } else {
            throw Error(fmt::format("unknown key '{}' (expected experiment, [fixed], [axes])", restore(name)), path);
        }
    }
    // toml++ keeps a table's keys sorted; the file's order of axes is their source order.
    std::sort(grid.axes.begin(), grid.axes.end(), [&](const SweepAxis& a, const SweepAxis& b) {
        const auto* axes = document["axes"].as_table();
        return axes->get(a.name)->source().begin < axes->get(b.name)->source().begin;
    });
    if (const auto* fixed = document["fixed"].as_table())
        std::sort(grid.fixed.begin(), grid.fixed.end(), [&](const SweepSetting& a, const SweepSetting& b) {
            return fixed->get(a.name)->source().begin < fixed->get(b.name)->source().begin;
        });
    // The names and values as the file wrote them (the sorting above looked them up in toml++'s text).
    auto restore_setting = [&](SweepSetting& setting) {
        setting.name = hidden.restore(setting.name);
        setting.value = hidden.restore(setting.value);
    };
    for (auto& setting : grid.fixed) restore_setting(setting);
    for (auto& axis : grid.axes) {
        axis.name = hidden.restore(axis.name);
        for (auto& setting : axis.values) restore_setting(setting);
    }
    return grid;
}

// The field as written, without the line end: its quotes count for where the record ends.
bool inside_quotes_after(const std::string& text, std::size_t begin, std::size_t end, bool inside) {
    for (std::size_t i = begin; i < end; ++i)
        if (text[i] == '"') inside = !inside;
    return inside;
}

}  // namespace

const std::vector<std::string>& sweep_experiments() {
    // paths and task take a second word (their subcommand, their task): a flag cannot set it.
    static const std::vector<std::string> experiments = {
        "theory", "model", "paths count", "paths sample", "task sort", "task hull", "task memorize", "task circle",
        "width-depth", "measure", "trainability", "failure-modes"};
    return experiments;
}

std::vector<std::string> sweep_command_words(const std::string& experiment) {
    std::vector<std::string> words;
    std::istringstream in(experiment);
    for (std::string word; in >> word;) words.push_back(word);
    return words;
}

SweepGrid parse_sweep_grid(const std::string& text, const std::string& format, const std::string& path) {
    SweepGrid grid;
    if (format == "json") grid = parse_json_grid(text, path);
    else if (format == "toml") grid = parse_toml_grid(text, path);
    else throw Error("unknown grid format '" + format + "' (expected json or toml)", path);
    finish_grid(grid);
    return grid;
}

SweepGrid read_sweep_grid(const std::filesystem::path& path) {
    const std::string extension = path.extension().string();
    if (extension != ".json" && extension != ".toml")
        throw Error("a grid file ends in .json or .toml", path.string());
    // A regular file of at most 64 MiB, checked before reading (a FIFO blocked here, /dev/zero filled memory).
    const std::string text = read_file_limited(path.string(), kMaxJsonFileBytes, "grid file");
    return parse_sweep_grid(text, extension.substr(1), path.string());
}

std::string sweep_cell_key(const std::string& experiment, std::vector<SweepSetting> settings) {
    std::sort(settings.begin(), settings.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    std::string canonical = "rankscope sweep cell\nexperiment=" + experiment + "\n";
    // A false boolean leaves its flag out of the command: the key of the same command must not change with it (a grid
    // that only added allow-nonfinite = false re-ran every cell).
    for (const auto& setting : settings)
        if (!(setting.boolean && setting.value == "false"))
            canonical += setting.name + (setting.boolean ? "?=" : "=") + setting.value + "\n";
    return sha256_hex(canonical).substr(0, 16);
}

std::vector<std::string> sweep_cell_arguments(const std::string& experiment, const std::vector<SweepSetting>& settings,
                                              const std::set<std::string>& positionals) {
    std::vector<std::string> arguments = sweep_command_words(experiment), values;
    const auto after_command_words = static_cast<std::ptrdiff_t>(arguments.size());
    for (const auto& setting : settings) {
        if (positionals.count(setting.name)) {
            values.push_back(setting.value.rfind('-', 0) == 0 ? "./" + setting.value : setting.value);
        } else if (setting.boolean) {
            if (setting.value == "true") arguments.push_back("--" + setting.name);
        } else {
            arguments.insert(arguments.end(), {"--" + setting.name, setting.value});
        }
    }
    arguments.insert(arguments.begin() + after_command_words, values.begin(), values.end());
    return arguments;
}

std::vector<SweepCell> expand_sweep_grid(const SweepGrid& grid, std::size_t limit) {
    std::size_t total = 1;
    for (const auto& axis : grid.axes) {
        total *= axis.values.size();
        if (total > limit) throw Error(fmt::format("the grid has more than {} cells", limit), grid.path);
    }
    std::vector<SweepCell> cells;
    cells.reserve(total);
    std::vector<std::size_t> position(grid.axes.size(), 0);
    for (std::size_t index = 0; index < total; ++index) {
        SweepCell cell;
        cell.index = static_cast<int>(index);
        // Mixed radix, last axis fastest.
        std::size_t rest = index;
        for (std::size_t a = grid.axes.size(); a-- > 0;) {
            position[a] = rest % grid.axes[a].values.size();
            rest /= grid.axes[a].values.size();
        }
        for (std::size_t a = 0; a < grid.axes.size(); ++a) cell.axes.push_back(grid.axes[a].values[position[a]]);
        cell.fixed = grid.fixed;
        cell.settings = cell.axes;
        cell.settings.insert(cell.settings.end(), grid.fixed.begin(), grid.fixed.end());
        std::sort(cell.settings.begin(), cell.settings.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
        cell.key = sweep_cell_key(grid.experiment, cell.settings);
        cell.arguments = sweep_cell_arguments(grid.experiment, cell.settings);
        cells.push_back(std::move(cell));
    }
    return cells;
}

const std::vector<std::string>& sweep_primary_tables(const std::string& experiment) {
    static const std::map<std::string, std::vector<std::string>> tables = {
        {"theory", {"theory.csv"}},
        {"model", {"residual.csv"}},
        {"paths", {"paths.csv", "path_counts.csv"}},
        {"task", {"residual.csv", "training.csv", "circle_summary.csv"}},
        {"width-depth", {"width_depth.csv"}},
        {"measure", {"measures.csv"}},
        {"trainability", {"trainability_summary.csv"}},
        {"failure-modes", {"failure_modes_summary.csv"}},
    };
    const auto found = tables.find(sweep_command_words(experiment).at(0));
    if (found == tables.end()) throw Error("no sweep tables for experiment '" + experiment + "'");
    return found->second;
}

std::string sweep_setting_column(const std::string& setting_name) {
    std::string column = "cell_" + setting_name;
    std::replace(column.begin(), column.end(), '-', '_');
    return column;
}

std::vector<std::string> csv_records(const std::string& text) {
    std::vector<std::string> records;
    std::size_t begin = 0;
    bool at_record_start = true;
    bool inside = false;
    std::string record;
    while (begin < text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        std::size_t content_end = end;
        if (content_end > begin && text[content_end - 1] == '\r') --content_end;
        if (at_record_start && !inside && content_end > begin && text[begin] == '#') {
            begin = end + 1;  // a provenance comment line
            continue;
        }
        if (at_record_start) record.clear();
        else record += '\n';
        record.append(text, begin, content_end - begin);
        inside = inside_quotes_after(text, begin, content_end, inside);
        at_record_start = !inside;
        if (!inside && !(record.empty() && content_end == begin)) records.push_back(record);
        begin = end + 1;
    }
    if (inside) throw Error("a quoted CSV field is not closed");
    return records;
}

std::vector<std::string> csv_fields(const std::string& record) {
    std::vector<std::string> fields(1);
    bool inside = false;
    for (std::size_t i = 0; i < record.size(); ++i) {
        const char c = record[i];
        if (inside) {
            if (c == '"' && i + 1 < record.size() && record[i + 1] == '"') fields.back() += '"', ++i;
            else if (c == '"') inside = false;
            else fields.back() += c;
        } else if (c == '"') {
            inside = true;
        } else if (c == ',') {
            fields.emplace_back();
        } else {
            fields.back() += c;
        }
    }
    return fields;
}

std::string merge_cell_tables(const std::vector<const SweepCell*>& cells, const std::vector<std::string>& tables,
                              const std::string& table_name) {
    if (cells.size() != tables.size()) throw Error("merge_cell_tables: one table per cell");
    auto quoted = [](const std::string& field) {
        if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
        std::string out = "\"";
        for (char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
        return out + "\"";
    };
    std::string header, out;
    for (std::size_t i = 0; i < cells.size(); ++i) {
        if (tables[i].empty()) continue;
        const auto records = csv_records(tables[i]);
        if (records.empty()) continue;
        const SweepCell& cell = *cells[i];
        // A cut or edited table (its last row short) is named here, not later as a row of the merged table.
        const std::size_t columns = csv_fields(records.front()).size();
        for (std::size_t r = 1; r < records.size(); ++r)
            if (const std::size_t fields = csv_fields(records[r]).size(); fields != columns)
                throw Error(fmt::format("row {} has {} fields for the {} columns of its header", r, fields, columns),
                            "cells/" + cell.key + "/" + table_name);
        if (header.empty()) {
            header = records.front();
            std::string line = "cell_key";
            for (const auto& setting : cell.axes) line += "," + quoted(sweep_setting_column(setting.name));
            for (const auto& setting : cell.fixed) line += "," + quoted(sweep_setting_column(setting.name));
            out += line + "," + header + "\n";
        } else if (records.front() != header) {
            throw Error(fmt::format("cell {} wrote {} with other columns than the cells before it", cell.key, table_name));
        }
        std::string prefix = cell.key;
        for (const auto& setting : cell.axes) prefix += "," + quoted(setting.value);
        for (const auto& setting : cell.fixed) prefix += "," + quoted(setting.value);
        for (std::size_t r = 1; r < records.size(); ++r) out += prefix + "," + records[r] + "\n";
    }
    return out;
}

}  // namespace rankscope
