// Figures: builders select CSV columns by name (a CSV with its columns permuted draws the same figure), no script
// selects a column by position, and inline_svg gives several inlined gnuplot SVGs unique, resolving element ids.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "rankscope/dynamics.hpp"
#include "rankscope/error.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/process.hpp"
#include "report/pdf_information.hpp"

using namespace rankscope;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("rankscope-figures-" + std::to_string(::getpid())) / name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::string read_all(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A CSV as rankscope writes it ('#' provenance lines, one header row), with the columns in the order `order`.
void write_csv(const fs::path& path, const std::vector<std::string>& columns,
               const std::vector<std::vector<std::string>>& rows, const std::vector<std::size_t>& order) {
    std::ofstream out(path);
    out << "# produced by: the figure test\n# seed: 0\n";
    for (std::size_t i = 0; i < order.size(); ++i) out << (i ? "," : "") << columns[order[i]];
    out << "\n";
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < order.size(); ++i) out << (i ? "," : "") << row[order[i]];
        out << "\n";
    }
}

std::vector<std::size_t> identity(std::size_t n) {
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    return order;
}

int count_paths(const std::string& svg) {
    int n = 0;
    for (std::size_t at = 0; (at = svg.find("<path", at)) != std::string::npos; ++at) ++n;
    return n;
}

// No column by position: no $1, $(2), column(3), strcol(4) — only column('name') / strcol('name').
void expect_columns_by_name(const std::string& body, const std::string& what) {
    EXPECT_FALSE(std::regex_search(body, std::regex(R"(\$\(?[0-9])"))) << what << ":\n" << body;
    EXPECT_FALSE(std::regex_search(body, std::regex(R"((column|strcol|stringcolumn)\(\s*[0-9])"))) << what;
    EXPECT_FALSE(std::regex_search(body, std::regex(R"(using\s+[0-9])"))) << what;
    EXPECT_NE(body.find("column('"), std::string::npos) << what;
}

// The residual.csv of E1 (weights, variant, layer, mean, std among other columns), including a value above 1.
const std::vector<std::string> kResidualColumns = {"model", "weights", "variant", "layer", "norm", "center",
                                                   "mean",  "std",     "min",     "max",   "n"};
std::vector<std::vector<std::string>> residual_rows() {
    std::vector<std::vector<std::string>> rows;
    const std::map<std::string, std::vector<double>> curves = {{"SAN", {0.7, 1.18, 0.45}}, {"SAN+skip", {0.7, 0.3, 0.25}}};
    for (const std::string weights : {"init", "pretrained"})
        for (const auto& [variant, values] : curves)
            for (std::size_t layer = 0; layer < values.size(); ++layer) {
                const double v = weights == "init" ? values[layer] / 2 : values[layer];
                rows.push_back({"m", weights, variant, std::to_string(layer), "composite", "mean", std::to_string(v), "0.05",
                                "0", "1.2", "8"});
            }
    return rows;
}

// A fresh folder `name` holding residual_rows() as residual.csv (columns in their order).
fs::path residual_folder(const std::string& name) {
    const fs::path dir = fresh_dir(name);
    write_csv(dir / "residual.csv", kResidualColumns, residual_rows(), identity(kResidualColumns.size()));
    return dir;
}

// E1's figure of model `model` for those rows: both weight kinds, SAN and SAN+skip.
Figure two_variant_residual_figure(const std::string& model) {
    return residual_figure(model, {"init", "pretrained"}, {"SAN", "SAN+skip"}, {"SAN", "SAN+skip"}, 4);
}

}  // namespace

TEST(Figures, EveryBuilderSelectsColumnsByName) {
    const std::vector<std::pair<std::string, Figure>> figures = {
        {"theory", theory_figure({"SAN", "SAN+skip", "SAN/H=4", "SAN+skip/H=4"})},
        {"theory_bounds", theory_bounds_figure({"SAN", "SAN/H=4"})},
        {"residual", two_variant_residual_figure("m")},
        {"paths", paths_figure("E2", {"relative_residual", "relative_residual_frobenius"}, {"init", "pretrained"},
                               FloatFloor::float32)},
        {"paths sample", paths_figure("E2", {"relative_residual"}, {}, FloatFloor::float64)},
        {"iterate", iterate_figure({"init", "pretrained"}, FloatFloor::float32)},
        {"path_counts", path_counts_figure({"BERT-base", "GPT-3"}, true)},
        {"paths_effectiveness", paths_effectiveness_figure("sort", {{"no", 5}, {"yes", 20}})},
        {"width_depth", width_depth_figure("sort", {{2, "L=2"}, {6, "L=6"}})},
    };
    for (const auto& [what, figure] : figures) {
        expect_columns_by_name(figure.body, what);
        EXPECT_GT(figure.width, 0);
        EXPECT_GT(figure.height, 0);
        // One key strip, never a key inside a panel; an overall title.
        EXPECT_NE(figure.body.find("set multiplot title"), std::string::npos) << what;
    }
    // The style every figure starts with reads the header row as column names.
    EXPECT_NE(figure_style_preamble().find("set datafile columnheaders"), std::string::npos);
}

