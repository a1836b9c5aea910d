// SVD-based and similarity measures of one matrix.
#include <Eigen/Eigenvalues>
#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "measures/kernels.hpp"

namespace rankscope {

namespace detail {

// LAPACK's dsyevr (here OpenBLAS's LAPACK, the one libtorch already loads), with gfortran's hidden lengths of the
// three character arguments.
extern "C" void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha, const double* a,
                       const int* lda, const double* beta, double* c, const int* ldc, std::size_t uplo_length,
                       std::size_t trans_length);
extern "C" void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n, double* a, const int* lda,
                        const double* vl, const double* vu, const int* il, const int* iu, const double* abstol, int* m,
                        double* w, double* z, const int* ldz, int* isuppz, double* work, const int* lwork, int* iwork,
                        const int* liwork, int* info, std::size_t jobz_length, std::size_t range_length,
                        std::size_t uplo_length);

namespace {

// From the top eigenpair (λ, e) of the Gram matrix of the side `features_side` names: σ1 = √λ and the other vector.
TopSingular triplet_from_gram_eigenpair(const Matrix& x, bool features_side, double eigenvalue, const Vector& eigenvector) {
    TopSingular top;
    top.sigma = std::isnan(eigenvalue) ? eigenvalue : std::sqrt(std::max(0.0, eigenvalue));  // NaN stays (it read 0)
    if (top.sigma == 0.0 || std::isnan(top.sigma)) {
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

// The top eigenpair of a symmetric matrix by dsyevr with RANGE = 'I', IL = IU = n: Householder tridiagonalisation,
// then only the largest eigenvalue (bisection) and its eigenvector (MRRR), both to full double accuracy
// (ABSTOL = the safe minimum, as LAPACK advises for high relative accuracy). False when LAPACK reports a failure.
bool top_eigenpair(Matrix gram, double& eigenvalue, Vector& eigenvector) {
    const int n = static_cast<int>(gram.rows());
    const char jobz = 'V', range = 'I', uplo = 'L';
    const double unused = 0, abstol = std::numeric_limits<double>::min();
    int found = 0, info = 0;
    std::vector<double> w(static_cast<std::size_t>(n));
    eigenvector.resize(n);
    std::vector<int> isuppz(2);
    double work_size = 0;
    int iwork_size = 0, query = -1;
    dsyevr_(&jobz, &range, &uplo, &n, gram.data(), &n, &unused, &unused, &n, &n, &abstol, &found, w.data(),
            eigenvector.data(), &n, isuppz.data(), &work_size, &query, &iwork_size, &query, &info, 1, 1, 1);
    if (info != 0) return false;
    const int lwork = std::max(static_cast<int>(work_size), 26 * n), liwork = std::max(iwork_size, 10 * n);
    std::vector<double> work(static_cast<std::size_t>(lwork));
    std::vector<int> iwork(static_cast<std::size_t>(liwork));
    dsyevr_(&jobz, &range, &uplo, &n, gram.data(), &n, &unused, &unused, &n, &n, &abstol, &found, w.data(),
            eigenvector.data(), &n, isuppz.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1, 1);
    if (info != 0 || found != 1) return false;
    eigenvalue = w[0];
    return true;
}

Matrix smaller_gram(const Matrix& x, bool features_side) {
    return features_side ? Matrix(x.transpose() * x) : Matrix(x * x.transpose());
}

// The same Gram matrix by BLAS dsyrk (half a general product's arithmetic), only the triangle top_eigenpair reads:
// LAPACK's lower triangle of the column-major buffer (the row-major upper one; the rest stays 0). x's row-major buffer
// is the column-major Xᵀ (cols × rows): XᵀX = Xᵀ (Xᵀ)ᵀ ('N'), XXᵀ = (Xᵀ)ᵀ Xᵀ ('T').
Matrix smaller_gram_for_lapack(const Matrix& x, bool features_side) {
    const int rows = static_cast<int>(x.rows()), cols = static_cast<int>(x.cols());
    const int n = features_side ? cols : rows, k = features_side ? rows : cols;
    const char uplo = 'L', trans = features_side ? 'N' : 'T';
    const double one = 1, zero = 0;
    Matrix gram = Matrix::Zero(n, n);
    dsyrk_(&uplo, &trans, &n, &k, &one, x.data(), &cols, &zero, gram.data(), &n, 1, 1);
    return gram;
}

}  // namespace

// σ1, u1, v1 from the smaller Gram matrix (d × d = XᵀX when d ≤ n, else n × n = XXᵀ), in double precision: its top
// eigenpair by LAPACK (only that pair is computed). The top eigenvector's error is ~ε_double · σ1² / (σ1² − σ2²), far
// below float32 round-off of the inputs.
TopSingular top_singular_triplet(const Matrix& x) {
    if (x.size() == 0) return TopSingular{};
    // The Gram matrix squares the entries: beyond 1e±100 they would overflow or lose precision to underflow, so such a
    // matrix is scaled to a largest entry of 1 first and σ1 scaled back (inside that range nothing changes, bit for bit).
    const double largest = x.cwiseAbs().maxCoeff();
    if (largest > 0 && std::isfinite(largest) && (largest < 1e-100 || largest > 1e100)) {
        TopSingular scaled = top_singular_triplet(x / largest);
        scaled.sigma *= largest;
        return scaled;
    }
    const bool features_side = x.cols() <= x.rows();
    double eigenvalue = 0;
    Vector eigenvector;
    if (!top_eigenpair(smaller_gram_for_lapack(x, features_side), eigenvalue, eigenvector))
        return top_singular_triplet_reference(x);
    return triplet_from_gram_eigenpair(x, features_side, eigenvalue, eigenvector);
}

// The reference: Eigen's full eigen-decomposition of the same Gram matrix (every eigenpair), the top one taken.
TopSingular top_singular_triplet_reference(const Matrix& x) {
    if (x.size() == 0) return TopSingular{};
    const bool features_side = x.cols() <= x.rows();
    const Matrix gram = smaller_gram(x, features_side);
    Eigen::SelfAdjointEigenSolver<Matrix> solver(gram);
    const Eigen::Index last = gram.rows() - 1;  // eigenvalues ascend
    return triplet_from_gram_eigenpair(x, features_side, solver.eigenvalues()(last), solver.eigenvectors().col(last));
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
    return (s / s(0)).squaredNorm();  // Σ(s_i/s_1)²: s² underflows for entries near 1e-300 (it read NaN)
}

int numerical_rank(const Vector& s, double relative_tolerance) {
    if (s.size() == 0) return 0;
    const double threshold = relative_tolerance * s(0);
    int rank = 0;
    for (Eigen::Index i = 0; i < s.size(); ++i) rank += s(i) > threshold ? 1 : 0;
    return rank;
}

double default_rank_tolerance(Eigen::Index rows, Eigen::Index cols, const Vector& singular_values, double stored_epsilon) {
    constexpr double kFloat32Epsilon = 0x1p-23;
    const double numpy = static_cast<double>(std::max(rows, cols)) * std::min(stored_epsilon, kFloat32Epsilon);
    if (stored_epsilon <= kFloat32Epsilon || singular_values.size() == 0 || !(singular_values(0) > 0)) return numpy;
    return std::max(numpy, stored_epsilon / 2 * singular_values.norm() / singular_values(0));
}

// Σ_{i≠j} ŷ_i·ŷ_j = |Σ ŷ_i|² − Σ |ŷ_i|² for unit rows ŷ, so the mean over pairs needs one pass.
double mean_pairwise_cosine(const Matrix& x) {
    RowVector sum = RowVector::Zero(x.cols());
    Eigen::Index kept = 0;
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
        const double length = x.row(i).stableNorm();  // (norm() underflows to 0 for entries near 1e-300)
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
    if ((m.array() < -std::min(tolerance, 1e-4)).any()) return false;  // rounding keeps a probability's sign
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
    out.spectral_gap = s(0) == 0 ? 0.0 : 1.0 - out.sigma2 / s(0);  // (a NaN stays NaN)
    return out;
}

}  // namespace rankscope
