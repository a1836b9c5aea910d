// SVD-based and similarity measures of one matrix.
#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <cmath>
#include <limits>

#include "measures/kernels.hpp"

namespace rankscope {

namespace detail {

// Eigen-decomposition of the smaller Gram matrix (d × d = XᵀX when d ≤ n, else n × n = XXᵀ), in double precision.
// The top eigenvector's error is ~ε_double · σ1² / (σ1² − σ2²), far below float32 round-off of the inputs.
TopSingular top_singular_triplet(const Matrix& x) {
    TopSingular top;
    if (x.size() == 0) return top;
    const bool features_side = x.cols() <= x.rows();
    const Matrix gram = features_side ? Matrix(x.transpose() * x) : Matrix(x * x.transpose());
    Eigen::SelfAdjointEigenSolver<Matrix> solver(gram);
    const Eigen::Index last = gram.rows() - 1;  // eigenvalues ascend
    top.sigma = std::sqrt(std::max(0.0, solver.eigenvalues()(last)));
    const Vector eigenvector = solver.eigenvectors().col(last);
    if (top.sigma == 0.0) {
        top.u = Vector::Zero(x.rows());
        top.v = Vector::Zero(x.cols());
        return top;
    }
    if (features_side) {
        top.v = eigenvector;
        top.u = x * top.v / top.sigma;
    } else {
        top.u = eigenvector;
        top.v = x.transpose() * top.u / top.sigma;
    }
    return top;
}

}  // namespace detail

Vector singular_values(const Matrix& x) {
    if (x.size() == 0) return Vector();
    Eigen::BDCSVD<Matrix> svd(x);  // values only; descending
    return svd.singularValues();
}

double effective_rank(const Vector& s) {
    const double total = s.sum();
    if (total <= 0) return 0.0;
    double entropy = 0;
    for (Eigen::Index i = 0; i < s.size(); ++i) {
        const double p = s(i) / total;
        if (p > 0) entropy -= p * std::log(p);
    }
    return std::exp(entropy);
}

double stable_rank(const Vector& s) {
    if (s.size() == 0 || s(0) <= 0) return 0.0;
    return s.squaredNorm() / (s(0) * s(0));
}

int numerical_rank(const Vector& s, double relative_tolerance) {
    if (s.size() == 0) return 0;
    const double threshold = relative_tolerance * s(0);
    int rank = 0;
    for (Eigen::Index i = 0; i < s.size(); ++i) rank += s(i) > threshold ? 1 : 0;
    return rank;
}

double default_rank_tolerance(Eigen::Index rows, Eigen::Index cols, bool single_precision) {
    const double epsilon = single_precision ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
    return static_cast<double>(std::max(rows, cols)) * epsilon;
}

// Σ_{i≠j} ŷ_i·ŷ_j = |Σ ŷ_i|² − Σ |ŷ_i|² for unit rows ŷ, so the mean over pairs needs one pass.
double mean_pairwise_cosine(const Matrix& x) {
    RowVector sum = RowVector::Zero(x.cols());
    Eigen::Index kept = 0;
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
        const double length = x.row(i).norm();
        if (length == 0) continue;
        sum += x.row(i) / length;
        ++kept;
    }
    if (kept < 2) return std::numeric_limits<double>::quiet_NaN();
    const double k = static_cast<double>(kept);
    return (sum.squaredNorm() - k) / (k * (k - 1));
}

bool is_row_stochastic(const Matrix& m, double tolerance) {
    if (m.rows() != m.cols() || m.size() == 0) return false;
    if ((m.array() < -tolerance).any()) return false;
    return ((m.rowwise().sum().array() - 1.0).abs() <= tolerance).all();
}

AttentionMeasures attention_measures(const Matrix& p) {
    AttentionMeasures out;
    const Eigen::Index n = p.rows();
    if (n == 0) return out;
    double entropy_sum = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
        double entropy = 0;
        for (Eigen::Index j = 0; j < p.cols(); ++j)
            if (p(i, j) > 0) entropy -= p(i, j) * std::log(p(i, j));
        entropy_sum += entropy;
        out.max_row_entropy = std::max(out.max_row_entropy, entropy);
    }
    out.mean_row_entropy = entropy_sum / static_cast<double>(n);
    out.first_token_share = p.col(0).mean();
    const Vector s = singular_values(p);
    out.sigma2 = s.size() > 1 ? s(1) : 0.0;
    out.spectral_gap = s(0) > 0 ? 1.0 - out.sigma2 / s(0) : 0.0;
    return out;
}

}  // namespace rankscope
