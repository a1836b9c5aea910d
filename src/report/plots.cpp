#include "rankscope/plots.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "rankscope/e3_circle.hpp"
#include "rankscope/error.hpp"

namespace rankscope {

// ---- expressions ------------------------------------------------------------------------------------------------

std::string csv_number(const std::string& column) { return "column(" + gnuplot_quote(column) + ")"; }
std::string csv_text(const std::string& column) { return "strcol(" + gnuplot_quote(column) + ")"; }
std::string text_is(const std::string& column, const std::string& value) {
    return csv_text(column) + " eq " + gnuplot_quote(value);
}
std::string number_is(const std::string& column, double value) {
    return fmt::format("{} == {}", csv_number(column), value);
}
std::string all_of(const std::vector<std::string>& conditions) {
    if (conditions.empty()) return "1";
    std::string result;
    for (const auto& c : conditions) result += (result.empty() ? "(" : " && (") + c + ")";
    return result;
}
std::string only_if(const std::string& condition, const std::string& value) {
    return "((" + condition + ") ? " + value + " : NaN)";
}

namespace {

std::string file(const std::string& csv) { return gnuplot_quote(csv); }

// A spread column (std), NaN where a single value was summarised, read as 0 there: gnuplot drops a point any of whose
// columns reads NaN under `set datafile missing NaN`, even inside an expression, so a one-sample mean would vanish
// from the figure (and a y range over mean + std would have no point at all). Read as text, NaN is not a column value.
std::string csv_spread(const std::string& column) {
    return fmt::format("(rankscope_cell = {0}, rankscope_cell eq 'nan' || rankscope_cell eq '' ? 0 : real(rankscope_cell))",
                       csv_text(column));
}

const char* floor_value(FloatFloor floor) {
    switch (floor) {
        case FloatFloor::bfloat16: return "7.81e-3";
        case FloatFloor::float16: return "9.77e-4";
        case FloatFloor::float32: return "1.19e-7";
        default: return "2.22e-16";
    }
}
const char* floor_label(FloatFloor floor) {
    switch (floor) {
        case FloatFloor::bfloat16: return "bfloat16 round-off";
        case FloatFloor::float16: return "float16 round-off";
        case FloatFloor::float32: return "float32 round-off";
        default: return "float64 round-off";
    }
}

// Canvas units (SVG user units) of the layout around each panel.
constexpr int kLeft = 132;          // y tick labels (10^{-10} on log axes) and y label
constexpr int kRight = 28;
constexpr int kPanelTitle = 40;    // above each panel
constexpr int kBelowPanel = 92;    // x tick labels and x label (clear of the next row's panel title)
constexpr int kFigureTitle = 52;   // the overall title
// The key's row pitch in every output (build() sets gnuplot's spacing to it); more when a title has a subscript or a
// superscript (enhanced text's _ and ^, at 0.8 size, 0.3 em below or 0.5 em above the line): measured in Chromium,
// the line boxes of theory_bounds' subscript row and the superscript row below it overlap by 4.3 units at a pitch of
// 36; at 40 by 0.3, less than the 2.7 units by which a line box pads the glyphs above.
constexpr int kKeyLine = 30;
constexpr int kKeyLineWithScripts = 40;
// The key's columns together span this share of the figure's width (the key strip spans 0.98 of it).
constexpr double kKeyColumnsShare = 0.95;
// Besides its title, a key entry needs 6 of gnuplot's characters: a title's room is h * (floor(share / h) - 5) (its
// column less the sample of 2.5 characters, a character either side, and build()'s 1.5 characters; the floor costs up
// to one more), with h at most 0.70 em (gnuplot's character in the SVG; 0.63 em in the PNG and PDF): 4.2 em, and 0.3
// em to spare.
constexpr double kKeySampleAndGapsEm = 4.5;

// An upper bound of a printable ASCII text's width in em in DejaVu Sans, the font that fontconfig gives gnuplot's and
// Chromium's "Helvetica" on a Debian machine without URW's Nimbus Sans (which has Helvetica's own, narrower widths),
// and in Helvetica and Arial: each character at the widest advance width of its class (DejaVu's read with FreeType,
// Helvetica's from Adobe's metrics, which Arial shares): 0.46 em for the narrow ones, 0.79 for capitals, 1.02 for m,
// w, M, W, %, @ (Helvetica's @) and the mathematical signs, 0.65 for the rest (lower case, digits, $ * ? _ { }).
// Other characters count 1.02 too: most are narrower (α 0.66, ± 0.84, ∞ 0.83, CJK 1.0), a few wider (‰ 1.34).
// Enhanced-text markup (_ ^ { }) counts as if drawn: an overestimate.
double text_width_em(const std::string& text) {
    double em = 0;
    for (const char character : text) {
        const auto c = static_cast<unsigned char>(character);
        if ((c & 0xC0) == 0x80) continue;  // a UTF-8 continuation byte: counted with its lead byte
        const auto in = [c](const char* set) { return c < 0x80 && c != 0 && std::strchr(set, c) != nullptr; };
        if (c >= 0x80 || in("mwMW%@#+<=>^~")) em += 1.02;
        else if (in("ABCDEFGHKLNOPQRSTUVXYZ&")) em += 0.79;
        else if (in("'\"ijlIJ,. /:;\\|f-()[]t!r")) em += 0.46;
        else em += 0.65;
    }
    return em;
}

// A text's length as gnuplot counts a key title's, or more (markup included): UTF-8 code points, those from U+3000 on
// (CJK; lead byte 0xE3 and up) twice, as gnuplot's strwidth_utf8 does.
std::size_t character_count(const std::string& text) {
    std::size_t count = 0;
    for (const char character : text) {
        const auto c = static_cast<unsigned char>(character);
        if ((c & 0xC0) != 0x80) count += c >= 0xE3 ? 2 : 1;
    }
    return count;
}

}  // namespace

// ---- axes -------------------------------------------------------------------------------------------------------

std::string integer_axis(const std::string& axis, const std::string& csv, const std::string& expression,
                         const std::string& name) {
    return fmt::format(
        "undefine {1}_*\nstats [*:*][*:*] {2} using ({3}) name '{1}' nooutput\n"
        "{1}_step = ceil(({1}_max - {1}_min) / 10.0)\nif ({1}_step < 1) {1}_step = 1\n"
        "set {0}range [{1}_min - 0.5:{1}_max + 0.5]\nset {0}tics {1}_min, {1}_step\nset m{0}tics 1\nset format {0} '%.0f'\n",
        axis, name, file(csv), expression);
}

std::string y_from_zero(const std::string& csv, const std::string& expression, double minimum_top, const std::string& name) {
    return fmt::format("undefine {0}_*\nstats [*:*][*:*] {1} using ({2}) name '{0}' nooutput\n"
                       "{0}_top = {0}_max * 1.05 > {3} ? {0}_max * 1.05 : {3}\nset yrange [0:{0}_top]\nset format y '%g'\n",
                       name, file(csv), expression, minimum_top);
}

std::string log_y(const std::string& csv, const std::string& expression, FloatFloor floor, const std::string& name,
                  const std::string& floor_label_text, bool floor_in_key) {
    std::string s = fmt::format("undefine {0}_*\nstats [*:*][*:*] {1} using (({2}) > 0 ? ({2}) : NaN) name '{0}' nooutput\n"
                                "if (!exists('{0}_min')) {0}_min = 1e-3; {0}_max = 1\n",
                                name, file(csv), expression);
    if (floor == FloatFloor::none) {
        s += fmt::format("{0}_bottom = {0}_min / 2\n", name);
    } else {
        s += fmt::format("{0}_floor = {1}\n{0}_near = {3} || {0}_min < 100 * {0}_floor\n"
                         "{0}_bottom = {0}_min / 2\nif ({0}_near && {0}_floor / 10 < {0}_bottom) {0}_bottom = {0}_floor / 10\n"
                         "if ({0}_near) {{\n"
                         "    set arrow from graph 0, first {0}_floor to graph 1, first {0}_floor nohead lc rgb '#444444' "
                         "lw 1.5 dt 2 front\n{2}}}\n",
                         name, floor_value(floor),
                         floor_in_key ? std::string()
                                      : fmt::format("    set label {} at graph 0.02, first {}_floor left offset 0,0.7 tc rgb "
                                                    "'#444444' front\n",
                                                    gnuplot_quote(floor_label_text.empty() ? std::string(floor_label(floor))
                                                                                           : floor_label_text),
                                                    name),
                         floor_in_key ? 1 : 0);
    }
    s += fmt::format("{0}_top = {0}_max * 2\nset logscale y\nset yrange [{0}_bottom:{0}_top]\n"
                     "if ({0}_top / {0}_bottom > 200) {{ set format y '10^{{%L}}' }} else {{ set format y '%g' }}\n",
                     name);
    return s;
}

std::string log_value(const std::string& expression, const std::string& name) {
    return fmt::format("(({0}) > 0 ? ({0}) : {1}_bottom)", expression, name);
}

// ---- the layout -------------------------------------------------------------------------------------------------

PanelFigure::PanelFigure(std::string stem, std::string title, int rows, int cols, int panel_width, int panel_height)
    : stem_(std::move(stem)), title_(std::move(title)), rows_(rows), cols_(cols), panel_width_(panel_width),
      panel_height_(panel_height) {
    if (rows < 1 || cols < 1) throw Error("a figure needs at least one panel");
}

void PanelFigure::add_preface(const std::string& commands) { preface_ += commands; }
void PanelFigure::add_panel(const std::string& commands) { panels_.push_back(commands); }
void PanelFigure::add_key_entry(const std::string& title, const std::string& style) { key_.push_back({title, style}); }

Figure PanelFigure::build() const {
    if (static_cast<int>(panels_.size()) > rows_ * cols_) throw Error("more panels than the figure's grid holds: " + stem_);
    const int cell_width = kLeft + panel_width_ + colorbox_ + kRight;
    const int cell_height = kPanelTitle + panel_height_ + kBelowPanel;
    const int width = cols_ * cell_width;
    // The key: entries in equal columns across the width, as many per line as the widest title leaves room for.
    double widest_em = 0;
    std::size_t longest = 0;  // in characters, as gnuplot counts them (markup included: at least gnuplot's count)
    bool scripts = false;
    for (const auto& entry : key_) {
        widest_em = std::max(widest_em, text_width_em(entry.title));
        longest = std::max(longest, character_count(entry.title));
        scripts = scripts || entry.title.find_first_of("_^") != std::string::npos;
    }
    const int key_line = scripts ? kKeyLineWithScripts : kKeyLine;
    const double entry_width = kFigureFontSize * (widest_em + kKeySampleAndGapsEm);
    int per_line = std::max(1, static_cast<int>(kKeyColumnsShare * width / entry_width));
    if (key_per_line_ > 0) per_line = std::min(per_line, key_per_line_);
    // A key only below panels: its layout reads the terminal's GPVAL_TERM_* values, which a plot sets.
    const bool has_key = !key_.empty() && !panels_.empty();
    const int key_lines = has_key ? (static_cast<int>(key_.size()) + per_line - 1) / per_line : 0;
    const int key_height = key_lines == 0 ? 0 : key_lines * key_line + 26;
    const int height = kFigureTitle + rows_ * cell_height + key_height;
    auto x = [&](double units) { return fmt::format("{:.4f}", units / width); };
    auto y = [&](double units) { return fmt::format("{:.4f}", 1.0 - units / height); };  // units from the top

    std::string body = preface_;
    body += "set multiplot title " + gnuplot_quote(enhanced_text_literal(title_)) +
            fmt::format(" font ',{}'\n", kFigureFontSize + 2);
    body += "unset key\n";
    for (std::size_t p = 0; p < panels_.size(); ++p) {
        const int row = static_cast<int>(p) / cols_, col = static_cast<int>(p) % cols_;
        const double left = col * cell_width + kLeft, top = kFigureTitle + row * cell_height + kPanelTitle;
        body += fmt::format("# ---- panel {}\nset lmargin at screen {}\nset rmargin at screen {}\nset tmargin at screen {}\n"
                            "set bmargin at screen {}\n{}\n",
                            p + 1, x(left), x(left + panel_width_), y(top), y(top + panel_height_), panels_[p]);
    }
    if (has_key) {
        // The key in a strip of its own across the whole width: an empty plot whose only content is the key, in
        // per_line columns of kKeyColumnsShare * width / per_line each. gnuplot sizes a column by its own character
        // width (h_char, which differs per terminal: 0.70 em in the SVG, 0.63 em in the PNG and PDF) times the longest
        // title's character count plus `width`; left to itself it put E4's two long entries in one column of four rows
        // (a strip of two rows, the last cut off), and the fixed "width -4" that mended that made E6's short names
        // overlap. So `width` is computed at plot time from the terminal's own h_char, making each column at most
        // (kKeyColumnsShare * width / per_line) whatever the terminal, and maxcols keeps gnuplot from adding columns.
        // A column is h_char * (longest + key_width + 4.5) plus h_tic: 6 characters more than `longest` is room to
        // spare. Likewise the row pitch, gnuplot's v_char times `spacing`, is set to key_line units in every output
        // (v_char is 1.5 em in the SVG, 1.17 em in the PNG and PDF).
        body += fmt::format("# ---- key\nset lmargin at screen 0.01\nset rmargin at screen 0.99\nset tmargin at screen {}\n"
                            "set bmargin at screen 0.005\n"
                            "unset title\nunset xlabel\nunset ylabel\nunset x2label\nunset y2label\nunset border\nunset tics\n"
                            "unset grid\nunset logscale\nunset arrow\nunset label\nunset object\nset xrange [0:1]\n"
                            "set yrange [0:1]\nkey_width = floor({:.4f} * GPVAL_TERM_XSIZE / GPVAL_TERM_HCHAR) - {}\n"
                            "key_spacing = {:.5f} * GPVAL_TERM_YSIZE / GPVAL_TERM_VCHAR\n"
                            "set key inside center center horizontal Left reverse samplen 2.5 width key_width "
                            "spacing key_spacing maxcols {} maxrows {}\nplot NaN notitle",
                            y(height - key_height + 6), kKeyColumnsShare / per_line, longest + 6,
                            static_cast<double>(key_line) / height, per_line, key_lines);
        for (const auto& entry : key_) body += ", \\\n     keyentry " + entry.style + " title " + gnuplot_quote(entry.title);
        body += "\n";
    }
    body += "unset multiplot\n";
    Figure figure;
    figure.stem = stem_;
    figure.title = title_;
    figure.body = body;
    figure.width = width;
    figure.height = height;
    return figure;
}

// ---- the figures ------------------------------------------------------------------------------------------------

namespace {

std::string join_plots(const std::vector<std::string>& plots) {
    std::string s = "plot ";
    for (std::size_t i = 0; i < plots.size(); ++i) s += (i ? ", \\\n     " : "") + plots[i];
    return s + "\n";
}

std::string ylabel(const std::string& text, bool shown) {
    return shown ? "set ylabel " + gnuplot_quote(text) + "\n" : "unset ylabel\n";
}

std::string base_variant(const std::string& name) { return name.substr(0, name.find("/H=")); }

}  // namespace

Figure theory_figure(const std::vector<std::string>& variants) {
    // Panels by head count (the "/H=n" suffix), colours by architecture.
    std::vector<std::string> panel_keys, bases;
    std::map<std::string, std::vector<std::string>> by_panel;
    for (const auto& v : variants) {
        const std::size_t slash = v.find("/H=");
        const std::string heads = slash == std::string::npos ? "1" : v.substr(slash + 3);
        if (!by_panel.count(heads)) panel_keys.push_back(heads);
        by_panel[heads].push_back(v);
        if (std::find(bases.begin(), bases.end(), base_variant(v)) == bases.end()) bases.push_back(base_variant(v));
    }
    auto style_of = [&](const std::string& v) {
        const int index = static_cast<int>(std::find(bases.begin(), bases.end(), base_variant(v)) - bases.begin());
        return variant_linetype(base_variant(v), index + 1);
    };
    const std::string csv = "theory_summary.csv";
    PanelFigure figure("theory", "Rank collapse of random SAN variants (mean over seeds, float64)", 1,
                       static_cast<int>(std::max<std::size_t>(1, panel_keys.size())));
    figure.limit_key_per_line(3);  // six variants in two lines of three
    figure.add_preface(integer_axis("x", csv, csv_number("layer"), "layer") +
                       log_y(csv, csv_number("relative_residual_mean"), FloatFloor::float64, "res"));
    for (std::size_t p = 0; p < panel_keys.size(); ++p) {
        std::vector<std::string> plots;
        for (const auto& v : by_panel[panel_keys[p]])
            plots.push_back(fmt::format("{} using ({}):{} with linespoints lt {}", file(csv), csv_number("layer"),
                                        only_if(text_is("variant", v), log_value(csv_number("relative_residual_mean"), "res")),
                                        style_of(v)));
        figure.add_panel("set title " + gnuplot_quote(panel_keys[p] == "1" ? "1 head" : panel_keys[p] + " heads") +
                         "\nset xlabel 'layer'\n" + ylabel("relative residual (composite, mean centre)", p == 0) +
                         join_plots(plots));
    }
    for (const auto& base : bases) figure.add_key_entry(base, fmt::format("with linespoints lt {}", style_of(base)));
    return figure.build();
}

Figure theory_bounds_figure(const std::vector<std::string>& bounded_variants) {
    const std::string csv = "theory_summary.csv";
    // The title fits the 800-unit width at the title font (the longer "Measured residual vs the per-layer bound
    // (Theorems 2.2/2.3, Corollary 3.2)" was cut at both ends).
    PanelFigure figure("theory_bounds", "Residual vs the per-layer bound (Theorems 2.2/2.3, Corollary 3.2)", 1, 1, 640, 380);
    // The range covers both the measured residuals and the (positive) bounds.
    const std::string larger = fmt::format("({1} == {1} && {1} > {0} ? {1} : {0})", csv_number("residual_mean"),
                                           csv_number("bound_step_mean"));
    // An absolute residual has no fixed round-off level (float64's 2.2e-16 is relative: here it would sit 16 decades
    // below an input residual of ≈30, and 1e-14 would look far above it), so no floor line; the relative residual,
    // with its round-off line, is in theory.svg. An exact 0 is drawn on the bottom edge, and a label says so.
    figure.add_preface(integer_axis("x", csv, csv_number("layer"), "layer") +
                       log_y(csv, csv_number("residual_mean"), FloatFloor::none, "res") +
                       fmt::format("undefine zero_*\nstats [*:*][*:*] {} using (({}) == 0 ? 1 : 0) name 'zero' nooutput\n"
                                   "if (exists('zero_sum') && zero_sum > 0) {{ set label 'on the bottom edge: exactly 0' at "
                                   "graph 0.02, graph 0.05 left tc rgb '#444444' front }}\n",
                                   file(csv), csv_number("residual_mean")) +
                       fmt::format("undefine big_*\nstats [*:*][*:*] {} using ({}) name 'big' nooutput\n"
                                   "if (exists('big_max') && 2 * big_max > res_top) {{ res_top = 2 * big_max; "
                                   "set yrange [res_bottom:res_top] }}\n"
                                   "if (res_top / res_bottom > 200) {{ set format y '10^{{%L}}' }}\n",
                                   file(csv), larger));
    std::vector<std::string> plots;
    for (std::size_t i = 0; i < bounded_variants.size(); ++i) {
        const std::string is = text_is("variant", bounded_variants[i]);
        // One colour per architecture; more heads ("/H=4") in the same colour with the palette's second marker
        // (linetype + 8), the line kept solid: dashes are the bound's.
        const bool more_heads = bounded_variants[i].find("/H=") != std::string::npos;
        const int linetype = variant_linetype(base_variant(bounded_variants[i]), static_cast<int>(i) + 1) + (more_heads ? 8 : 0);
        plots.push_back(fmt::format("{} using ({}):{} with linespoints lt {} dt 1", file(csv), csv_number("layer"),
                                    only_if(is, log_value(csv_number("residual_mean"), "res")), linetype));
        plots.push_back(fmt::format("{} using ({}):{} with lines lt {} dt 2", file(csv), csv_number("layer"),
                                    only_if(all_of({is, csv_number("bound_step_mean") + " > 0"}), csv_number("bound_step_mean")),
                                    linetype));
        figure.add_key_entry(bounded_variants[i], fmt::format("with linespoints lt {} dt 1", linetype));
    }
    figure.add_key_entry("measured ||res||_{1,∞}", "with lines lc rgb '#000000' lw 2");
    figure.add_key_entry("bound c_l r_{l-1}^3", "with lines lc rgb '#000000' lw 2 dt 2");
    figure.add_panel("unset title\nset xlabel 'layer'\n" + ylabel("exact-centre residual ||res||_{1,∞}", true) +
                     join_plots(plots));
    return figure.build();
}

std::string coinciding_series_style(std::size_t v, int linetype) {
    constexpr double kMarkerScale[] = {1.6, 1.1, 1.2, 0.85};  // each pair (SAN, SAN+MLP), (SAN+skip, transformer)
    return fmt::format("with linespoints lt {} dt {} ps {}", linetype, v % 2 == 1 ? 2 : 1, v < 4 ? kMarkerScale[v] : 0.8);
}

std::string coinciding_series_style(std::size_t v) { return coinciding_series_style(v, static_cast<int>(v) + 1); }

int variant_linetype(const std::string& variant, int fallback) {
    static const std::map<std::string, int> kLinetype = {{"SAN", 1},         {"SAN+skip", 2},    {"SAN+MLP", 3},
                                                         {"SAN+skip+MLP", 4}, {"transformer", 4}, {"SAN+LN", 5},
                                                         {"SAN+affine-LN", 6}};
    const auto found = kLinetype.find(variant);
    return found == kLinetype.end() ? fallback : found->second;
}

Figure residual_figure(const std::string& model, const std::vector<std::string>& weight_kinds,
                       const std::vector<std::string>& variants, const std::vector<std::string>& titles, long samples) {
    if (titles.size() != variants.size()) throw Error("residual_figure: one title per variant");
    const std::string csv = "residual.csv";
    PanelFigure figure("residual", "Rank collapse under the paper's surgery (E1), " + model, 1,
                       static_cast<int>(std::max<std::size_t>(1, weight_kinds.size())));
    // One y range for all panels: from 0 to the top of the highest band (never clipped).
    figure.add_preface(integer_axis("x", csv, csv_number("layer"), "layer") +
                       y_from_zero(csv, csv_number("mean") + " + " + csv_spread("std"), 1.05, "res"));
    std::vector<int> linetypes;  // each variant's colour, the same in every panel and the key
    for (std::size_t v = 0; v < variants.size(); ++v) linetypes.push_back(variant_linetype(variants[v], static_cast<int>(v) + 1));
    for (std::size_t k = 0; k < weight_kinds.size(); ++k) {
        std::vector<std::string> bands, lines;
        for (std::size_t v = 0; v < variants.size(); ++v) {
            const std::string is = all_of({text_is("weights", weight_kinds[k]), text_is("variant", variants[v])});
            const int linetype = linetypes[v];
            bands.push_back(fmt::format("{} using ({}):{}:{} with filledcurves lt {}", file(csv), csv_number("layer"),
                                        only_if(is, csv_number("mean") + " - " + csv_spread("std")),
                                        only_if(is, csv_number("mean") + " + " + csv_spread("std")), linetype));
            lines.push_back(fmt::format("{} using ({}):{} {}", file(csv), csv_number("layer"), only_if(is, csv_number("mean")),
                                        coinciding_series_style(v, linetype)));  // SAN and SAN+MLP may coincide
        }
        bands.insert(bands.end(), lines.begin(), lines.end());
        figure.add_panel("set title " + gnuplot_quote(weight_kinds[k] == "init" ? "random init" : weight_kinds[k]) +
                         "\nset xlabel 'layer'\n" + ylabel("relative residual (composite, mean centre)", k == 0) +
                         join_plots(bands));
    }
    for (std::size_t v = 0; v < variants.size(); ++v) figure.add_key_entry(titles[v], coinciding_series_style(v, linetypes[v]));
    // One sample has no std (nan): no band is drawn, so the key names none.
    if (samples > 1) figure.add_key_entry(fmt::format("± 1 std over {} samples", samples), "with filledcurves lc rgb '#000000'");
    return figure.build();
}

Figure paths_figure(const std::string& title, const std::vector<std::string>& metric_columns,
                    const std::vector<std::string>& weight_kinds, FloatFloor floor) {
    if (metric_columns.empty()) throw Error("paths_figure: no metric column");
    const std::string csv = "paths.csv";
    PanelFigure figure("paths", title, 1, static_cast<int>(metric_columns.size()));
    // Every product is drawn: values beyond the whiskers as small dots (nooutliers hid them, with no word).
    figure.add_preface(integer_axis("x", csv, csv_number("length"), "len") +
                       "set style boxplot outliers pointtype 7\nset style fill transparent solid 0.3 border\n");
    const std::vector<std::string> kinds = weight_kinds.empty() ? std::vector<std::string>{""} : weight_kinds;
    const double box = 0.7 / static_cast<double>(kinds.size());
    for (std::size_t m = 0; m < metric_columns.size(); ++m) {
        const std::string& metric = metric_columns[m];
        const std::string range = fmt::format("m{}", m);
        std::vector<std::string> plots;
        // One box per (weights kind, length): x is the length (offset per kind), so the axis has one integer label per
        // length, not one per box. Median ± quartiles, whiskers 1.5 IQR; values beyond them as small dots.
        for (std::size_t k = 0; k < kinds.size(); ++k) {
            const double offset = (static_cast<double>(k) - (kinds.size() - 1) / 2.0) * box;
            const std::string is = kinds[k].empty() ? "1" : text_is("weights", kinds[k]);
            plots.push_back(fmt::format("for [k=int(len_min):int(len_max)] {} using (k + {:.3f}):{}:({:.3f}) with boxplot "
                                        "lt {} lw 1.5 ps 0.4",
                                        file(csv), offset,
                                        only_if(all_of({is, csv_number("length") + " == k"}),
                                                log_value(csv_number(metric), range)),
                                        box * 0.85, k + 1));
        }
        const bool frobenius = metric.find("frobenius") != std::string::npos;
        const std::string panel_title = metric == "relative_residual" ? "composite norm ||·||_{1,∞} (the paper's)"
                                        : frobenius                   ? "Frobenius norm (a true distance, ≤ 1)"
                                                                      : metric;
        // The products are computed in float64 from the stored maps: float32's eps is the paper's floor (its products
        // were float32), not this figure's; the line is labelled as the reference it is.
        figure.add_panel(log_y(csv, csv_number(metric), floor, range, "", floor != FloatFloor::none) + "set title " +
                         gnuplot_quote(panel_title) +
                         "\nset xlabel 'path length k (attention matrices multiplied)'\n" +
                         ylabel("rank-1 relative residual of A_{l_k}…A_{l_1}", m == 0) + join_plots(plots) +
                         "unset arrow\nunset label\n");
    }
    if (!weight_kinds.empty())
        for (std::size_t k = 0; k < weight_kinds.size(); ++k)
            figure.add_key_entry(weight_kinds[k] == "init" ? "random init" : weight_kinds[k],
                                 fmt::format("with boxes lt {} fs transparent solid 0.3 border", k + 1));
    figure.add_key_entry("box: quartiles and median; whiskers 1.5 IQR; points beyond", "with points pt 7 ps 0.4 lc rgb '#444444'");
    // The floor is named in the key: E2's boxes may sit anywhere along the line (a label ran through the k = 4 box).
    if (floor == FloatFloor::float32)
        figure.add_key_entry("float32 eps (the paper's floor; products in float64)", kFloorKeyStyle);
    else if (floor == FloatFloor::float16 || floor == FloatFloor::bfloat16)  // a recording's own half precision
        figure.add_key_entry(std::string(floor == FloatFloor::float16 ? "float16" : "bfloat16") +
                                 " eps (the patterns as stored; products in float64)",
                             kFloorKeyStyle);
    else if (floor != FloatFloor::none)
        figure.add_key_entry(floor_label(floor), kFloorKeyStyle);
    return figure.build();
}

Figure iterate_figure(const std::vector<std::string>& weight_kinds, FloatFloor floor) {
    const std::string csv = "iterate.csv";
    PanelFigure figure("iterate", "USE lite: one real attention layer applied repeatedly", 1, 1, 640, 380);
    // The floor in the key, not on the plot: the curves fall onto it from the left (the label sat on a line at step 2).
    figure.add_preface(integer_axis("x", csv, csv_number("step"), "step") +
                       log_y(csv, csv_number("mean"), floor, "res", "", floor != FloatFloor::none));
    std::vector<std::string> plots;
    int style = 0;
    for (const auto& kind : weight_kinds)
        for (const std::string variant : {"attention", "attention+skip"}) {
            ++style;
            plots.push_back(fmt::format("{} using ({}):{} with linespoints lt {}", file(csv), csv_number("step"),
                                        only_if(all_of({text_is("weights", kind), text_is("variant", variant)}),
                                                log_value(csv_number("mean"), "res")),
                                        style));
            figure.add_key_entry(fmt::format("{} ({})", variant, kind == "init" ? "random init" : kind),
                                 fmt::format("with linespoints lt {}", style));
        }
    if (floor != FloatFloor::none) figure.add_key_entry(floor_label(floor), kFloorKeyStyle);
    figure.add_panel("unset title\nset xlabel 'applications of the attention of block 2 (blocks.1)'\n" +
                     ylabel("relative residual (composite, mean centre)", true) + join_plots(plots));
    return figure.build();
}

Figure path_counts_figure(const std::vector<std::string>& architectures, bool alpha_weighted) {
    const std::string csv = "path_counts.csv";
    PanelFigure figure("path_counts", "Distribution of path lengths", 1, 1, 640, 380);
    // One architecture: the share of paths of each length k. Several, of different depths: over k/L, each share times L
    // (a density over k/L whose area is about 1), so that heights compare. Plain shares over k/L made a deep model look
    // flat: it spreads its paths over more lengths (GPT-3's 97 against DistilBERT's 7), each with a smaller share.
    const bool relative = architectures.size() > 1;
    auto y_of = [&](const std::string& column) {
        return relative ? "(" + csv_number(column) + " * " + csv_number("layers") + ")" : csv_number(column);
    };
    const std::string x = "(" + csv_number("length") + (relative ? " / " + csv_number("layers") : "") + ")";
    // The y range covers the α-weighted shares too (they were cut off above the plain shares' top: 0.53 at k = 0
    // under a top of 0.35).
    const std::string highest =
        alpha_weighted ? "(" + csv_text("alpha_share") + " ne '' && " + y_of("alpha_share") + " > " + y_of("share") + " ? " +
                             y_of("alpha_share") + " : " + y_of("share") + ")"
                       : y_of("share");
    figure.add_preface((relative ? "set xrange [-0.02:1.02]\nset xtics 0.2\nset format x '%g'\n"
                                 : integer_axis("x", csv, csv_number("length"), "k")) +
                       y_from_zero(csv, highest, 0, "share"));
    std::vector<std::string> plots;
    for (std::size_t i = 0; i < architectures.size(); ++i) {
        plots.push_back(fmt::format("{} using {}:{} with linespoints lt {}", file(csv), x,
                                    only_if(text_is("architecture", architectures[i]), y_of("share")), i + 1));
        figure.add_key_entry(architectures[i], fmt::format("with linespoints lt {}", i + 1));
    }
    if (alpha_weighted) {
        const int lt = static_cast<int>(architectures.size()) + 1;
        plots.push_back(fmt::format("{} using {}:{} with linespoints lt {} dt 2", file(csv), x,
                                    only_if(csv_text("alpha_share") + " ne ''", y_of("alpha_share")), lt));
        figure.add_key_entry("α-weighted", fmt::format("with linespoints lt {} dt 2", lt));
    }
    figure.add_panel(relative ? "unset title\nset xlabel 'relative path length k / L'\n" +
                                    ylabel("share of paths × L (density over k / L)", true) + join_plots(plots)
                              : "unset title\nset xlabel 'path length k (attention layers on the path)'\n" +
                                    ylabel("share of paths", true) + join_plots(plots));
    return figure.build();
}

Figure paths_effectiveness_figure(const std::string& task, const std::vector<std::pair<std::string, int>>& series, int seeds) {
    const std::string csv = "paths_effectiveness_summary.csv", reference = "paths_effectiveness.csv";
    PanelFigure figure("paths_effectiveness", "E4: accuracy of path ensembles vs path length, " + task, 1, 1, 640, 380);
    std::string preface = integer_axis("x", csv, csv_number("k"), "k") +
                          y_from_zero(csv, csv_number("mean") + " + " + csv_spread("std"), 1.05, "acc");
    // The measured reference accuracies, read from the run's own CSV.
    for (const auto& [name, metric] : std::vector<std::pair<std::string, std::string>>{
             {"whole", "whole_model_accuracy"}, {"majority", "majority_accuracy"},
             {"by_position", "position_majority_accuracy"}})
        preface += fmt::format("undefine {0}_*\nstats [*:*][*:*] {1} using {2} name '{0}' nooutput\n"
                               "if (!exists('{0}_mean')) {0}_mean = NaN\n",
                               name, file(reference), only_if(text_is("metric", metric), csv_number("value")));
    figure.add_preface(preface);
    // The two input-blind levels can be equal (hull: 0.59 and 0.59): the per-position one is drawn first, wide and light,
    // the majority class over it, thin and dark, so that both show where they coincide (two grey dash patterns hid one).
    const std::string by_position_style = "with lines lc rgb '#c8c8c8' lw 6", majority_style = "with lines lc rgb '#555555' lw 2 dt 3";
    std::vector<std::string> plots = {"by_position_mean " + by_position_style, "majority_mean " + majority_style,
                                      "whole_mean with lines lc rgb '#000000' lw 2 dt 2"};
    figure.add_key_entry("whole model (measured)", "with lines lc rgb '#000000' lw 2 dt 2");
    figure.add_key_entry("majority class (measured)", majority_style);
    figure.add_key_entry("most common label per position (measured)", by_position_style);
    for (std::size_t i = 0; i < series.size(); ++i) {
        // Series side by side around each k so that their error bars do not hide each other.
        const double shift = (static_cast<double>(i) - (series.size() - 1) / 2.0) * 0.08;
        const std::string is = all_of({text_is("sub_path", series[i].first), number_is("n_paths", series[i].second)});
        plots.push_back(fmt::format("{} using ({} + {:.3f}):{}:({}) with yerrorlines lt {}", file(csv), csv_number("k"),
                                    shift, only_if(is, csv_number("mean")), csv_spread("std"), i + 1));
        figure.add_key_entry(fmt::format("{} paths{}", series[i].second, series[i].first == "yes" ? ", with sub-paths" : ""),
                             fmt::format("with yerrorlines lt {}", i + 1));
    }
    // Short enough for the panel's width: "random path ensembles, mean ± std over repeats" is the longest that fits.
    const std::string title = seeds > 1 ? fmt::format("path ensembles, mean ± std over {} seeds × repeats", seeds)
                                        : std::string("random path ensembles, mean ± std over repeats");
    figure.add_panel("set title " + gnuplot_quote(title) + "\nset xlabel 'path length k'\n" +
                     ylabel("token accuracy", true) + join_plots(plots));
    return figure.build();
}

Figure width_depth_figure(const std::string& task, const std::vector<std::pair<int, std::string>>& depths) {
    const std::string residual = "width_depth_residual.csv", paths = "width_depth_paths.csv";
    PanelFigure figure("width_depth", "E5: equal parameter counts, " + task, 1, 2);
    std::vector<std::string> residual_plots, path_plots;
    for (std::size_t i = 0; i < depths.size(); ++i) {
        residual_plots.push_back(fmt::format("{} using ({}):{} with linespoints lt {}", file(residual),
                                             csv_number("relative_depth"),
                                             only_if(number_is("layers", depths[i].first), csv_number("mean")), i + 1));
        path_plots.push_back(fmt::format("{} using ({}):{} with linespoints lt {}", file(paths), csv_number("k"),
                                         only_if(number_is("layers", depths[i].first), csv_number("share")), i + 1));
        figure.add_key_entry(depths[i].second, fmt::format("with linespoints lt {}", i + 1));
    }
    figure.add_panel("set title 'relative residual per layer'\nset xlabel 'relative depth l / L'\n"
                     "set xrange [-0.03:1.03]\nset xtics 0.25\nset format x '%g'\n" +
                     y_from_zero(residual, csv_number("mean"), 0, "res") +
                     ylabel("relative residual (composite, mean centre)", true) + join_plots(residual_plots));
    figure.add_panel("set title 'path-length distribution C(L,k) H^k / (H+1)^L'\n" +
                     integer_axis("x", paths, csv_number("k"), "k") + "set xlabel 'path length k'\n" +
                     y_from_zero(paths, csv_number("share"), 0, "share") + ylabel("share of paths", true) +
                     join_plots(path_plots));
    return figure.build();
}

Figure collapse_depth_figure(const std::vector<std::string>& variants, const std::vector<std::string>& panel_titles,
                             const std::vector<std::string>& d_models, const std::vector<std::string>& never_collapsed) {
    if (panel_titles.size() != variants.size()) throw Error("collapse_depth_figure: one title per variant");
    const std::string csv = "collapse_depth_summary.csv";
    std::string title = "Collapse depth of a theory sweep (first layer with relative residual < 1e-3)";
    if (!never_collapsed.empty()) title += fmt::format("; never collapsed: {}", fmt::join(never_collapsed, ", "));
    PanelFigure figure("collapse_depth", title, 1, static_cast<int>(std::max<std::size_t>(1, variants.size())));
    // One heads range for every panel (each panel's own autoscale put its points on the frame, [1:2] beside [1:4]).
    figure.add_preface(fmt::format("undefine heads_*\nstats [*:*][*:*] {} using ({}) name 'heads' nooutput\n"
                                   "set xrange [heads_min / 1.5:heads_max * 1.5]\n",
                                   file(csv), csv_number("heads")) +
                       "set logscale x 2\nset format x '%g'\nset xlabel 'heads H'\n" +
                       y_from_zero(csv, csv_number("max_depth"), 1, "depth"));
    for (std::size_t p = 0; p < variants.size(); ++p) {
        std::vector<std::string> plots;
        for (std::size_t i = 0; i < d_models.size(); ++i) {
            std::vector<std::string> conditions = {text_is("variant", variants[p])};
            if (!d_models[i].empty()) conditions.push_back(text_is("d_model", d_models[i]));
            plots.push_back(fmt::format("{} using ({}):{} {}", file(csv), csv_number("heads"),
                                        only_if(all_of(conditions), csv_number("mean_depth")), coinciding_series_style(i)));
        }
        figure.add_panel("set title " + gnuplot_quote(panel_titles[p]) + "\n" +
                         ylabel("collapse depth (mean over collapsed runs)", p == 0) + join_plots(plots));
    }
    for (std::size_t i = 0; i < d_models.size(); ++i)
        figure.add_key_entry(d_models[i].empty() ? "all runs" : "d = " + d_models[i], coinciding_series_style(i));
    return figure.build();
}

Figure trainability_figure(const std::vector<TrainabilitySeries>& series, int deepest) {
    const std::string summary = "trainability_summary.csv", layers = "trainability.csv";
    PanelFigure figure("trainability", "Rank collapse and query/key gradients at initialisation (Noci et al. 2022)", 1, 3);
    // A mean token cosine can be below 0 (down to −1/(n − 1) for n tokens): each cosine axis starts at −0.05 or 0.05
    // below its data (a fixed −0.05 left out −0.056 and −0.061 at 8 tokens). Computed here, before panel 1's log x.
    std::string cosine_ranges;
    for (const auto& [csv, column, name] : {std::tuple{summary, "last_cosine_mean", "last_cos"},
                                            std::tuple{layers, "input_cosine", "input_cos"}})
        cosine_ranges += fmt::format("undefine {0}_*\nstats [*:*][*:*] {1} using ({2}) name '{0}' nooutput\n"
                                     "{0}_low = exists('{0}_min') && {0}_min - 0.05 < -0.05 ? {0}_min - 0.05 : -0.05\n",
                                     name, file(csv), csv_number(column));
    figure.add_preface(cosine_ranges);
    std::vector<std::string> cosine_plots, layer_plots, scatter_plots;
    for (std::size_t i = 0; i < series.size(); ++i) {
        const std::string configuration = all_of({text_is("layer_norm", series[i].layer_norm), text_is("scaling", series[i].scaling)});
        cosine_plots.push_back(fmt::format("{} using ({}):{} with linespoints lt {}", file(summary), csv_number("depth"),
                                           only_if(configuration, csv_number("last_cosine_mean")), i + 1));
        layer_plots.push_back(fmt::format("{} using ({}):{} with points lt {}", file(layers), csv_number("layer"),
                                          only_if(all_of({configuration, number_is("depth", deepest)}),
                                                  log_value(csv_number("query_over_value"), "ratio")),
                                          i + 1));
        scatter_plots.push_back(fmt::format("{} using ({}):{} with points lt {}", file(layers), csv_number("input_cosine"),
                                            only_if(configuration, log_value(csv_number("query_over_value"), "ratio")), i + 1));
        figure.add_key_entry(series[i].title, fmt::format("with linespoints lt {}", i + 1));
    }
    figure.add_panel("set title 'token alignment at the last layer'\nset logscale x 2\nset format x '%g'\n"
                     "set xlabel 'depth L'\nset yrange [last_cos_low:1.05]\nset format y '%g'\n" +
                     ylabel("mean token cosine (mean over seeds)", true) + join_plots(cosine_plots));
    figure.add_panel(fmt::format("set title 'query vs value gradient per layer, L = {}'\nunset logscale x\n", deepest) +
                     integer_axis("x", layers, only_if(number_is("depth", deepest), csv_number("layer")), "layer") +
                     "set xlabel 'layer l (0 = first)'\n" + log_y(layers, csv_number("query_over_value"), FloatFloor::none, "ratio") +
                     ylabel("||dL/dW_Q|| / ||dL/dW_V||", true) + join_plots(layer_plots));
    figure.add_panel("set title 'query vs value gradient against input alignment'\nset xrange [input_cos_low:1.05]\nset xtics auto\n"
                     "set format x '%g'\nset xlabel 'mean token cosine of the layer input'\n" +
                     ylabel("||dL/dW_Q|| / ||dL/dW_V||", true) + join_plots(scatter_plots));
    return figure.build();
}

const char* heatmap_palette() {
    return "set palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', 4 '#fde725')\n";
}

Figure failure_modes_figure(const std::vector<std::string>& variants, const std::vector<double>& scales, int layers,
                            double freezing_scale) {
    const std::string csv = "failure_modes_summary.csv";
    constexpr int kFloor = -16;  // log10 of the relative residual: float64 round-off
    PanelFigure figure("failure_modes", "Attention entropy and rank at init against the query/key scale s",
                       static_cast<int>(variants.size()), 2, 460, 330);
    figure.reserve_colorbox(150);
    // Columns: the i-th scale (sorted) at x = i, labelled with its value; s_c drawn where it falls between them.
    std::vector<double> sorted = scales;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::string> tics, index_of;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
        tics.push_back(fmt::format("'{:g}' {}", sorted[i], i));
        index_of.push_back(fmt::format("{} == {} ? {}", csv_number("query_key_scale"), sorted[i], i));  // shortest round trip, as the CSV
    }
    double marker = NAN;
    for (std::size_t i = 0; i + 1 < sorted.size(); ++i)
        if (freezing_scale >= sorted[i] && freezing_scale <= sorted[i + 1])
            marker = static_cast<double>(i) + std::log(freezing_scale / sorted[i]) / std::log(sorted[i + 1] / sorted[i]);
    const std::string x = "(" + fmt::format("{}", fmt::join(index_of, " : ")) + " : NaN)";
    const int stride = std::max(1, (layers + 7) / 8);
    std::string preface = std::string(heatmap_palette()) +
                          fmt::format("set xrange [-0.5:{}]\nset xtics ({})\nset yrange [0.5:{}]\nset ytics {}\n"
                                      "set xlabel 'query/key scale s'\nset ylabel 'layer'\nset style fill solid 1.0 noborder\n",
                                      sorted.size() - 0.5, fmt::join(tics, ", "), layers + 0.5, stride);
    if (!std::isnan(marker))
        preface += fmt::format("set arrow from {0}, graph 0 to {0}, graph 1 nohead lc rgb '#ffffff' lw 2 dt 2 front\n"
                               "set style textbox opaque fc rgb '#ffffff' noborder\n"
                               "set label 's_c' at {0}, graph 0.92 center boxed front\n",
                               marker);
    figure.add_preface(preface);
    for (const auto& variant : variants) {
        const std::string rows = text_is("variant", variant);
        figure.add_panel(fmt::format("set title {}\nset cbrange [0:1]\nset cblabel 'entropy / ln n'\n"
                                     "plot {} using {}:({}):(0.5):(0.5):({}) with boxxyerror fc palette notitle\n",
                                     gnuplot_quote(variant + ": attention entropy (1 = uniform, 0 = one-hot)"), file(csv),
                                     only_if(rows, x), csv_number("layer"), csv_number("normalized_entropy_mean")));
        figure.add_panel(fmt::format("set title {}\nset cbrange [{}:0]\nset cblabel 'log10 relative residual'\n"
                                     "plot {} using {}:({}):(0.5):(0.5):({} < {} ? {} : {}) with boxxyerror fc palette notitle\n",
                                     gnuplot_quote(variant + ": relative residual (log10; low = rank collapse)"), kFloor,
                                     file(csv), only_if(rows, x), csv_number("layer"),
                                     csv_number("log10_relative_residual_mean"), kFloor, kFloor,
                                     csv_number("log10_relative_residual_mean")));
    }
    return figure.build();
}