// Path counts. One architecture with α weights: the axis is k and reaches the α-weighted shares (0.53 at k = 0 was cut
// off under the plain shares' top of 0.35). Several architectures: over k/L, shares times L, so that a 2-layer model's
// 0.5 and a 4-layer model's 0.375 (densities 1.0 and 1.5) compare; plain shares drew the deeper one lower.
TEST(Figures, PathCountsAxesCoverTheAlphaSharesAndCompareDepths) {
    const std::vector<std::string> columns = {"architecture", "layers", "heads", "length", "count", "share", "alpha_share"};
    const fs::path one = fresh_dir("path-counts-one");
    write_csv(one / "path_counts.csv", columns,
              {{"custom", "2", "1", "0", "1", "0.25", "0.53"}, {"custom", "2", "1", "1", "2", "0.35", "0.37"},
               {"custom", "2", "1", "2", "1", "0.25", "0.1"}},
              identity(columns.size()));
    ASSERT_EQ(render_figure(one, path_counts_figure({"custom"}, true), "# test\n").size(), 3u);
    const std::string svg_one = read_all(one / "path_counts.svg");
    EXPECT_NE(svg_one.find(">0.5</tspan>"), std::string::npos) << "the y axis stops below the α-weighted share 0.53";
    EXPECT_NE(svg_one.find("path length k"), std::string::npos);
    EXPECT_EQ(svg_one.find("k / L"), std::string::npos);

    const fs::path several = fresh_dir("path-counts-several");
    write_csv(several / "path_counts.csv", columns,
              {{"shallow", "2", "1", "0", "1", "0.25", ""}, {"shallow", "2", "1", "1", "2", "0.5", ""},
               {"shallow", "2", "1", "2", "1", "0.25", ""}, {"deep", "4", "1", "0", "1", "0.0625", ""},
               {"deep", "4", "1", "1", "4", "0.25", ""}, {"deep", "4", "1", "2", "6", "0.375", ""},
               {"deep", "4", "1", "3", "4", "0.25", ""}, {"deep", "4", "1", "4", "1", "0.0625", ""}},
              identity(columns.size()));
    ASSERT_EQ(render_figure(several, path_counts_figure({"shallow", "deep"}, false), "# test\n").size(), 3u);
    const std::string svg_several = read_all(several / "path_counts.svg");
    EXPECT_NE(svg_several.find(">1.4</tspan>"), std::string::npos) << "the deep model's density 1.5 is above the axis";
    EXPECT_NE(svg_several.find("density over k / L"), std::string::npos);
}

TEST(Figures, TheoryBoundsHasNoRelativeRoundOffLineOnItsAbsoluteAxis) {
    // Its y axis is the absolute residual (≈30 at the input): float64's relative 2.2e-16 drawn there put a plateau at
    // 1e-14 (relative 2.5e-16) far "above round-off". No floor line; exact zeros on the bottom edge are labelled.
    const Figure bounds = theory_bounds_figure({"SAN"});
    EXPECT_EQ(bounds.body.find("round-off"), std::string::npos);
    EXPECT_EQ(bounds.body.find("2.22e-16"), std::string::npos);
    EXPECT_NE(bounds.body.find("on the bottom edge: exactly 0"), std::string::npos);
    EXPECT_NE(theory_figure({"SAN"}).body.find("float64 round-off"), std::string::npos);  // the relative figure keeps it
}

TEST(Figures, PathsFigureDrawsOnePanelPerMetricColumn) {
    const Figure one = paths_figure("E2", {"relative_residual"}, {"init"}, FloatFloor::float32);
    const Figure two = paths_figure("E2", {"relative_residual", "relative_residual_frobenius"}, {"init"}, FloatFloor::float32);
    auto panels = [](const std::string& body) {
        int n = 0;
        for (std::size_t at = 0; (at = body.find("# ---- panel", at)) != std::string::npos; ++at) ++n;
        return n;
    };
    EXPECT_EQ(panels(one.body), 1);
    EXPECT_EQ(panels(two.body), 2);
    EXPECT_NE(two.body.find("column('relative_residual_frobenius')"), std::string::npos);
    EXPECT_GT(two.width, one.width);
}

// Series that may coincide (SAN under SAN+MLP, SAN+skip under the transformer) are told apart alike in E1's figure and
// the dynamics curves: the second of each pair dashed with a smaller marker (the dynamics curves drew SAN entirely under
// SAN+MLP, 0.003898 against 0.003878, in one style).
TEST(Figures, CoincidingSurgeryVariantsAreDrawnDistinctly) {
    const std::vector<std::string> variants = {"SAN", "SAN+MLP", "SAN+skip", "transformer"};
    const std::string curves = dynamics_curves_figure("m", variants, {0, 40}).body;
    const std::string residual = residual_figure("m", {"init"}, variants, variants, 2).body;
    const int linetypes[] = {1, 3, 2, 4};  // each variant's own colour (variant_linetype), whatever its position
    for (std::size_t v = 0; v < variants.size(); ++v) {
        EXPECT_NE(curves.find(coinciding_series_style(v, linetypes[v])), std::string::npos) << v;
        EXPECT_NE(residual.find(coinciding_series_style(v, linetypes[v])), std::string::npos) << v;
    }
    EXPECT_NE(coinciding_series_style(0), coinciding_series_style(1));
    EXPECT_NE(coinciding_series_style(1).find("dt 2"), std::string::npos);
    EXPECT_EQ(coinciding_series_style(0).find("dt 2"), std::string::npos);
}

