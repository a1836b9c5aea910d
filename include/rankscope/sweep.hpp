#pragma once
// `rankscope sweep`: a grid of one experiment's settings, expanded into cells, each run as the experiment's own command
// into its own folder, and the cells' CSV tables gathered into tidy tables with the cell's settings as columns.
//
//   experiment = "theory"            # grid.toml (or the same in JSON: {"experiment": ..., "fixed": {...}, "axes": {...}})
//   [fixed]                          # flags every cell gets: --d-model 32 --tokens 16 --seeds 1
//   d-model = 32
//   tokens = 16
//   seeds = 1
//   [axes]                           # the grid: every combination is a cell (last axis fastest)
//   heads = [1, 2, 4, 8]
//   seed = [0, 1, 2]
//
// A setting's name is the command's flag without "--"; a true boolean is the bare flag, a false one is left out. The
// cell key is the first 16 hex digits of the SHA-256 of the experiment and every setting (sorted by name), so the same
// settings give the same key whatever the order in the file, and a re-run finds the cells it already has (a false
// boolean, a flag left out, is not hashed).
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace rankscope {

struct SweepSetting {
    std::string name;   // flag name without "--", e.g. "d-model"
    std::string value;  // as passed on the command line ("32", "0.5", "sort"); "true"/"false" for a boolean
    bool boolean = false;
};

struct SweepAxis {
    std::string name;
    std::vector<SweepSetting> values;  // each with name = the axis name
};

struct SweepGrid {
    std::string path;        // the grid file (errors name it)
    std::string experiment;  // a rankscope command: theory, model, "paths count", "task sort", width-depth, measure, ...
    std::vector<SweepSetting> fixed;
    std::vector<SweepAxis> axes;
};

// The commands a sweep may run (not reproduce, embed or sweep itself); paths and task with their second word.
const std::vector<std::string>& sweep_experiments();
// An experiment's words on the command line: "task sort" → {"task", "sort"}.
std::vector<std::string> sweep_command_words(const std::string& experiment);

// Reads a grid from .json or .toml (by extension). Throws rankscope::Error naming the file for a syntax error, an
// unknown experiment, an empty or repeated axis, a setting that is not a number, string or boolean, a name that is not
// a flag name ([a-z0-9-]), a setting both fixed and an axis, or one the sweep sets itself (out, threads, format).
SweepGrid read_sweep_grid(const std::filesystem::path& path);
// The same from text already read; `format` is "json" or "toml".
SweepGrid parse_sweep_grid(const std::string& text, const std::string& format, const std::string& path);

struct SweepCell {
    int index = 0;                      // position in the grid's expansion (last axis fastest)
    std::string key;                    // 16 hex digits
    std::vector<SweepSetting> axes;     // this cell's value on each axis, in the grid's axis order
    std::vector<SweepSetting> fixed;    // the grid's fixed settings, in file order
    std::vector<SweepSetting> settings; // axes + fixed, sorted by name (what the key hashes)
    // The command's arguments after the program name, without --out and --threads: {"theory", "--d-model", "32", ...}
    std::vector<std::string> arguments;
};

// Every combination of the axes; at most `limit` cells (Error naming the file otherwise).
std::vector<SweepCell> expand_sweep_grid(const SweepGrid& grid, std::size_t limit = 100000);

// A cell's arguments: the command's words, then "--name value" per setting ("--name" for a true boolean, nothing for
// a false one). A setting named in `positionals` (the command's positional arguments: measure's `file`) is passed as
// that argument right after the command's words — after a list option it would be read as one more value — and a
// value starting with '-' as "./-x.npy", so that it is not read as an option.
std::vector<std::string> sweep_cell_arguments(const std::string& experiment, const std::vector<SweepSetting>& settings,
                                              const std::set<std::string>& positionals = {});

// The key of a set of settings of one experiment (order-independent).
std::string sweep_cell_key(const std::string& experiment, std::vector<SweepSetting> settings);

// The table a cell's run is summarised by in sweep.csv (theory: theory.csv; model: residual.csv; ...): the first of
// these names that the cell wrote.
const std::vector<std::string>& sweep_primary_tables(const std::string& experiment);

// A column name for a setting: "cell_" + the flag name with '-' as '_' ("d-model" → "cell_d_model"), so that it never
// collides with a column of the experiment's own tables (theory.csv has its own "heads" and "seed").
std::string sweep_setting_column(const std::string& setting_name);

// One CSV file split into its records (RFC 4180: a quoted field may hold commas, quotes and newlines), '#' comment lines
// (provenance) dropped. Each record is kept as its original text, without the line end.
std::vector<std::string> csv_records(const std::string& text);

// The fields of one CSV record (RFC 4180 quoting undone).
std::vector<std::string> csv_fields(const std::string& record);

// The tidy union of one table over cells: "cell_key,cell_<axis>...,cell_<fixed>...,<the table's columns>" then every row of every
// cell in `cells` order. `tables[i]` is cell i's CSV text ("" = the cell has no such table: no rows). Throws Error when
// two cells' headers differ (naming `table_name`).
std::string merge_cell_tables(const std::vector<const SweepCell*>& cells, const std::vector<std::string>& tables,
                              const std::string& table_name);

// ---- collapse depth of a theory sweep (src/sweep/collapse_depth.cpp) ------------------------------------------------
// Collapse depth of one run (variant × seed of a cell): the first layer l ≥ 1 whose relative residual (composite, mean
// centre: theory.csv's relative_residual) is below `threshold`; -1 when no layer of the run is.
inline constexpr double kCollapseThreshold = 1e-3;
struct CollapseDepthSummary {
    std::string variant;   // without the "/H=h" suffix: SAN, SAN+MLP, ...
    int heads = 1;
    std::string d_model;   // the cell's d-model setting ("" when the grid does not set it)
    int runs = 0;          // distinct variant × seed runs in the group (one that two cells both ran counts once)
    int collapsed = 0;     // of those, how many fell below the threshold within their depth
    double mean_depth = 0; // over the collapsed runs (NaN when none)
    int min_depth = -1, max_depth = -1;
};
struct CollapseDepthTables {
    std::string runs_csv;     // collapse_depth.csv: the merged table's cell columns, variant, heads, seed, layers, collapse_depth
    std::vector<CollapseDepthSummary> summary;
};
// From a sweep's merged theory.csv (merge_cell_tables' output). Throws Error when a needed column is missing.
CollapseDepthTables collapse_depth_tables(const std::string& merged_theory_csv, double threshold = kCollapseThreshold);

}  // namespace rankscope