namespace {

const char* kCircleCsv = "circle_trajectories.csv";
const std::string kArcStyle = "with lines lc rgb '#555555' dt 2 lw 1.2";

// One circle panel's plots over the rows where `rows` holds: the seeds in `faint` as thin translucent lines, the seed
// `bold` (when set) with points, then both arcs of the seed `arc_seed` on top (so that a trajectory lying on its arc
// does not hide it).
std::vector<std::string> circle_plots(const std::string& csv, const std::string& rows, const std::string& faint,
                                      const std::string& bold, const std::string& arc_seed) {
    auto series = [&](const std::string& seed, int token, const std::string& x, const std::string& y, const std::string& style) {
        return fmt::format("{} using {}:({}) {}", file(csv), only_if(all_of({rows, seed, number_is("token", token)}), csv_number(x)),
                           csv_number(y), style);
    };
    std::vector<std::string> plots;
    if (!faint.empty()) {
        plots.push_back(series(faint, 0, "x", "y", "with lines lc rgb '#A00072B2' lw 0.8"));
        plots.push_back(series(faint, 1, "x", "y", "with lines lc rgb '#A0D55E00' lw 0.8"));
    }
    if (!bold.empty()) {
        plots.push_back(series(bold, 0, "x", "y", "with linespoints pt 7 ps 0.35 pi 5 lc rgb '#0072B2'"));
        plots.push_back(series(bold, 1, "x", "y", "with linespoints pt 5 ps 0.35 pi 5 lc rgb '#D55E00'"));
    }
    plots.push_back(series(arc_seed, 0, "target_x", "target_y", kArcStyle));
    plots.push_back(series(arc_seed, 1, "target_x", "target_y", kArcStyle));
    return plots;
}

// Square panels over equal ranges: equal aspect without `set size ratio` (the layout's margins fix the panel). The
// trajectories of several seeds follow each other in one CSV: the rows of the others (NaN here) must break a line,
// not be skipped as `set datafile missing NaN` (the shared preamble) would, which joined one seed's end to the next
// seed's start.
const std::string kCirclePreface = fmt::format("unset datafile missing\nset xrange [-{0}:{0}]\nset yrange [-{0}:{0}]\n"
                                               "set xtics 0.25\nset ytics 0.25\nset format x '%g'\nset format y '%g'\n"
                                               "set xlabel 'x'\n",
                                               kCirclePlotLimit);  // circle_escape_notes names what leaves it

// Lines of text at the top left inside a panel, one under the other ("unset label" first: a panel's labels are its own).
std::string panel_labels(const std::vector<std::string>& lines) {
    std::string labels = "unset label\n";
    for (std::size_t i = 0; i < lines.size(); ++i)
        labels += fmt::format("set label {} at graph 0.03, graph {} left front\n", gnuplot_quote(lines[i]), 0.93 - 0.09 * i);
    return labels;
}

}  // namespace