// A variant has one colour in every figure: SAN+skip was the 2nd linetype in theory.svg, the 3rd in E1's residual.svg,
// and SAN+MLP the 2nd in theory_bounds.svg; the figures sit side by side in one report.
TEST(Figures, EachVariantKeepsItsColourAcrossFigures) {
    const std::string theory = theory_figure({"SAN", "SAN+skip", "SAN+MLP", "SAN+affine-LN"}).body;
    const std::string bounds = theory_bounds_figure({"SAN", "SAN+MLP", "SAN+affine-LN"}).body;
    const std::string residual = residual_figure("m", {"init"}, {"SAN", "SAN+MLP", "SAN+skip", "transformer"},
                                                 {"SAN", "SAN+MLP", "SAN+skip", "transformer"}, 2).body;
    const std::string curves = dynamics_curves_figure("m", {"SAN+skip", "SAN+MLP"}, {0}).body;
    // The key entry of each variant, in each figure that draws it.
    auto key_linetype = [](const std::string& body, const std::string& variant) {
        const std::string title = "title '" + variant + "'";
        const std::size_t at = body.find(title);
        if (at == std::string::npos) return -1;
        const std::size_t lt = body.rfind(" lt ", at);
        return lt == std::string::npos ? -1 : std::stoi(body.substr(lt + 4));
    };
    for (const auto& [variant, linetype] : std::vector<std::pair<std::string, int>>{
             {"SAN", 1}, {"SAN+skip", 2}, {"SAN+MLP", 3}, {"transformer", 4}, {"SAN+affine-LN", 6}}) {
        EXPECT_EQ(variant_linetype(variant, 8), linetype) << variant;
        for (const std::string* body : {&theory, &bounds, &residual, &curves}) {
            if (body->find("title '" + variant + "'") != std::string::npos) {
                EXPECT_EQ(key_linetype(*body, variant), linetype) << variant << "\n" << *body;
            }
        }
    }
    EXPECT_EQ(key_linetype(theory, "SAN+skip"), key_linetype(residual, "SAN+skip"));
    EXPECT_EQ(key_linetype(bounds, "SAN+MLP"), key_linetype(residual, "SAN+MLP"));
    EXPECT_EQ(key_linetype(curves, "SAN+skip"), 2);
    EXPECT_EQ(variant_linetype("my-variant", 7), 7);
    // In the one panel of the bounds, more heads keep the colour with the second marker (SAN and SAN/H=4 were alike).
    const std::string heads = theory_bounds_figure({"SAN", "SAN/H=4"}).body;
    EXPECT_EQ(key_linetype(heads, "SAN"), 1);
    EXPECT_EQ(key_linetype(heads, "SAN/H=4"), 9);
}

// A mean token cosine below 0 (few tokens) is inside both cosine axes: they were fixed at [−0.05, 1.05], and gnuplot
// dropped −0.056 and −0.061 (8 tokens) without a word.
TEST(Figures, TrainabilityCosineAxesReachNegativeCosines) {
    const fs::path dir = fresh_dir("trainability");
    const std::vector<std::string> summary = {"layer_norm", "scaling", "depth", "last_cosine_mean"};
    write_csv(dir / "trainability_summary.csv", summary, {{"post", "one", "2", "-0.3"}, {"post", "one", "4", "0.9"}},
              identity(summary.size()));
    const std::vector<std::string> layers = {"layer_norm", "scaling", "depth", "layer", "query_over_value", "input_cosine"};
    write_csv(dir / "trainability.csv", layers,
              {{"post", "one", "4", "0", "0.5", "-0.3"}, {"post", "one", "4", "1", "0.1", "0.5"},
               {"post", "one", "4", "2", "0.01", "0.9"}},
              identity(layers.size()));
    ASSERT_EQ(render_figure(dir, trainability_figure({{"post", "one", "post-LN"}}, 4), "# test\n").size(), 3u);
    const std::string svg = read_all(dir / "trainability.svg");
    std::size_t negative_ticks = 0;
    for (std::size_t at = 0; (at = svg.find(">-0.2</tspan>", at)) != std::string::npos; ++at) ++negative_ticks;
    EXPECT_EQ(negative_ticks, 2u) << "a cosine axis stops above the data's −0.3";
}

// E4's two input-blind levels can be equal (hull: 0.59 and 0.59): the per-position line is drawn first, wide and light,
// and the majority line over it in another style, so that both show (two grey dash patterns hid one).
TEST(Figures, PathEffectivenessInputBlindLevelsStayVisibleWhenEqual) {
    const std::string body = paths_effectiveness_figure("hull", {{"no", 5}}).body;
    const auto by_position = body.find("by_position_mean with lines"), majority = body.find("majority_mean with lines");
    ASSERT_NE(by_position, std::string::npos);
    ASSERT_NE(majority, std::string::npos);
    EXPECT_LT(by_position, majority);
    const auto style_of = [&](std::size_t at) { return body.substr(at, body.find_first_of(",\n", at) - at); };
    EXPECT_NE(style_of(by_position).find("lw 6"), std::string::npos) << style_of(by_position);
    EXPECT_EQ(style_of(majority).find("lw 6"), std::string::npos) << style_of(majority);
}

