#pragma once
// The bodies of rankscope's figures, built from the CSV files' column NAMES (gnuplot's column('name') and
// strcol('name'), with the header row read by `set datafile columnheaders` in figure_style_preamble()), never from
// column positions. Every figure shares one layout: panels of equal size in a grid, an overall title, and one key for
// the whole figure in its own strip below the panels (a key never squeezes a panel). Ranges come from the data
// (gnuplot `stats`), layer/length axes have integer ticks, log axes mark the float round-off floor.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/figure.hpp"

namespace rankscope {

// ---- expressions over a CSV row, by column name ----------------------------------------------------------------
std::string csv_number(const std::string& column);                               // column('column')
std::string csv_text(const std::string& column);                                 // strcol('column')
std::string text_is(const std::string& column, const std::string& value);        // strcol('column') eq 'value'
std::string number_is(const std::string& column, double value);                  // column('column') == value
std::string all_of(const std::vector<std::string>& conditions);                  // (a) && (b) ...; "1" when empty
std::string only_if(const std::string& condition, const std::string& value);     // (condition ? value : NaN)

// The round-off floor marked on a log axis: a dtype's machine epsilon (bfloat16 2^-7 = 7.81e-3, float16 2^-10 =
// 9.77e-4, float32 2^-23 = 1.19e-7, float64 2^-52 = 2.22e-16).
enum class FloatFloor { none, bfloat16, float16, float32, float64 };

// ---- the shared layout, for figures not built below (e.g. the circle figure) -------------------------------------
struct KeyEntry {
    std::string title;
    std::string style;  // gnuplot style of the sample, e.g. "with linespoints lt 1" or "with lines lt 8 dt 2"
};
class PanelFigure {
public:
    // rows x cols panels of panel_width x panel_height canvas units each (plus margins for tick labels and titles).
    PanelFigure(std::string stem, std::string title, int rows, int cols, int panel_width = 500, int panel_height = 330);
    // Commands run once before the panels (e.g. `stats` for ranges shared by all panels).
    void add_preface(const std::string& commands);
    // One panel: commands ending with its `plot`; panels fill the grid row by row. The panel's margins are set before
    // the commands; settings carry over to the next panel (set or unset what differs).
    void add_panel(const std::string& commands);
    // The figure's key, drawn once below the panels.
    void add_key_entry(const std::string& title, const std::string& style);
    // Room right of every panel for a colour box with its tick labels and label (heat maps), in canvas units.
    void reserve_colorbox(int units) { colorbox_ = units; }
    // At most `entries` key entries a line (default: as many as the widest title leaves room for, from an upper bound
    // of its width in the font). For a grouping of the builder's choice: theory's six variants in two lines of three.
    void limit_key_per_line(int entries) { key_per_line_ = entries; }
    Figure build() const;

private:
    std::string stem_, title_, preface_;
    int rows_, cols_, panel_width_, panel_height_;
    int colorbox_ = 0;
    int key_per_line_ = 0;  // 0: from the width
    std::vector<std::string> panels_;
    std::vector<KeyEntry> key_;
};

// Axis helpers (gnuplot commands). `name` is a unique gnuplot identifier for the stats variables (e.g. "x1").
// Integer ticks (step 1, or a larger integer step for long axes) over the data range of `expression` in `csv`, with
// half a unit of margin each side.
std::string integer_axis(const std::string& axis, const std::string& csv, const std::string& expression,
                         const std::string& name);
// y from 0 to max(minimum_top, data max x 1.05) of `expression` in `csv`.
std::string y_from_zero(const std::string& csv, const std::string& expression, double minimum_top, const std::string& name);
// Log y over the positive values of `expression` in `csv`, with a factor-2 margin; the float floor drawn as a dashed
// labelled line (and kept inside the range) when the data come within 100x of it. Defines the gnuplot variable
// `<name>_bottom` (the axis bottom, where zeros are drawn: use log_value()). `floor_label` replaces the line's label
// ("float32 round-off") where the line is a reference rather than the data's own floor. `floor_in_key`: the line is
// always drawn (the range always reaches it) and unlabelled, for a figure that names it in its key (floor_key_entry)
// because its data may sit on any part of the line (E2's boxes ran under the label).
std::string log_y(const std::string& csv, const std::string& expression, FloatFloor floor, const std::string& name,
                  const std::string& floor_label = "", bool floor_in_key = false);
// The key entry of that line: a grey dashed line.
inline constexpr const char* kFloorKeyStyle = "with lines lc rgb '#444444' lw 1.5 dt 2";
// `expression` where it is positive, else the axis bottom defined by log_y(..., name).
std::string log_value(const std::string& expression, const std::string& name);
// The line style of the v-th surgery variant (SAN, SAN+MLP, SAN+skip, transformer, ...) where variants may coincide (SAN
// and SAN+MLP both at ≈0 from layer 1 at init): every other line dashed and each later marker smaller, so a series
// drawn over an earlier one leaves the earlier one's colour visible in the gaps and around its markers.
// `linetype` (1-based, the palette's) gives the colour and point type; without it, v + 1.
std::string coinciding_series_style(std::size_t v);
std::string coinciding_series_style(std::size_t v, int linetype);
// A network variant's linetype, the same in every figure (E1's residual.svg, theory.svg, theory_bounds.svg and the
// dynamics curves had SAN+skip in three different colours): SAN 1, SAN+skip 2, SAN+MLP 3, SAN+skip+MLP and transformer
// 4 (the full block; never in one figure together), SAN+LN 5, SAN+affine-LN 6; any other name `fallback`.
int variant_linetype(const std::string& variant, int fallback);

// ---- the figures -------------------------------------------------------------------------------------------------
// theory.svg from theory_summary.csv (variant, layer, relative_residual_mean): one panel per head count (variant
// names "X" for one head, "X/H=n" for n heads), one colour per architecture X; float64 floor.
Figure theory_figure(const std::vector<std::string>& variants);
// collapse_depth.svg of a theory sweep from collapse_depth_summary.csv (variant, heads, d_model, mean_depth, max_depth):
// one panel per variant that collapsed somewhere (`panel_titles`: one per variant, e.g. "SAN+LN: 1 of 4 runs
// collapsed"), x = heads (log 2, one range for every panel), one colour per width d_model ("" = the grid does not vary
// it), coinciding widths told apart by coinciding_series_style; `never_collapsed` named in the figure's title.
Figure collapse_depth_figure(const std::vector<std::string>& variants, const std::vector<std::string>& panel_titles,
                             const std::vector<std::string>& d_models, const std::vector<std::string>& never_collapsed);
// theory_bounds.svg from theory_summary.csv (variant, layer, residual_mean, bound_step_mean): measured (solid) and
// the per-layer bound (dashed) for the variants with a bound.
Figure theory_bounds_figure(const std::vector<std::string>& bounded_variants);

// residual.svg (E1) from residual.csv (weights, variant, layer, mean, std): one panel per weights kind, mean ± 1 std
// band per variant (and its key entry) over `samples` > 1. `variants` are the CSV's variant values, `titles` their
// legend names (same length).
Figure residual_figure(const std::string& model, const std::vector<std::string>& weight_kinds,
                       const std::vector<std::string>& variants, const std::vector<std::string>& titles, long samples);

// paths.svg (E2) from paths.csv (length, [weights], and each of `metric_columns`): box plots of each metric per path
// length k, one panel per metric column (e.g. {"relative_residual", "relative_residual_frobenius"}), one box colour per
// weights kind. `weight_kinds` empty: the CSV has no weights column (rankscope paths sample). `title` is the
// figure's overall title.
Figure paths_figure(const std::string& title, const std::vector<std::string>& metric_columns,
                    const std::vector<std::string>& weight_kinds, FloatFloor floor);

// iterate.svg from iterate.csv (weights, variant, step, mean): USE lite's layer-1 attention applied repeatedly.
Figure iterate_figure(const std::vector<std::string>& weight_kinds, FloatFloor floor);

// path_counts.svg from path_counts.csv (architecture, layers, length, share, alpha_share).
Figure path_counts_figure(const std::vector<std::string>& architectures, bool alpha_weighted);

// paths_effectiveness.svg (E4) from paths_effectiveness_summary.csv (sub_path, n_paths, k, mean, std) and the
// reference accuracies in paths_effectiveness.csv (metric = whole_model_accuracy / majority_accuracy /
// position_majority_accuracy, value).
// `series`: (sub_path "yes"/"no", n_paths) per line.
Figure paths_effectiveness_figure(const std::string& task, const std::vector<std::pair<std::string, int>>& series, int seeds = 1);

// width_depth.svg (E5) from width_depth_residual.csv (layers, relative_depth, mean) and width_depth_paths.csv
// (layers, k, share). `depths`: (layers, legend title) per model.
Figure width_depth_figure(const std::string& task, const std::vector<std::pair<int, std::string>>& depths);

// trainability.svg (Noci et al. 2022) from trainability_summary.csv (layer_norm, scaling, depth, last_cosine_mean) and
// trainability.csv (layer_norm, scaling, depth, layer, input_cosine, query_over_value): the last layer's token cosine
// against depth; ‖∇W_Q‖/‖∇W_V‖ per layer at depth `deepest`; the same ratio against each layer's input cosine.
// `series`: (layer_norm, scaling, legend title) per configuration.
struct TrainabilitySeries {
    std::string layer_norm, scaling, title;
};
Figure trainability_figure(const std::vector<TrainabilitySeries>& series, int deepest);

// failure_modes.svg from failure_modes_summary.csv (variant, query_key_scale, layer, normalized_entropy_mean,
// log10_relative_residual_mean): per variant, two heat maps over (query/key scale, layer): attention entropy and the
// relative residual; the scales as equal columns labelled with their values, the freezing scale s_c marked.
Figure failure_modes_figure(const std::vector<std::string>& variants, const std::vector<double>& scales, int layers,
                            double freezing_scale);

// circle.svg (E3) from circle_trajectories.csv (variant, seed, token, x, y, target_x, target_y): one square panel per
// variant with equal axes, the arcs dashed, the first seed's two tokens bold, the other seeds faint. `panel_titles`:
// one per variant; `panel_notes`: lines drawn inside each panel, top left (circle_panel_text gives both).
Figure circle_figure(const std::vector<std::string>& variants, const std::vector<std::string>& panel_titles,
                     const std::vector<std::vector<std::string>>& panel_notes, std::uint64_t first_seed, int steps,
                     bool several_seeds);
// circle_regimes.svg from circle_regimes_trajectories.csv (the same columns and `regime`; names without commas, as
// gnuplot splits fields at every comma): small multiples, one row per regime and one column per variant, every seed's
// trajectories as thin lines over the arcs (those of `first_seed`). `panel_notes`: regime-major, the lines written
// inside each panel.
Figure circle_regimes_figure(const std::vector<std::string>& regimes, const std::vector<std::string>& variants,
                             const std::vector<std::vector<std::string>>& panel_notes, std::uint64_t first_seed, int steps);

// The heat maps' colour palette (viridis, colour-blind safe), as a gnuplot command.
const char* heatmap_palette();

}  // namespace rankscope