Figure circle_figure(const std::vector<std::string>& variants, const std::vector<std::string>& panel_titles,
                     const std::vector<std::vector<std::string>>& panel_notes, std::uint64_t first_seed, int steps,
                     bool several_seeds) {
    const int cols = std::min<int>(4, static_cast<int>(variants.size()));
    const int rows = (static_cast<int>(variants.size()) + cols - 1) / cols;
    PanelFigure figure("circle", fmt::format("E3: a {}-state rollout of the trained 1-layer, 2-head model", steps), rows, cols,
                       300, 300);
    figure.add_preface(kCirclePreface);
    const std::string first = number_is("seed", static_cast<double>(first_seed));
    for (std::size_t v = 0; v < variants.size(); ++v)
        figure.add_panel("set title " + gnuplot_quote(panel_titles.at(v)) + "\n" + ylabel("y", v % cols == 0) +
                         panel_labels(panel_notes.at(v)) +
                         join_plots(circle_plots(kCircleCsv, text_is("variant", variants[v]),
                                                 several_seeds ? "!(" + first + ")" : "", first, first)));
    figure.add_key_entry("arcs (targets)", kArcStyle);
    figure.add_key_entry(fmt::format("token 1, seed {}", first_seed), "with linespoints pt 7 ps 0.6 lc rgb '#0072B2'");
    figure.add_key_entry(fmt::format("token 2, seed {}", first_seed), "with linespoints pt 5 ps 0.6 lc rgb '#D55E00'");
    if (several_seeds) figure.add_key_entry("other seeds", "with lines lc rgb '#A00072B2' lw 0.8");
    return figure.build();
}