// The theory sweep's collapse depths: each panel says how many runs collapsed, every panel spans the same heads, widths
// that coincide are told apart, and variants that never collapsed are named (they had no panel and no word).
TEST(Figures, CollapseDepthPanelsShareHeadsAndNameWhatNeverCollapsed) {
    const fs::path dir = fresh_dir("collapse-depth");
    const std::vector<std::string> columns = {"variant", "heads", "d_model", "runs", "collapsed", "mean_depth", "min_depth",
                                              "max_depth", "threshold"};
    write_csv(dir / "collapse_depth_summary.csv", columns,
              {{"SAN", "1", "8", "1", "1", "3", "3", "3", "0.001"}, {"SAN", "4", "8", "1", "1", "3", "3", "3", "0.001"},
               {"SAN", "1", "16", "1", "1", "3", "3", "3", "0.001"}, {"SAN", "4", "16", "1", "1", "3", "3", "3", "0.001"},
               {"SAN+LN", "1", "8", "1", "0", "", "", "", "0.001"}, {"SAN+LN", "4", "16", "1", "1", "3", "3", "3", "0.001"}},
              identity(columns.size()));
    const Figure figure = collapse_depth_figure({"SAN", "SAN+LN"}, {"SAN: 4 of 4 runs collapsed", "SAN+LN: 1 of 2 runs collapsed"},
                                                {"8", "16"}, {"SAN+skip"});
    ASSERT_EQ(render_figure(dir, figure, "# test\n").size(), 3u);
    const std::string svg = read_all(dir / "collapse_depth.svg");
    EXPECT_NE(svg.find("SAN+LN: 1 of 2 runs collapsed"), std::string::npos);
    EXPECT_NE(svg.find("never collapsed: SAN+skip"), std::string::npos);
    // Both panels span heads 1 to 4 (the SAN+LN panel's own autoscale was [2:8] around its one point).
    std::size_t fours = 0;
    for (std::size_t at = 0; (at = svg.find(">4</tspan>", at)) != std::string::npos; ++at) ++fours;
    EXPECT_EQ(fours, 2u);
    EXPECT_NE(figure.body.find(coinciding_series_style(1)), std::string::npos);  // d = 16 over d = 8
}

// The key names the band with the number of samples, and names none at one sample (no std, no band drawn).
TEST(Figures, ResidualKeyNamesTheBandOnlyOverSeveralSamples) {
    auto body = [](long samples) {
        return residual_figure("m", {"init"}, {"SAN"}, {"SAN"}, samples).body;
    };
    EXPECT_NE(body(4).find("± 1 std over 4 samples"), std::string::npos);
    EXPECT_EQ(body(1).find("std over"), std::string::npos);
    EXPECT_EQ(body(1).find("filledcurves lc rgb"), std::string::npos);  // the key's band sample
}

// The decisive check: the same data with the CSV columns in another order draw the identical figure.
TEST(Figures, PermutedCsvColumnsDrawTheSameFigure) {
    const Figure figure = two_variant_residual_figure("m");
    const fs::path a = residual_folder("residual-a"), b = fresh_dir("residual-b");
    write_csv(b / "residual.csv", kResidualColumns, residual_rows(), {10, 7, 3, 0, 9, 6, 2, 5, 1, 8, 4});
    ASSERT_EQ(render_figure(a, figure, "# test\n").size(), 3u) << "gnuplot must be installed and draw the figure";
    ASSERT_EQ(render_figure(b, figure, "# test\n").size(), 3u);
    const std::string svg_a = read_all(a / "residual.svg"), svg_b = read_all(b / "residual.svg");
    EXPECT_GT(count_paths(svg_a), 20);
    EXPECT_EQ(svg_a, svg_b);
    // The y range comes from the data: the 1.18 point (+ std) is inside the plot, so the axis reaches 1.2.
    EXPECT_NE(svg_a.find(">1.2<"), std::string::npos);

    // A model name is drawn as it is, though gnuplot's enhanced text reads _ ^ @ & ~ { } and \ as markup (a folder
    // "bert_base" was drawn as "bert" with the subscript "b").
    const std::string name = "bert_base^2 {x} @a&b~c \\101";
    const fs::path named = residual_folder("residual-named");
    ASSERT_EQ(render_figure(named, two_variant_residual_figure(name), "# test\n").size(), 3u);
    EXPECT_NE(read_all(named / "residual.svg").find(">Rank collapse under the paper's surgery (E1), bert_base^2 {x} @a&amp;b~c "
                                                     "\\101</tspan>"),
              std::string::npos);
    // A title with a newline: the script's '#' comment line holding the title once ended there, and gnuplot ran the
    // next line ('!' is its shell escape).
    const fs::path injected = residual_folder("residual-injected");
    render_figure(injected, two_variant_residual_figure("m\n!touch PWNED #"), "# test\n");
    EXPECT_FALSE(fs::exists(injected / "PWNED"));
    EXPECT_EQ(read_all(injected / "residual.gp").find("\n!"), std::string::npos);
    EXPECT_EQ(enhanced_text_literal(name), "{bert\\_base\\^2 \\{x\\} \\@a\\&b\\~c \\\\101}");
    // Braces around the whole, so that a title with a backslash and no other markup is parsed by the cairo terminals
    // too (without them the PNG drew C:\\models: 111 pixels wide against 104 for C:\models).
    EXPECT_EQ(enhanced_text_literal("C:\\models"), "{C:\\\\models}");

    // E2 box plots with two metric panels, columns permuted.
    const std::vector<std::string> columns = {"model", "weights", "length", "draw", "sample", "layers", "heads",
                                              "relative_residual", "relative_residual_frobenius"};
    std::vector<std::vector<std::string>> rows;
    for (const std::string weights : {"init", "pretrained"})
        for (int length = 1; length <= 3; ++length)
            for (int draw = 0; draw < 6; ++draw) {
                const double v = (weights == "init" ? 1e-3 : 0.5) * std::pow(0.1, length) * (1 + 0.1 * draw);
                rows.push_back({"m", weights, std::to_string(length), std::to_string(draw), "0", "0-1", "0-0",
                                std::to_string(2 * v), std::to_string(v)});
            }
    const Figure paths = paths_figure("E2", {"relative_residual", "relative_residual_frobenius"}, {"init", "pretrained"},
                                      FloatFloor::float32);
    const fs::path c = fresh_dir("paths-c"), d = fresh_dir("paths-d");
    write_csv(c / "paths.csv", columns, rows, identity(columns.size()));
    write_csv(d / "paths.csv", columns, rows, {8, 2, 0, 7, 5, 1, 3, 6, 4});
    ASSERT_EQ(render_figure(c, paths, "# test\n").size(), 3u);
    ASSERT_EQ(render_figure(d, paths, "# test\n").size(), 3u);
    const std::string svg_c = read_all(c / "paths.svg");
    EXPECT_EQ(svg_c, read_all(d / "paths.svg"));
    EXPECT_GT(count_paths(svg_c), 20);
    // One integer label per path length on the x axis of each panel, not one per box ("1 1 2 2"); (">1<" also
    // occurs in the y label's subscript l_1).
    auto occurrences = [&](const std::string& label) {
        std::size_t n = 0;
        for (std::size_t at = 0; (at = svg_c.find(label, at)) != std::string::npos; ++at) ++n;
        return n;
    };
    EXPECT_EQ(occurrences(">2<"), 2u);
    EXPECT_EQ(occurrences(">3<"), 2u);
    EXPECT_GE(occurrences(">1<"), 2u);
    // The line is drawn and named in the key as the paper's floor (the products are float64), not by a label on the
    // plot, which ran through the k = 4 box of all-MiniLM-L6-v2's init; the key says what a box shows.
    EXPECT_NE(svg_c.find("float32 eps (the paper's floor; products in float64)"), std::string::npos);
    EXPECT_EQ(paths.body.find("set label 'float32"), std::string::npos);
    EXPECT_NE(paths.body.find("keyentry " + std::string(kFloorKeyStyle) + " title 'float32 eps"), std::string::npos);
    EXPECT_NE(svg_c.find("whiskers 1.5 IQR; points beyond"), std::string::npos);
}

