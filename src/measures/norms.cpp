// Norms, centres and residuals of one n × d matrix (see include/rankscope/measures.hpp for the definitions).
#include <algorithm>
#include <cmath>

#include "measures/kernels.hpp"
#include "rankscope/error.hpp"

namespace rankscope {

const std::vector<Norm>& all_norms() {
    static const std::vector<Norm> norms = {Norm::L1, Norm::LInf, Norm::Composite, Norm::Frobenius, Norm::Spectral};
    return norms;
}
const std::vector<Center>& all_centers() {
    static const std::vector<Center> centers = {Center::Mean, Center::Median, Center::Exact, Center::Rank1};
    return centers;
}

std::string to_string(Norm norm) {
    switch (norm) {
        case Norm::L1: return "l1";
        case Norm::LInf: return "linf";
        case Norm::Composite: return "composite";
        case Norm::Frobenius: return "frobenius";
        case Norm::Spectral: return "spectral";
    }
    return "?";
}
std::string to_string(Center center) {
    switch (center) {
        case Center::Mean: return "mean";
        case Center::Median: return "median";
        case Center::Exact: return "exact";
        case Center::Rank1: return "rank1";
    }
    return "?";
}
Norm parse_norm(const std::string& text) {
    for (Norm norm : all_norms())
        if (to_string(norm) == text) return norm;
    throw Error("unknown norm '" + text + "' (expected l1, linf, composite, frobenius or spectral)", "norm");
}
Center parse_center(const std::string& text) {
    for (Center center : all_centers())
        if (to_string(center) == text) return center;
    throw Error("unknown centre '" + text + "' (expected mean, median, exact or rank1)", "center");
}

namespace detail {

// √ℓ1·√ℓ∞, not √(ℓ1·ℓ∞): the product overflows for entries near 1e300 (and underflows near 1e-300) where the norm does not.
double SumNorms::composite() const { return std::sqrt(l1) * std::sqrt(linf); }
double SumNorms::get(Norm norm) const {
    switch (norm) {
        case Norm::L1: return l1;
        case Norm::LInf: return linf;
        case Norm::Composite: return composite();
        case Norm::Frobenius: return frobenius;
        case Norm::Spectral: break;
    }
    throw Error("internal: spectral norm is not a sum norm");
}

SumNorms shifted_sum_norms(const Matrix& x, const RowVector& center) {
    const Eigen::Index n = x.rows(), d = x.cols();
    RowVector column_sums = RowVector::Zero(d);
    SumNorms out;
    double largest = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
        const auto magnitude = (x.row(i) - center).array().abs();
        column_sums.array() += magnitude;
        // NaN sticks here too: std::max(0, NaN) is 0, and a matrix with a NaN had a finite composite norm.
        const double row_sum = magnitude.sum();
        if (std::isnan(row_sum) || row_sum > out.linf) out.linf = row_sum;
        if (magnitude.size() > 0) {
            const double row_largest = magnitude.maxCoeff<Eigen::PropagateNaN>();
            if (std::isnan(row_largest) || row_largest > largest) largest = row_largest;  // NaN sticks
        }
    }
    out.l1 = d > 0 ? column_sums.maxCoeff<Eigen::PropagateNaN>() : 0.0;
    // The squares of entries scaled by the largest: entries near 1e±300 neither overflow nor underflow.
    double squares = 0;
    if (largest > 0 && std::isfinite(largest))
        for (Eigen::Index i = 0; i < n; ++i) squares += ((x.row(i) - center).array() / largest).square().sum();
    out.frobenius = std::isfinite(largest) ? largest * std::sqrt(squares) : largest;  // NaN or +Inf as they are
    return out;
}

SumNorms sum_norms(const Matrix& x) { return shifted_sum_norms(x, RowVector::Zero(x.cols())); }

}  // namespace detail

double induced_l1_norm(const Matrix& m) { return detail::sum_norms(m).l1; }
double induced_linf_norm(const Matrix& m) { return detail::sum_norms(m).linf; }
double composite_norm(const Matrix& m) { return detail::sum_norms(m).composite(); }
double frobenius_norm(const Matrix& m) { return detail::sum_norms(m).frobenius; }
double spectral_norm(const Matrix& m) { return detail::top_singular_triplet(m).sigma; }
double matrix_norm(const Matrix& m, Norm norm) {
    return norm == Norm::Spectral ? spectral_norm(m) : detail::sum_norms(m).get(norm);
}

RowVector column_mean(const Matrix& x) { return x.colwise().mean(); }

RowVector column_median(const Matrix& x) {
    const Eigen::Index n = x.rows();
    RowVector median(x.cols());
    std::vector<double> column(static_cast<std::size_t>(n));
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
        for (Eigen::Index i = 0; i < n; ++i) column[static_cast<std::size_t>(i)] = x(i, j);
        const auto middle = column.begin() + n / 2;
        std::nth_element(column.begin(), middle, column.end());
        double value = *middle;
        if (n % 2 == 0) value = 0.5 * (value + *std::max_element(column.begin(), middle));
        median(j) = value;
    }
    return median;
}

RowVector center_of(const Matrix& x, Norm norm, Center center) {
    switch (center) {
        case Center::Mean: return column_mean(x);
        case Center::Median: return column_median(x);
        case Center::Exact: return exact_center(x, norm).center;
        case Center::Rank1: break;
    }
    throw Error("the rank1 residual has no single centre row");
}

Matrix rank1_approximation(const Matrix& x) {
    const auto top = detail::top_singular_triplet(x);
    return top.sigma * top.u * top.v.transpose();
}

Matrix residual(const Matrix& x, Norm norm, Center center) {
    if (center == Center::Rank1) return x - rank1_approximation(x);
    return x.rowwise() - center_of(x, norm, center);
}

double residual_norm(const Matrix& x, Norm norm, Center center) {
    if (x.size() == 0) return 0.0;
    if (center == Center::Rank1 || norm == Norm::Spectral) return matrix_norm(residual(x, norm, center), norm);
    if (center == Center::Exact) return exact_center(x, norm).residual;
    return detail::shifted_sum_norms(x, center_of(x, norm, center)).get(norm);
}

double relative_residual(const Matrix& x, Norm norm, Center center) {
    const double denominator = matrix_norm(x, norm);
    return ratio_or_zero(residual_norm(x, norm, center), denominator);
}

}  // namespace rankscope
