#include "rankscope/measure_all.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "rankscope/error.hpp"
#include "rankscope/warnings.hpp"

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
        bool exact = false;  // (not `exact_residual >= 0`: a NaN one left its row out)
        for (Center center : options.centers) {
            const double value = residual_norm(x, norm, center);
            if (center == Center::Mean) mean_residual = value;
            if (center == Center::Exact) exact_residual = value, exact = true;
            add("residual", to_string(norm), to_string(center), value);
            add("relative_residual", to_string(norm), to_string(center), ratio_or_zero(value, whole));
        }
        if (exact) {
            if (mean_residual < 0) mean_residual = residual_norm(x, norm, Center::Mean);
            add("exact_below_mean", to_string(norm), "", mean_residual == 0 ? 0.0 : 1.0 - exact_residual / mean_residual);
        }
    }
    const Vector s = singular_values(x);
    for (Eigen::Index i = 0; i < s.size(); ++i) add("singular_value", "", "", s(i), static_cast<int>(i));
    add("effective_rank", "", "", effective_rank(s));
    add("stable_rank", "", "", stable_rank(s));
    const double tolerance = options.rank_tolerance >= 0
                                 ? options.rank_tolerance
                                 : default_rank_tolerance(x.rows(), x.cols(), s, options.stored_epsilon);
    add("numerical_rank", "", "", numerical_rank(s, tolerance));
    add("numerical_rank_tolerance", "", "", tolerance);
    add("mean_pairwise_cosine", "", "", mean_pairwise_cosine(x));
    // Rows of a softmax stored in float16 (bfloat16) sum to 1 within its epsilon, 9.8e-4 (7.8e-3), not within 1e-4:
    // their attention measures were left out without a word.
    if (is_row_stochastic(x, std::max(1e-4, options.stored_epsilon))) {
        const AttentionMeasures attention = attention_measures(x);
        add("attention_mean_row_entropy", "", "", attention.mean_row_entropy);
        add("attention_max_row_entropy", "", "", attention.max_row_entropy);
        add("attention_first_token_share", "", "", attention.first_token_share);
        add("attention_sigma2", "", "", attention.sigma2);
        add("attention_spectral_gap", "", "", attention.spectral_gap);
    }
    return records;
}

MeasureArrayResult measure_array(const ArrayView& array, const MeasureArrayOptions& options, const std::string& where,
                                 const InterruptPoll& interrupt) {
    if (array.shape.size() < 2)
        throw Error("need a matrix (rank >= 2), got an array of rank " + std::to_string(array.shape.size()), where);
    const std::int64_t n = array.shape[array.shape.size() - 2], d = array.shape.back();
    if (n == 0 || d == 0) throw Error("empty matrix (" + std::to_string(n) + " x " + std::to_string(d) + ")", where);
    const std::vector<double> values = to_double_vector(array);
    for (std::size_t i = 0; i < values.size(); ++i)
        if (!std::isfinite(values[i]))
            throw Error(fmt::format("{} at {}", std::isnan(values[i]) ? "NaN" : "Inf",
                                    entry_position_text(array.shape, static_cast<std::int64_t>(i))),
                        where);

    MeasureArrayResult result;
    result.shape = array.shape;
    result.dtype = array.dtype;
    result.rows = n;
    result.cols = d;
    MeasureAllOptions measure_options;
    measure_options.stored_epsilon = options.stored_epsilon > 0 ? options.stored_epsilon : dtype_epsilon(array.dtype);
    measure_options.rank_tolerance = options.rank_tolerance;
    if (!options.centers.empty()) {
        measure_options.centers = options.centers;
        if (std::find(options.centers.begin(), options.centers.end(), Center::Exact) != options.centers.end())
            check_exact_center_size(n, d, "exact centre", where);
    } else if (n * d > kExactDefaultLimit) {
        measure_options.centers = {Center::Mean, Center::Median, Center::Rank1};
        result.exact_skipped = true;
    }
    const std::size_t items = values.size() / static_cast<std::size_t>(n * d);
    std::vector<std::size_t> without_pairs;  // matrices with fewer than two nonzero rows
    for (std::size_t m = 0; m < items; ++m) {
        interrupt.poll();
        const Matrix x = Eigen::Map<const Matrix>(values.data() + m * static_cast<std::size_t>(n * d), n, d);
        std::vector<MeasureRecord> records = measure_all(x, measure_options);
        // The cosine is undefined, not broken, with fewer than two nonzero rows (one token, a zero matrix): its row
        // is left out and one warning names the matrices (it stopped the whole measurement of a legal input). With
        // allow_nonfinite it is written as NaN, as asked.
        // (a row with any nonzero entry counts, as in mean_pairwise_cosine: squared norms underflowed near 1e-170)
        if (!options.allow_nonfinite && (x.array() != 0).rowwise().any().count() < 2) {
            without_pairs.push_back(m);
            records.erase(std::remove_if(records.begin(), records.end(),
                                         [](const MeasureRecord& r) {
                                             return r.measure == "mean_pairwise_cosine" && std::isnan(r.value);
                                         }),
                          records.end());
        }
        for (const auto& r : records)
            check_finite_result(r.value,
                                fmt::format("{}{}{}{} of matrix {}", r.measure, r.norm.empty() ? "" : " " + r.norm,
                                            r.center.empty() ? "" : " " + r.center,
                                            r.index < 0 ? "" : fmt::format(" [{}]", r.index), m),
                                where, options.allow_nonfinite);
        result.matrices.push_back(std::move(records));
    }
    if (!without_pairs.empty()) {
        const std::size_t shown = std::min<std::size_t>(without_pairs.size(), 5);
        warn(fmt::format("mean_pairwise_cosine is undefined for {} (fewer than 2 nonzero rows: no pair of tokens), left "
                         "out of the table: matri{} {}{} ({})",
                         items == 1 ? std::string("the matrix") : fmt::format("{} of {} matrices", without_pairs.size(), items),
                         without_pairs.size() == 1 ? "x" : "ces",
                         fmt::join(without_pairs.begin(), without_pairs.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                         without_pairs.size() > shown ? ", ..." : "", where));
    }
    return result;
}

Table measures_table(const MeasureArrayResult& result) {
    Table table({{"matrix", Table::Integer},
                 {"measure", Table::Text},
                 {"norm", Table::Text},
                 {"center", Table::Text},
                 {"index", Table::Real},
                 {"value", Table::Real}});
    for (std::size_t m = 0; m < result.matrices.size(); ++m)
        for (const auto& r : result.matrices[m])
            table.add({static_cast<std::int64_t>(m), r.measure, r.norm, r.center,
                       r.index < 0 ? Table::Cell() : Table::Cell(static_cast<double>(r.index)), r.value});
    return table;
}

}  // namespace rankscope