// The figure files carry the run's provenance: the SVG in its <desc> (escaped for XML), the PNG in an iTXt chunk
// "Comment" right after IHDR whose length and CRC a PNG reader checks (recomputed here with zlib).
TEST(Figures, SvgAndPngCarryTheProvenance) {
    const fs::path folder = residual_folder("residual-provenance");
    const std::string comment = "# produced by: rankscope 9.9\n# command: rankscope model --model 'a&b<c>'\n# seed: 7\n";
    const Figure figure = two_variant_residual_figure("a&b<c>");
    ASSERT_EQ(render_figure(folder, figure, comment).size(), 3u);
    const std::string svg = read_all(folder / "residual.svg");
    EXPECT_NE(svg.find("<desc>produced by: rankscope 9.9\ncommand: rankscope model --model 'a&amp;b&lt;c&gt;'\nseed: 7\n"
                       "Produced by GNUPLOT"),
              std::string::npos);
    // Its <title> is the figure's (gnuplot writes "Gnuplot"), escaped, and read back whole for the report's caption.
    ASSERT_NE(figure.title.find("a&b<c>"), std::string::npos);
    EXPECT_EQ(svg.find("<title>Gnuplot</title>"), std::string::npos);
    EXPECT_NE(svg.find("a&amp;b&lt;c&gt;</title>"), std::string::npos);
    EXPECT_EQ(svg_title(svg), figure.title);
    EXPECT_EQ(svg_title("<svg><title>Gnuplot</title></svg>"), "");
    EXPECT_EQ(svg_title("<svg><g/></svg>"), "");
    const std::string png = read_all(folder / "residual.png");
    auto big_endian = [&](std::size_t at) {
        return (std::uint32_t(std::uint8_t(png[at])) << 24) | (std::uint32_t(std::uint8_t(png[at + 1])) << 16) |
               (std::uint32_t(std::uint8_t(png[at + 2])) << 8) | std::uint32_t(std::uint8_t(png[at + 3]));
    };
    // Chunk by chunk (length, type, data, CRC) from the signature to IEND, every CRC right.
    std::vector<std::string> types;
    std::string comment_chunk;
    for (std::size_t at = 8; at + 12 <= png.size();) {
        const std::uint32_t length = big_endian(at);
        ASSERT_LE(at + 12 + length, png.size());
        const std::string typed = png.substr(at + 4, 4 + length);
        EXPECT_EQ(big_endian(at + 8 + length),
                  crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(typed.data()), static_cast<uInt>(typed.size())))
            << typed.substr(0, 4);
        types.push_back(typed.substr(0, 4));
        if (types.back() == "iTXt") comment_chunk = typed.substr(4);
        at += 12 + length;
    }
    ASSERT_GE(types.size(), 4u);
    EXPECT_EQ(types[0], "IHDR");
    EXPECT_EQ(types[1], "iTXt");
    EXPECT_EQ(types.back(), "IEND");
    EXPECT_EQ(comment_chunk, std::string("Comment\0\0\0\0\0", 12) +
                                 "produced by: rankscope 9.9\ncommand: rankscope model --model 'a&b<c>'\nseed: 7");

    // The PDF: an incremental update after cairo's %%EOF, the document information rewritten with /Creator (the version)
    // and /Subject (all of it) as UTF-16BE hex, its trailer pointing back to cairo's cross-reference table.
    const std::string pdf = read_all(folder / "residual.pdf");
    const std::size_t first_end = pdf.find("%%EOF");
    ASSERT_NE(first_end, std::string::npos);
    const std::string update = pdf.substr(first_end);
    const std::size_t cairo_xref = std::stoul(pdf.substr(pdf.rfind("startxref", first_end) + 10));
    EXPECT_NE(update.find("/Prev " + std::to_string(cairo_xref) + " >>"), std::string::npos) << update.substr(0, 400);
    EXPECT_NE(update.find("/Creator <FEFF00720061006E006B00730063006F0070006500200039002E0039>"), std::string::npos);  // "rankscope 9.9"
    const std::size_t xref = std::stoul(update.substr(update.rfind("startxref") + 10));
    EXPECT_EQ(pdf.compare(xref, 4, "xref"), 0);  // the new startxref points at the new section
    // Every character of a UTF-8 command, outside the BMP as a surrogate pair: é, €, 𝒳 (U+1D4B3).
    const fs::path other = residual_folder("residual-provenance-utf8");
    ASSERT_EQ(render_figure(other, two_variant_residual_figure("m"), "# command: é€𝒳\n").size(), 3u);
    EXPECT_NE(read_all(other / "residual.pdf").find("/Subject <FEFF0063006F006D006D0061006E0064003A002000E920ACD835DCB3>"),
              std::string::npos);
}

