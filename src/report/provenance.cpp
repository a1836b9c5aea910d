#include "rankscope/provenance.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "rankscope/allocator.hpp"
#include "rankscope/build_info.hpp"
#include "rankscope/git_sha.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {
// One word of the recorded command, quoted so that the command can be pasted into a shell and stays on ONE line (it is
// written into '#' comment lines of CSV files and gnuplot scripts, where a newline would end the comment).
std::string shell_quote(const std::string& word) {
    if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=,:+@%") ==
                             std::string::npos)
        return word;
    const bool control = std::any_of(word.begin(), word.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (control) {  // bash's $'...' form: \n, \t, \xHH, \\, \'
        std::string quoted = "$'";
        for (char c : word) {
            const auto u = static_cast<unsigned char>(c);
            if (c == '\\' || c == '\'') quoted += std::string("\\") + c;
            else if (c == '\n') quoted += "\\n";
            else if (c == '\t') quoted += "\\t";
            else if (u < 0x20 || u == 0x7f) quoted += fmt::format("\\x{:02x}", u);
            else quoted += c;
        }
        return quoted + "'";
    }
    std::string quoted = "'";
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}
}  // namespace

std::string version_string() { return fmt::format("rankscope {} (git {})", RANKSCOPE_VERSION, RANKSCOPE_GIT_SHA); }

Provenance make_provenance(int argc, const char* const* argv, std::uint64_t seed, int threads) {
    Provenance p;
    for (int i = 0; i < argc; ++i) p.argv.emplace_back(argv[i]);
    for (const auto& word : p.argv) {
        if (!p.command.empty()) p.command += ' ';
        p.command += shell_quote(word);
    }
    p.seed = seed;
    p.threads = threads;
    p.version = RANKSCOPE_VERSION;
    p.git_sha = RANKSCOPE_GIT_SHA;
    const std::time_t now = std::time(nullptr);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    p.started_at = buffer;
    std::error_code error;
    p.working_directory = std::filesystem::current_path(error).string();
    return p;
}

nlohmann::json provenance_json(const Provenance& p) {
    return {{"command", p.command}, {"argv", p.argv},       {"seed", p.seed},         {"version", p.version},
            {"git_sha", p.git_sha}, {"started_at", p.started_at}, {"threads", p.threads},
            {"device", p.device}, {"working_directory", p.working_directory}, {"subcommand", p.subcommand}};
}

std::string csv_provenance_lines(const Provenance& p) {
    return fmt::format("# produced by: {}\n# command: {}\n# seed: {}\n# started: {}\n", version_string(), p.command,
                       p.seed, p.started_at);
}

void CsvTable::add(std::vector<std::string> row) { rows.push_back(std::move(row)); }

std::string CsvTable::to_string() const {
    auto cell = [](const std::string& text) {
        if (text.find_first_of(",\"\n") == std::string::npos) return text;
        std::string quoted = "\"";
        for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
        return quoted + "\"";
    };
    std::string out;
    auto emit = [&](const std::vector<std::string>& row) {
        for (std::size_t i = 0; i < row.size(); ++i) {
            if (i) out += ',';
            out += cell(row[i]);
        }
        out += '\n';
    };
    emit(columns);
    for (const auto& row : rows) emit(row);
    return out;
}

// format_number: src/report/format_number.cpp (torch-free: the parsers' fuzz build links it).

void write_csv_atomically(const std::filesystem::path& path, const CsvTable& table, const Provenance& provenance) {
    write_file_atomically(path.string(), csv_provenance_lines(provenance) + table.to_string());
}

void write_json_atomically(const std::filesystem::path& path, nlohmann::json document, const Provenance& provenance) {
    document["provenance"] = provenance_json(provenance);
    write_file_atomically(path.string(), json_text(document, 2) + "\n");
}

void write_manifest(const std::filesystem::path& directory, const Provenance& provenance, const nlohmann::json& extra) {
    nlohmann::json manifest = provenance_json(provenance);
    manifest["wall_seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - provenance.start).count();
    manifest["peak_resident_bytes"] = peak_resident_bytes();
    manifest["allocator"] = allocator_in_use();
    manifest["build"] = build_json();
    manifest.update(extra);
    manifest["files_read"] = files_read_records(directory.string());  // the weights, configs and texts behind the result
    write_file_atomically((directory / "manifest.json").string(), json_text(manifest, 2) + "\n");
}

}  // namespace rankscope