Figure circle_regimes_figure(const std::vector<std::string>& regimes, const std::vector<std::string>& variants,
                             const std::vector<std::vector<std::string>>& panel_notes, std::uint64_t first_seed, int steps) {
    const std::string csv = "circle_regimes_trajectories.csv";
    PanelFigure figure("circle_regimes", fmt::format("E3 by training regime: {}-state rollouts, every seed", steps),
                       static_cast<int>(regimes.size()), static_cast<int>(variants.size()), 260, 260);
    figure.add_preface(kCirclePreface);
    std::size_t panel = 0;
    for (const auto& regime : regimes)
        for (std::size_t v = 0; v < variants.size(); ++v, ++panel) {
            figure.add_panel("set title " + gnuplot_quote(variants[v]) + "\n" + ylabel(regime, v == 0) +
                             panel_labels(panel_notes.at(panel)) +
                             join_plots(circle_plots(csv, all_of({text_is("regime", regime), text_is("variant", variants[v])}),
                                                     "1", "", number_is("seed", static_cast<double>(first_seed)))));
        }
    figure.add_key_entry("arcs (targets)", kArcStyle);
    figure.add_key_entry("token 1 (one line per seed)", "with lines lc rgb '#A00072B2' lw 0.8");
    figure.add_key_entry("token 2", "with lines lc rgb '#A0D55E00' lw 0.8");
    return figure.build();
}

}  // namespace rankscope