// poppler's reading of a PDF's document information: pdfinfo's "Key:   value" lines (a value's newlines as written).
std::string pdfinfo(const fs::path& pdf) {
    ProcessOptions options;
    options.search_path = options.capture_stdout = options.capture_stderr = true;
    const ProcessResult result = run_process({"pdfinfo", "-enc", "UTF-8", pdf.string()}, options);
    EXPECT_TRUE(result.ok()) << "pdfinfo (poppler-utils) must be installed and read " << pdf << ": " << result.err;
    EXPECT_EQ(result.err, "") << pdf;  // poppler says "Syntax Error" here when a cross-reference section is wrong
    return result.out;
}

// The classic layout (Debian 12's cairo): the file's /ID goes on into the update's trailer, and a second stamp replaces
// /Creator and /Subject (in the first update's Info object) instead of repeating them, cairo's entries kept.
TEST(Figures, PdfProvenanceUpdatesAClassicTrailerAgain) {
    const fs::path folder = residual_folder("pdf-classic");
    ASSERT_EQ(render_figure(folder, two_variant_residual_figure("m"), "").size(), 3u);  // no provenance: cairo's file
    std::string pdf = read_all(folder / "residual.pdf");
    ASSERT_EQ(pdf.find("/Creator"), std::string::npos);
    const std::size_t trailer_end = pdf.rfind(">>", pdf.rfind("startxref"));
    pdf.insert(trailer_end, " /ID [<0A1B><0A1B>] ");
    const std::string once = pdf_with_document_information(pdf, "rankscope 9.9", "seed: 1\n");
    const std::string twice = pdf_with_document_information(once, "rankscope 10", "seed: 2\n");
    EXPECT_EQ(twice.compare(0, once.size(), once), 0);
    const std::string update = twice.substr(once.size());
    EXPECT_NE(update.find("/ID [<0A1B><0A1B>] /Prev " + once.substr(once.rfind("startxref") + 10,
                                                                        once.find('\n', once.rfind("startxref") + 10) -
                                                                            once.rfind("startxref") - 10)),
              std::string::npos) << update;
    const std::string info = update.substr(0, update.find("endobj"));
    EXPECT_NE(info.find("/Producer (cairo"), std::string::npos) << info;
    EXPECT_EQ(info.find("/Creator"), info.rfind("/Creator")) << info;
    EXPECT_EQ(info.find("/Subject"), info.rfind("/Subject")) << info;
    std::ofstream(folder / "twice.pdf", std::ios::binary) << twice;
    const std::string fields = pdfinfo(folder / "twice.pdf");
    EXPECT_NE(fields.find("\nCreator:         rankscope 10\n"), std::string::npos) << fields;
    EXPECT_NE(("\n" + fields).find("\nSubject:         seed: 2\n"), std::string::npos) << fields;
}

