#pragma once
// Where a result came from: every output file records the exact command, seed and version that produced it.
//
//   Provenance p = make_provenance(argc, argv, seed);
//   write_csv_atomically(dir / "theory.csv", table, p);   // "# rankscope 0.1.0 (git abc) seed=1 command=..." first
//   write_manifest(dir, p, extra_json);                   // manifest.json: argv, seed, version, git sha, timings
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rankscope {

struct Provenance {
    std::vector<std::string> argv;
    std::string command;     // argv joined with shell quoting
    std::uint64_t seed = 0;
    std::string version;     // RANKSCOPE_VERSION
    std::string git_sha;     // of the build
    std::string started_at;  // UTC, ISO 8601
    int threads = 1;
    std::string device = "cpu";  // where the models ran (--device)
    std::string working_directory;  // where relative paths in argv were resolved
    std::string subcommand;         // "model", "paths sample": which command wrote the folder (set_results_directory)
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

Provenance make_provenance(int argc, const char* const* argv, std::uint64_t seed, int threads);
std::string version_string();  // "rankscope 0.1.0 (git abc123def456)"
// What built and runs the computation (build_description.cpp): {"libtorch": "2.13.0", "mkl": true, "lapack": true,
// "cuda": false, "compiler": "g++ 12.2.0"}, every manifest's "build"; and as one line for the report's header.
nlohmann::json build_json();
std::string build_summary();  // "libtorch 2.13.0 (MKL, CPU only), g++ 12.2.0"
nlohmann::json provenance_json(const Provenance& provenance);
// "# key: value" lines for the top of a CSV file (pandas: read_csv(path, comment='#')).
std::string csv_provenance_lines(const Provenance& provenance);

// A tidy CSV table: one header row, then rows of already-formatted cells.
struct CsvTable {
    std::vector<std::string> columns;
    std::vector<std::vector<std::string>> rows;
    void add(std::vector<std::string> row);
    std::string to_string() const;  // header + rows, RFC 4180 quoting where needed
};
std::string format_number(double value);  // shortest round-trip ("%.17g"-exact), "nan"/"inf" spelled out

void write_csv_atomically(const std::filesystem::path& path, const CsvTable& table, const Provenance& provenance);
void write_json_atomically(const std::filesystem::path& path, nlohmann::json document, const Provenance& provenance);
// manifest.json in `directory`: provenance, wall time and peak resident memory so far, the malloc in use (rankscope
// links tcmalloc: allocator.hpp), `extra` merged in, and "files_read": every input file (weights, configs, tokenizers,
// texts) with its size, time and SHA-256 (io.hpp: files_read_records).
void write_manifest(const std::filesystem::path& directory, const Provenance& provenance, const nlohmann::json& extra);

}  // namespace rankscope
