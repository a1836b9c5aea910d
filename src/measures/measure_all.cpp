#include "rankscope/measure_all.hpp"

#include <algorithm>

namespace rankscope {

std::vector<MeasureRecord> measure_all(const Matrix& x, const MeasureAllOptions& options) {
    std::vector<MeasureRecord> records;
    auto add = [&](std::string measure, std::string norm, std::string center, double value, int index = -1) {
        records.push_back({std::move(measure), std::move(norm), std::move(center), index, value});
    };
    for (Norm norm : all_norms()) {
        const double whole = matrix_norm(x, norm);
        add("norm", to_string(norm), "", whole);
        double mean_residual = -1, exact_residual = -1;
        for (Center center : options.centers) {
            const double value = residual_norm(x, norm, center);
            if (center == Center::Mean) mean_residual = value;
            if (center == Center::Exact) exact_residual = value;
            add("residual", to_string(norm), to_string(center), value);
            add("relative_residual", to_string(norm), to_string(center), whole > 0 ? value / whole : 0.0);
        }
        if (exact_residual >= 0) {
            if (mean_residual < 0) mean_residual = residual_norm(x, norm, Center::Mean);
            add("exact_below_mean", to_string(norm), "", mean_residual > 0 ? 1.0 - exact_residual / mean_residual : 0.0);
        }
    }
    const Vector s = singular_values(x);
    for (Eigen::Index i = 0; i < s.size(); ++i) add("singular_value", "", "", s(i), static_cast<int>(i));
    add("effective_rank", "", "", effective_rank(s));
    add("stable_rank", "", "", stable_rank(s));
    const double tolerance = options.rank_tolerance >= 0
                                 ? options.rank_tolerance
                                 : default_rank_tolerance(x.rows(), x.cols(), options.single_precision);
    add("numerical_rank", "", "", numerical_rank(s, tolerance));
    add("numerical_rank_tolerance", "", "", tolerance);
    add("mean_pairwise_cosine", "", "", mean_pairwise_cosine(x));
    if (is_row_stochastic(x)) {
        const AttentionMeasures attention = attention_measures(x);
        add("attention_mean_row_entropy", "", "", attention.mean_row_entropy);
        add("attention_max_row_entropy", "", "", attention.max_row_entropy);
        add("attention_first_token_share", "", "", attention.first_token_share);
        add("attention_sigma2", "", "", attention.sigma2);
        add("attention_spectral_gap", "", "", attention.spectral_gap);
    }
    return records;
}

}  // namespace rankscope