// A PDF whose objects sit in a compressed object stream and which ends with a cross-reference stream (the layout of
// cairo >= 1.17.6; fixture made by qpdf, tests/fixtures/README.md): the update is a cross-reference stream too, the
// original bytes stay as they were, cairo's /Producer and /CreationDate are kept, and poppler reads the provenance.
TEST(Figures, PdfProvenanceExtendsACrossReferenceStream) {
    const std::string original = read_all(fs::path(RANKSCOPE_FIXTURES_DIR) / "pdf" / "xref-stream.pdf");
    ASSERT_GT(original.size(), 1000u);
    const std::string text = "produced by: rankscope 9.9\ncommand: rankscope theory --out 'é€𝒳'\nseed: 7\n";
    const std::string stamped = pdf_with_document_information(original, "rankscope 9.9", text);
    ASSERT_GT(stamped.size(), original.size());
    EXPECT_EQ(stamped.compare(0, original.size(), original), 0);  // an incremental update: nothing before it moves
    const std::size_t old_xref = std::stoul(original.substr(original.rfind("startxref") + 10));
    const std::size_t new_xref = std::stoul(stamped.substr(stamped.rfind("startxref") + 10));
    ASSERT_GT(new_xref, original.size());
    const std::string section = stamped.substr(new_xref);
    EXPECT_EQ(section.find("13 0 obj\n<< /Type /XRef /Size 14 "), 0u) << section.substr(0, 200);
    EXPECT_NE(section.find("/Prev " + std::to_string(old_xref) + " "), std::string::npos);
    EXPECT_NE(section.find("/Index [7 1 13 1] /W [1 4 2] /Length 14 >>"), std::string::npos);
    EXPECT_NE(section.find(" /ID [<0609f3e8f327d0ec86d05239e2cfe975><0609f3e8f327d0ec86d05239e2cfe975>] "),
              std::string::npos);  // the file's identifier goes on
    // The stream's two rows: type 1, the object's 4-byte offset, generation 0 — the Info object, then the section.
    const std::string rows = section.substr(section.find("stream\n") + 7, 14);
    auto offset = [&](std::size_t row) {
        std::size_t value = 0;
        for (int k = 1; k <= 4; ++k) value = value << 8 | static_cast<unsigned char>(rows[row * 7 + k]);
        return value;
    };
    EXPECT_EQ(rows[0], '\x01');
    EXPECT_EQ(stamped.compare(offset(0), 8, "7 0 obj\n"), 0);
    EXPECT_EQ(offset(1), new_xref);
    // cairo's entries came out of the Flate object stream.
    const std::string info = stamped.substr(offset(0), new_xref - offset(0));
    EXPECT_NE(info.find("/Producer (cairo 1.16.0 \\(https://cairographics.org\\))"), std::string::npos) << info.substr(0, 300);
    const fs::path folder = fresh_dir("pdf-xref-stream");
    std::ofstream(folder / "stamped.pdf", std::ios::binary) << stamped;
    const std::string fields = pdfinfo(folder / "stamped.pdf");
    for (const std::string expected :
         {"\nCreator:         rankscope 9.9\n",
          "\nSubject:         produced by: rankscope 9.9\ncommand: rankscope theory --out 'é€𝒳'\nseed: 7\n\n",
          "\nProducer:        cairo 1.16.0 (https://cairographics.org)\n", "\nCreationDate:    ", "\nPages:           1\n"})
        EXPECT_NE(("\n" + fields).find(expected), std::string::npos) << expected << " in\n" << fields;
    // Stamped again (the update's plain Info object now holds /Creator and /Subject): replaced, not repeated.
    const std::string twice = pdf_with_document_information(stamped, "rankscope 10", "seed: 8\n");
    const std::string last = twice.substr(twice.rfind("7 0 obj"));
    EXPECT_NE(last.find("/Producer (cairo"), std::string::npos);
    EXPECT_EQ(last.find("/Creator"), last.rfind("/Creator"));
    EXPECT_EQ(last.find("/Subject"), last.rfind("/Subject"));
    std::ofstream(folder / "twice.pdf", std::ios::binary) << twice;
    const std::string again = pdfinfo(folder / "twice.pdf");
    EXPECT_NE(again.find("\nCreator:         rankscope 10\nProducer:"), std::string::npos) << again;
    EXPECT_NE(("\n" + again).find("\nSubject:         seed: 8\n\n"), std::string::npos) << again;
    // Not a PDF's cross-reference section: left as it was.
    EXPECT_EQ(pdf_with_document_information("%PDF-1.5\nstartxref\n3\n%%EOF\n", "c", "s"), "%PDF-1.5\nstartxref\n3\n%%EOF\n");
}

TEST(Figures, InlineSvgPrefixesEveryIdAndReference) {
    const Figure figure = two_variant_residual_figure("m");
    const fs::path dir = residual_folder("inline");
    ASSERT_EQ(render_figure(dir, figure, "# test\n").size(), 3u);
    const std::string svg = read_all(dir / "residual.svg");
    const std::regex id_pattern(R"(\sid\s*=\s*["']([^"']*)["'])");
    const std::regex reference_pattern(R"(url\(#([^)]*)\)|href\s*=\s*["']#([^"']*)["'])");
    auto ids_of = [&](const std::string& text) {
        std::vector<std::string> ids;
        for (std::sregex_iterator it(text.begin(), text.end(), id_pattern), end; it != end; ++it) ids.push_back((*it)[1]);
        return ids;
    };
    auto references_of = [&](const std::string& text) {
        std::vector<std::string> refs;
        for (std::sregex_iterator it(text.begin(), text.end(), reference_pattern), end; it != end; ++it)
            refs.push_back((*it)[1].matched ? (*it)[1].str() : (*it)[2].str());
        return refs;
    };
    // The real gnuplot SVG has ids and references to them (point symbols <use xlink:href='#gpPt..'>).
    ASSERT_GT(ids_of(svg).size(), 5u);
    ASSERT_GT(references_of(svg).size(), 0u);

    const std::string first = inline_svg(svg, "fig1-"), second = inline_svg(svg, "fig2-");
    for (const auto& copy : {first, second}) {
        EXPECT_EQ(copy.rfind("<svg", 0), 0u) << "starts at the <svg element (no XML declaration)";
        EXPECT_EQ(copy.substr(copy.size() - 6), "</svg>");
    }
    const std::string page = "<html><body>" + first + second + "</body></html>";
    const auto ids = ids_of(page);
    const std::set<std::string> unique(ids.begin(), ids.end());
    EXPECT_EQ(unique.size(), ids.size()) << "an id repeats across the two inlined copies";
    EXPECT_EQ(ids.size(), 2 * ids_of(svg).size());
    for (const auto& [copy, prefix] : {std::pair{first, std::string("fig1-")}, std::pair{second, std::string("fig2-")}}) {
        const auto own = ids_of(copy);
        const std::set<std::string> own_ids(own.begin(), own.end());
        const auto refs = references_of(copy);
        EXPECT_EQ(refs.size(), references_of(svg).size());
        for (const auto& ref : refs) {
            EXPECT_EQ(ref.rfind(prefix, 0), 0u) << ref;
            EXPECT_TRUE(own_ids.count(ref)) << "unresolved reference #" << ref;
        }
        for (const auto& id : own) EXPECT_EQ(id.rfind(prefix, 0), 0u) << id;
    }
    // Only ids and references change: the rest of the markup is as gnuplot wrote it.
    std::string restored = first;
    for (std::size_t at; (at = restored.find("fig1-")) != std::string::npos;) restored.erase(at, 5);
    EXPECT_NE(svg.find(restored), std::string::npos);

    // A hand-written case with double quotes, url() in a style and href without xlink.
    const std::string small =
        "<?xml version=\"1.0\"?>\n<svg viewBox=\"0 0 10 10\"><defs><clipPath id=\"c\"><rect/></clipPath>"
        "<linearGradient id='g'/></defs><g style=\"clip-path:url(#c)\" fill=\"url(#g)\"><use href=\"#c\"/>"
        "<a href=\"https://example.org/#x\">id=\"text\"</a></g></svg>\n";
    EXPECT_EQ(inline_svg(small, "p_"),
              "<svg viewBox=\"0 0 10 10\"><defs><clipPath id=\"p_c\"><rect/></clipPath><linearGradient id='p_g'/></defs>"
              "<g style=\"clip-path:url(#p_c)\" fill=\"url(#p_g)\"><use href=\"#p_c\"/>"
              "<a href=\"https://example.org/#x\">id=\"text\"</a></g></svg>");
    EXPECT_THROW(inline_svg(small, "1bad"), Error);
    EXPECT_THROW(inline_svg(small, "a\"b"), Error);
    EXPECT_THROW(inline_svg("<html/>", "p"), Error);
    EXPECT_EQ(svg_min_display_width(small), static_cast<int>(std::lround(9.6 * 10 / kFigureFontSize)));  // viewBox 10 wide
    EXPECT_EQ(svg_min_display_width(svg), static_cast<int>(std::lround(9.6 * figure.width / kFigureFontSize)));
    EXPECT_EQ(svg_min_display_width("<svg/>"), 0);
}

