#pragma once
// E6 (SPEC.md §4): path-length tables of common architectures, judged against the paper's BERT-base mean length.
// The α-weighted distribution needs a measured skip ratio, so it is judged where α is measured: the E1 cells
// (real_model_findings, skip_ratio.csv).
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/paths.hpp"
#include "rankscope/table.hpp"

namespace rankscope {

struct ArchitecturePaths {
    NamedArchitecture architecture;
    std::vector<PathLengthRow> rows;  // path_length_distribution(L, H)
    double mean_length = 0;
};
std::vector<ArchitecturePaths> path_count_tables(const std::vector<NamedArchitecture>& architectures);
// One architecture ("custom", `paths count --layers L --heads H [--alpha ...]`); with α (one per layer, each in
// [0, 1]) the rows carry the α-weighted shares and mean_length stays the unweighted one.
ArchitecturePaths custom_path_counts(int layers, int heads, const std::vector<double>& alpha = {});

// path_counts.csv: architecture, layers, heads, length, count, share, alpha_share (empty/NaN without α).
Table path_counts_table(const std::vector<ArchitecturePaths>& tables, bool with_alpha);

Findings path_count_findings(const std::vector<ArchitecturePaths>& tables);

}  // namespace rankscope
