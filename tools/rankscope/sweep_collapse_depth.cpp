#include "sweep_collapse_depth.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "rankscope/figure.hpp"
#include "rankscope/io.hpp"
#include "rankscope/plots.hpp"

namespace rankscope::cli {

namespace {

// An earlier sweep's collapse-depth files in the same --out (a theory grid, then a measure grid) go when this run
// writes none: they sat beside this run's cells.csv and manifest, their provenance naming the other grid.
std::vector<std::string> no_collapse_depth(const std::filesystem::path& out) {
    std::error_code ignored;
    for (const char* name : {"collapse_depth.csv", "collapse_depth_summary.csv", "collapse_depth.gp", "collapse_depth.svg",
                             "collapse_depth.png", "collapse_depth.pdf", "collapse_depth.gnuplot.log"})
        std::filesystem::remove(out / name, ignored);
    return {};
}

}  // namespace

std::vector<std::string> write_collapse_depth(const SweepGrid& grid, const std::vector<const SweepCell*>& done_cells,
                                              const std::filesystem::path& out, const Provenance& provenance) {
    if (grid.experiment != "theory" || done_cells.empty()) return no_collapse_depth(out);
    const std::string text = read_file_if_present((out / "tables" / "theory.csv").string(), kNoSizeLimit, "theory table");
    if (text.empty()) return no_collapse_depth(out);
    const CollapseDepthTables tables = collapse_depth_tables(text);
    const std::string comment = csv_provenance_lines(provenance);
    write_file_atomically((out / "collapse_depth.csv").string(), comment + tables.runs_csv);

    // The variants that collapse at all get a panel (with how many runs did); the others are named in the title.
    std::vector<std::string> variants, d_models, never_collapsed;
    std::map<std::string, std::pair<int, int>> runs_collapsed;  // variant → (runs, collapsed)
    std::vector<std::string> order;
    CsvTable summary;
    summary.columns = {"variant", "heads", "d_model", "runs", "collapsed", "mean_depth", "min_depth", "max_depth", "threshold"};
    auto depth_text = [](int depth) { return depth < 0 ? std::string() : std::to_string(depth); };
    for (const auto& group : tables.summary) {
        summary.add({group.variant, std::to_string(group.heads), group.d_model, std::to_string(group.runs),
                     std::to_string(group.collapsed), group.collapsed ? format_number(group.mean_depth) : "", depth_text(group.min_depth),
                     depth_text(group.max_depth), format_number(kCollapseThreshold)});
        if (!runs_collapsed.count(group.variant)) order.push_back(group.variant);
        runs_collapsed[group.variant].first += group.runs;
        runs_collapsed[group.variant].second += group.collapsed;
        if (std::find(d_models.begin(), d_models.end(), group.d_model) == d_models.end()) d_models.push_back(group.d_model);
    }
    std::vector<std::string> titles;
    for (const auto& variant : order) {
        const auto [runs, collapsed] = runs_collapsed.at(variant);
        if (collapsed == 0) {
            never_collapsed.push_back(variant);
            continue;
        }
        variants.push_back(variant);
        titles.push_back(fmt::format("{}: {} of {} runs collapsed", variant, collapsed, runs));
    }
    write_csv_atomically(out / "collapse_depth_summary.csv", summary, provenance);
    std::vector<std::string> written = {"collapse_depth.csv", "collapse_depth_summary.csv"};
    if (!variants.empty()) {
        const auto figures = render_figure(out, collapse_depth_figure(variants, titles, d_models, never_collapsed), comment);
        written.insert(written.end(), figures.begin(), figures.end());
    }
    return written;
}

}  // namespace rankscope::cli