TEST(Figures, CircleFigureHasUniqueIdsEqualAxesAndItsWholeTitle) {
    // The E3 figure once repeated gnuplot's element ids inside its own multiplot and cut its title at both ends: built
    // on the shared panel layout, every id is unique within the figure and the canvas holds the title.
    const std::vector<std::string> columns = {"variant", "seed", "token", "step", "x", "y", "target_x", "target_y"};
    std::vector<std::vector<std::string>> rows;
    for (const std::string variant : {"SAN", "SAN+skip", "SAN+MLP", "SAN+skip+MLP"})
        for (int seed : {0, 1, 2})
            for (int token : {0, 1})
                for (int step = 0; step < 20; ++step) {
                    const double angle = (token ? M_PI : 0.0) + step * 0.1;
                    const double x = 0.3 * std::cos(angle), y = 0.3 * std::sin(angle);
                    rows.push_back({variant, std::to_string(seed), std::to_string(token), std::to_string(step),
                                    std::to_string(x * (1 + 0.01 * seed)), std::to_string(y), std::to_string(x), std::to_string(y)});
                }
    const fs::path dir = fresh_dir("circle");
    write_csv(dir / "circle_trajectories.csv", columns, rows, identity(columns.size()));
    const Figure figure = circle_figure({"SAN", "SAN+skip", "SAN+MLP", "SAN+skip+MLP"},
                                        {"SAN: no merge", "SAN+skip: no merge", "SAN+MLP: merged at step 7", "SAN+skip+MLP: no merge"},
                                        {{}, {"2/3 ran away"}, {}, {}}, 0, 300, true);
    ASSERT_EQ(render_figure(dir, figure, "# test\n").size(), 3u);
    const std::string svg = read_all(dir / "circle.svg");
    const std::regex id_pattern(R"(\sid\s*=\s*["']([^"']*)["'])");
    std::vector<std::string> ids;
    for (std::sregex_iterator it(svg.begin(), svg.end(), id_pattern), end; it != end; ++it) ids.push_back((*it)[1]);
    ASSERT_GT(ids.size(), 10u);
    EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size()) << "an id repeats within the figure";
    EXPECT_NE(svg.find("E3: a 300-state rollout of the trained 1-layer, 2-head model"), std::string::npos);
    EXPECT_NE(svg.find(">2/3 ran away</tspan>"), std::string::npos) << "the panel's note is drawn";
    // The title (font kFigureFontSize + 2, about 0.6 em per character) fits the canvas with room to spare.
    EXPECT_LT(0.6 * (kFigureFontSize + 2) * static_cast<double>(figure.title.size()), 0.8 * figure.width);
    // Square panels over equal ranges (equal aspect), four across.
    EXPECT_EQ(figure.body.find("set size ratio"), std::string::npos);
    EXPECT_NE(figure.body.find("set xrange [-0.5:0.5]\nset yrange [-0.5:0.5]"), std::string::npos);
    // Each trajectory is its own line: consecutive points are 0.03 apart (about 10 canvas units); a line joining one
    // seed's end to the next seed's start (the shared preamble's `set datafile missing NaN` skipped the rows between)
    // would be a segment of about 150 units.
    const std::regex data_path(R"(<path stroke='rgb\(\s*(?:0,\s*114,\s*178|213,\s*94,\s*0)\)'[^>]*d='([^']*)')");
    double longest = 0;
    int data_paths = 0;
    for (std::sregex_iterator it(svg.begin(), svg.end(), data_path), end; it != end; ++it, ++data_paths) {
        std::istringstream tokens((*it)[1].str());
        std::string token;
        double px = NAN, py = NAN;
        while (tokens >> token) {
            const char command = token[0];
            const auto comma = token.find(',');
            if ((command != 'M' && command != 'L') || comma == std::string::npos) continue;
            const double x = std::stod(token.substr(1, comma - 1)), y = std::stod(token.substr(comma + 1));
            if (command == 'L' && !std::isnan(px)) longest = std::max(longest, std::hypot(x - px, y - py));
            px = x, py = y;
        }
    }
    EXPECT_GT(data_paths, 4);
    EXPECT_LT(longest, 60) << "a line jumps between two trajectories";
}
