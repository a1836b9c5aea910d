#pragma once
// Every measure of SPEC.md §2 for one matrix, as tidy records (what `rankscope measure` prints).
#include <string>
#include <vector>

#include "rankscope/measures.hpp"

namespace rankscope {

struct MeasureRecord {
    std::string measure;  // "norm", "residual", "relative_residual", "exact_below_mean", "singular_value", ...
    std::string norm;     // "" when the measure has no norm
    std::string center;   // "" when the measure has no centre
    int index = -1;       // position for vector measures (singular values), else -1
    double value = 0;
};

struct MeasureAllOptions {
    std::vector<Center> centers = all_centers();
    double rank_tolerance = -1;      // relative to σ1; < 0 = numpy's default for the input dtype
    bool single_precision = false;   // input was float32 (sets the default rank tolerance)
};

// Norms; residual and relative residual for each norm × centre; how far `exact` is below `mean` (1 − exact/mean);
// singular values, effective/stable/numerical rank, mean pairwise cosine; attention measures when X is square and
// row-stochastic.
std::vector<MeasureRecord> measure_all(const Matrix& x, const MeasureAllOptions& options);

}  // namespace rankscope
