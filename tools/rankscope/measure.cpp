// rankscope measure FILE — every measure of SPEC.md §2 for a matrix (or a batch of matrices) read from a file.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/io.hpp"
#include "rankscope/measure_all.hpp"

namespace rankscope::cli {
namespace {

struct MeasureOptions {
    CommonOptions common;
    std::string file;  // "" = the built-in example
    std::vector<std::string> centers;
    double rank_tolerance = -1;
};

// The built-in example: 16 tokens × 8 features drawn N(0,1) from the seed, plus a shared offset so the rows are
// partly aligned (a typical hidden state).
HostArray builtin_example(std::uint64_t seed) {
    std::mt19937_64 generator(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> values(16 * 8), offset(8);
    for (auto& v : offset) v = 2.0 * normal(generator);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = offset[i % 8] + normal(generator);
    return make_f64_array({16, 8}, values);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string text;
    for (auto e : shape) text += (text.empty() ? "" : " x ") + std::to_string(e);
    return text;
}

void run_measure(const MeasureOptions& options) {
    Provenance provenance = start_run(options.common);
    const std::string where = options.file.empty() ? "built-in example" : options.file;
    const HostArray array = options.file.empty() ? builtin_example(options.common.seed) : read_matrix_file(options.file);
    MeasureArrayOptions measure_options;
    measure_options.rank_tolerance = options.rank_tolerance;
    measure_options.allow_nonfinite = options.common.allow_nonfinite;
    for (const auto& name : options.centers) measure_options.centers.push_back(parse_center(name));
    const MeasureArrayResult result = measure_array(array.view(), measure_options, where);
    const auto& per_matrix = result.matrices;
    const std::string exact_note =
        // No advice to ask for it: above the default limit --centers exact is refused too (the limits are one).
        result.exact_skipped ? fmt::format("note: the exact centre (an LP) is skipped for matrices above {} entries "
                                           "(64 x 64): its linear program would take minutes to hours",
                                           kExactDefaultLimit)
                             : "";

    const CsvTable table = measures_table(result).to_csv();
    nlohmann::json json_matrices = nlohmann::json::array();
    for (std::size_t m = 0; m < per_matrix.size(); ++m) {
        nlohmann::json records = nlohmann::json::array();
        for (const auto& r : per_matrix[m]) {
            nlohmann::json record = {{"measure", r.measure}, {"value", r.value}};
            if (!r.norm.empty()) record["norm"] = r.norm;
            if (!r.center.empty()) record["center"] = r.center;
            if (r.index >= 0) record["index"] = r.index;
            records.push_back(record);
        }
        json_matrices.push_back({{"matrix", m}, {"measures", records}});
    }
    nlohmann::json document = {{"input", where},
                               {"shape", array.shape},
                               {"dtype", dtype_name(array.dtype)},
                               {"matrices", json_matrices}};
    // Which centres were measured, and why exact is missing when it is (the CSV and JSON said nothing).
    std::vector<std::string> centers;
    for (const auto& r : per_matrix.front())
        if (r.measure == "residual" && std::find(centers.begin(), centers.end(), r.center) == centers.end())
            centers.push_back(r.center);
    document["centers"] = centers;
    if (!exact_note.empty()) document["note"] = exact_note.substr(6);

    if (!options.common.out.empty()) {
        const std::filesystem::path out = options.common.out;
        std::filesystem::create_directories(out);
        write_csv_atomically(out / "measures.csv", table, provenance);
        write_json_atomically(out / "measures.json", document, provenance);
        write_manifest(out, provenance, {{"inputs", {where}}, {"outputs", {"measures.csv", "measures.json"}}});
    }
    // Off the table view the note goes to stderr: stdout holds the CSV or JSON a program reads.
    if (options.common.format != "table" && !exact_note.empty()) fmt::print(stderr, "rankscope: {}\n", exact_note);

    if (options.common.format == "csv") {
        std::cout << csv_provenance_lines(provenance) << table.to_string();
    } else if (options.common.format == "json") {
        document["provenance"] = provenance_json(provenance);
        std::cout << json_text(document, 2) << "\n";
    } else {
        fmt::print("{}: {} ({}), {} matri{} of {} x {}\n", where, shape_text(array.shape), dtype_name(array.dtype),
                   per_matrix.size(), per_matrix.size() == 1 ? "x" : "ces", result.rows, result.cols);
        if (!exact_note.empty()) fmt::print("{}\n", exact_note);
        // Human view: one line per measure, mean over matrices (± std and range when there are several).
        std::map<std::string, std::vector<double>> by_key;
        std::vector<std::string> order;
        for (const auto& records : per_matrix)
            for (const auto& r : records) {
                if (r.measure == "singular_value" && r.index >= 8) continue;
                std::string key = r.measure;
                if (!r.norm.empty()) key += " " + r.norm;
                if (!r.center.empty()) key += " " + r.center;
                if (r.index >= 0) key += fmt::format(" [{}]", r.index);
                if (!by_key.count(key)) order.push_back(key);
                by_key[key].push_back(r.value);
            }
        for (const auto& key : order) {
            const Summary s = summarize(by_key[key]);  // mean, std (n − 1), min, max
            if (s.n == 1) fmt::print("  {:<42} {:>14.6g}\n", key, s.mean);
            else fmt::print("  {:<42} {:>14.6g} ± {:<10.3g} [{:.4g}, {:.4g}]\n", key, s.mean, s.std, s.min, s.max);
        }
        if (!options.common.out.empty()) fmt::print("wrote {}/measures.csv, measures.json, manifest.json\n", options.common.out);
    }
}

}  // namespace

std::function<void()> setup_measure(CLI::App& command) {
    auto options = std::make_shared<MeasureOptions>();
    command.add_option("file", options->file,
                       "Matrix file: .npy, .csv, or .safetensors[:tensor]; leading dimensions are a batch. "
                       "Omit for a built-in 16 x 8 example drawn from --seed")
        ->check(ReadableFile(true));
    command.add_option("--centers", options->centers, "Centres to measure (mean, median, exact, rank1)")
        ->delimiter(',')
        ->check(OneOf({"mean", "median", "exact", "rank1"}, "centre"));
    command.add_option("--rank-tol", options->rank_tolerance,
                       "Numerical-rank tolerance relative to sigma_1 (default: F32/F64 numpy's, max(n,d)*eps; F16/BF16 the "
                       "bound of their rounding, u*||X||_F/sigma_1 with u = eps/2)")
        ->check(RealRange(0, 1));
    add_common_options(command, options->common, OutFolder::optional(), {"csv", "json"});
    return [options] { run_measure(*options); };
}

}  // namespace rankscope::cli
