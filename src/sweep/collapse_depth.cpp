// Collapse depth of every run of a theory sweep, and its summary per variant × heads × width (sweep.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "rankscope/error.hpp"
#include "rankscope/provenance.hpp"
#include "rankscope/sweep.hpp"

namespace rankscope {
namespace {

std::size_t column_index(const std::vector<std::string>& header, const std::string& name) {
    for (std::size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) return i;
    throw Error("the sweep's theory table has no column '" + name + "'");
}

std::string csv_field(const std::string& field) {
    if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
    std::string out = "\"";
    for (char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

}  // namespace

CollapseDepthTables collapse_depth_tables(const std::string& merged_theory_csv, double threshold) {
    const std::vector<std::string> records = csv_records(merged_theory_csv);
    CollapseDepthTables tables;
    if (records.empty()) return tables;
    const std::vector<std::string> header = csv_fields(records.front());
    const std::size_t key_column = column_index(header, "cell_key");
    const std::size_t variant_column = column_index(header, "variant");
    const std::size_t heads_column = column_index(header, "heads");
    const std::size_t seed_column = column_index(header, "seed");
    const std::size_t layer_column = column_index(header, "layer");
    const std::size_t relative_column = column_index(header, "relative_residual");
    std::size_t d_model_column = header.size();
    std::vector<std::size_t> cell_columns;  // cell_key and the cell's settings
    for (std::size_t i = 0; i < header.size(); ++i)
        if (header[i].rfind("cell_", 0) == 0) {
            cell_columns.push_back(i);
            if (header[i] == "cell_d_model") d_model_column = i;
        }

    // One run = (cell, variant, seed); rows come per layer in order within a run.
    struct Run {
        std::vector<std::string> cell_fields;
        std::string variant, heads, seed, d_model;
        std::string trace;  // its relative residuals as written, layer by layer
        int layers = 0, depth = -1;
    };
    std::vector<Run> runs;
    std::map<std::tuple<std::string, std::string, std::string>, std::size_t> run_of;
    for (std::size_t r = 1; r < records.size(); ++r) {
        const std::vector<std::string> fields = csv_fields(records[r]);
        if (fields.size() != header.size())
            throw Error(fmt::format("row {} of the sweep's theory table has {} fields for {} columns", r, fields.size(),
                                    header.size()));
        const auto id = std::make_tuple(fields[key_column], fields[variant_column], fields[seed_column]);
        auto found = run_of.find(id);
        if (found == run_of.end()) {
            Run run;
            for (std::size_t c : cell_columns) run.cell_fields.push_back(fields[c]);
            run.variant = fields[variant_column];
            run.heads = fields[heads_column];
            run.seed = fields[seed_column];
            run.d_model = d_model_column < header.size() ? fields[d_model_column] : "";
            found = run_of.emplace(id, runs.size()).first;
            runs.push_back(std::move(run));
        }
        Run& run = runs[found->second];
        const int layer = std::atoi(fields[layer_column].c_str());
        const double relative = std::strtod(fields[relative_column].c_str(), nullptr);
        run.layers = std::max(run.layers, layer);
        run.trace += fields[layer_column] + ":" + fields[relative_column] + ",";
        if (layer >= 1 && relative < threshold && (run.depth < 0 || layer < run.depth)) run.depth = layer;
    }

    std::string& csv = tables.runs_csv;
    for (std::size_t c : cell_columns) csv += csv_field(header[c]) + ",";
    csv += "variant,heads,seed,layers,collapse_depth,threshold\n";
    for (const Run& run : runs) {
        for (const auto& field : run.cell_fields) csv += csv_field(field) + ",";
        csv += fmt::format("{},{},{},{},{},{}\n", csv_field(run.variant), run.heads, run.seed, run.layers,
                           run.depth < 0 ? std::string() : std::to_string(run.depth), format_number(threshold));
    }

    std::map<std::tuple<std::string, int, std::string>, CollapseDepthSummary> groups;
    std::vector<std::tuple<std::string, int, std::string>> order;
    // A run two cells both ran counts once: a one-head variant runs in every cell of a heads axis, and cells of
    // overlapping seed ranges (seed 0 and 1 with --seeds 5) share seeds 1-4. Same variant, width and seed with the same
    // relative residual at every layer, to the last digit written, is the same network.
    std::set<std::tuple<std::string, std::string, std::string, std::string>> counted;
    for (const Run& run : runs) {
        if (!counted.insert({run.variant, run.d_model, run.seed, run.trace}).second) continue;
        const std::string base = run.variant.substr(0, run.variant.find("/H="));
        const int heads = std::atoi(run.heads.c_str());
        const auto id = std::make_tuple(base, heads, run.d_model);
        auto [it, inserted] = groups.try_emplace(id);
        CollapseDepthSummary& group = it->second;
        if (inserted) {
            order.push_back(id);
            group.variant = base;
            group.heads = heads;
            group.d_model = run.d_model;
        }
        ++group.runs;
        if (run.depth >= 0) {
            group.mean_depth += run.depth;
            ++group.collapsed;
            group.min_depth = group.min_depth < 0 ? run.depth : std::min(group.min_depth, run.depth);
            group.max_depth = std::max(group.max_depth, run.depth);
        }
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        const double da = std::strtod(std::get<2>(a).c_str(), nullptr), db = std::strtod(std::get<2>(b).c_str(), nullptr);
        return std::make_tuple(std::get<0>(a), da, std::get<1>(a)) < std::make_tuple(std::get<0>(b), db, std::get<1>(b));
    });
    for (const auto& id : order) {
        CollapseDepthSummary group = groups.at(id);
        group.mean_depth = group.collapsed > 0 ? group.mean_depth / group.collapsed : NAN;
        tables.summary.push_back(group);
    }
    return tables;
}

}  // namespace rankscope
