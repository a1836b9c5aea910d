#pragma once
// E6 (SPEC.md §4): path-length tables of common architectures, judged against the paper's BERT-base mean length.
// The α-weighted distribution needs a measured skip ratio, so it is judged where α is measured: the E1 cells
// (real_model_findings, skip_ratio.csv).
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/paths.hpp"

namespace rankscope {

struct ArchitecturePaths {
    NamedArchitecture architecture;
    std::vector<PathLengthRow> rows;  // path_length_distribution(L, H)
    double mean_length = 0;
};
std::vector<ArchitecturePaths> path_count_tables(const std::vector<NamedArchitecture>& architectures);

Findings path_count_findings(const std::vector<ArchitecturePaths>& tables);

}  // namespace rankscope
