#include "sweep_collapse_depth.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "rankscope/figure.hpp"
#include "rankscope/io.hpp"
#include "rankscope/plots.hpp"

namespace rankscope::cli {

std::vector<std::string> write_collapse_depth(const SweepGrid& grid, const std::vector<const SweepCell*>& done_cells,
                                              const std::filesystem::path& out, const Provenance& provenance) {
    if (grid.experiment != "theory" || done_cells.empty()) return {};
    const std::string text = read_file_if_present((out / "tables" / "theory.csv").string(), kNoSizeLimit, "theory table");
    if (text.empty()) return {};
    const CollapseDepthTables tables = collapse_depth_tables(text);
    const std::string comment = csv_provenance_lines(provenance);
    write_file_atomically((out / "collapse_depth.csv").string(), comment + tables.runs_csv);

    // The variants that collapse at all (skip and LayerNorm variants do not: nothing to draw for them).
    std::vector<std::string> variants, d_models;
    CsvTable summary;
    summary.columns = {"variant", "heads", "d_model", "runs", "collapsed", "mean_depth", "min_depth", "max_depth", "threshold"};
    auto depth_text = [](int depth) { return depth < 0 ? std::string() : std::to_string(depth); };
    for (const auto& group : tables.summary) {
        summary.add({group.variant, std::to_string(group.heads), group.d_model, std::to_string(group.runs),
                     std::to_string(group.collapsed), group.collapsed ? format_number(group.mean_depth) : "", depth_text(group.min_depth),
                     depth_text(group.max_depth), format_number(kCollapseThreshold)});
        if (group.collapsed > 0 && std::find(variants.begin(), variants.end(), group.variant) == variants.end())
            variants.push_back(group.variant);
        if (std::find(d_models.begin(), d_models.end(), group.d_model) == d_models.end()) d_models.push_back(group.d_model);
    }
    write_csv_atomically(out / "collapse_depth_summary.csv", summary, provenance);
    std::vector<std::string> written = {"collapse_depth.csv", "collapse_depth_summary.csv"};
    if (!variants.empty()) {
        const auto figures = render_figure(out, collapse_depth_figure(variants, d_models), comment);
        written.insert(written.end(), figures.begin(), figures.end());
    }
    return written;
}

}  // namespace rankscope::cli
