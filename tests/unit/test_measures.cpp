// Closed-form checks of the norms, centres, residuals and rank measures.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <Eigen/SVD>

#include "measures/kernels.hpp"
#include "rankscope/measures.hpp"

using namespace rankscope;

namespace {
Matrix random_matrix(Eigen::Index n, Eigen::Index d, std::uint64_t seed) {
    std::mt19937_64 generator(seed);
    std::normal_distribution<double> normal;
    Matrix m(n, d);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(generator);
    return m;
}
}  // namespace

TEST(Norms, InducedNormsByHand) {
    Matrix m(2, 3);
    m << 1, -2, 3,
        -4, 5, -6;
    EXPECT_DOUBLE_EQ(induced_l1_norm(m), 9.0);     // column sums 5, 7, 9
    EXPECT_DOUBLE_EQ(induced_linf_norm(m), 15.0);  // row sums 6, 15
    EXPECT_DOUBLE_EQ(composite_norm(m), std::sqrt(135.0));
    EXPECT_DOUBLE_EQ(frobenius_norm(m), std::sqrt(91.0));
    // Spectral: sqrt of the largest eigenvalue of m mᵀ = [[14, -32], [-32, 77]].
    const double trace = 91, det = 14 * 77 - 32 * 32;
    EXPECT_NEAR(spectral_norm(m), std::sqrt((trace + std::sqrt(trace * trace - 4 * det)) / 2), 1e-12);
}

TEST(Residual, RankOneMatrixHasZeroResidualForEveryCentre) {
    Matrix x = Matrix::Ones(7, 1) * random_matrix(1, 5, 3);  // identical rows
    for (Norm norm : all_norms())
        for (Center center : all_centers())
            EXPECT_NEAR(residual_norm(x, norm, center), 0.0, 1e-9 * frobenius_norm(x))
                << to_string(norm) << " " << to_string(center);
}

TEST(Residual, RankOneWithDistinctRowsIsZeroOnlyForRank1Centre) {
    Matrix x = random_matrix(6, 1, 4) * random_matrix(1, 4, 5);  // rank 1, rows differ by scale
    EXPECT_NEAR(residual_norm(x, Norm::Composite, Center::Rank1), 0.0, 1e-9);
    EXPECT_GT(residual_norm(x, Norm::Composite, Center::Mean), 1e-3);
}

// Two distinct rows a, b (n = 2): with x = mean the residual rows are ±(a − b)/2, so ||res||_1 = max_j |a_j − b_j|
// and ||res||_inf = Σ_j |a_j − b_j| / 2; for the exact centre any x on the segment works for ||·||_1 (= max|a−b|)
// and ||·||_inf is minimised at the midpoint, so the composite optimum equals the mean's.
TEST(Residual, TwoDistinctRowsKnownCompositeResidual) {
    Matrix x(2, 3);
    x << 1, 2, 3,
         3, -1, 4;
    const double l1 = 3.0, linf = (2 + 3 + 1) / 2.0;
    EXPECT_NEAR(residual_norm(x, Norm::L1, Center::Mean), l1, 1e-12);
    EXPECT_NEAR(residual_norm(x, Norm::LInf, Center::Mean), linf, 1e-12);
    EXPECT_NEAR(residual_norm(x, Norm::Composite, Center::Mean), std::sqrt(l1 * linf), 1e-12);
    EXPECT_NEAR(residual_norm(x, Norm::Composite, Center::Exact), std::sqrt(l1 * linf), 1e-9);
}

TEST(Residual, ThreeRowsWhereMedianBeatsMean) {
    // Column values {0, 0, 3}: mean 1 gives column sum 1 + 1 + 2 = 4; median 0 gives 3.
    Matrix x(3, 1);
    x << 0, 0, 3;
    EXPECT_NEAR(residual_norm(x, Norm::L1, Center::Mean), 4.0, 1e-12);
    EXPECT_NEAR(residual_norm(x, Norm::L1, Center::Median), 3.0, 1e-12);
    EXPECT_NEAR(residual_norm(x, Norm::L1, Center::Exact), 3.0, 1e-12);
    EXPECT_NEAR(relative_residual(x, Norm::L1, Center::Median), 1.0, 1e-12);
}

TEST(Residual, RelativeResidualOfZeroMatrixIsZero) {
    EXPECT_EQ(relative_residual(Matrix::Zero(4, 3), Norm::Composite, Center::Mean), 0.0);
}

TEST(Residual, RelativeResidualOfANonFiniteMatrixIsNaN) {
    // `norm > 0 ? residual / norm : 0` read the NaN norm of an overflowing network's state as 0: a collapsed-looking
    // number where there is none.
    Matrix x = random_matrix(4, 3, 5);
    x(1, 2) = NAN;
    EXPECT_TRUE(std::isnan(induced_l1_norm(x)));  // the largest column sum and row sum (they were finite)
    EXPECT_TRUE(std::isnan(induced_linf_norm(x)));
    for (Norm norm : {Norm::Composite, Norm::Frobenius, Norm::Spectral})
        for (Center center : {Center::Mean, Center::Rank1})
            EXPECT_TRUE(std::isnan(relative_residual(x, norm, center))) << to_string(norm) << " " << to_string(center);
    EXPECT_EQ(ratio_or_zero(0, 0), 0.0);
    EXPECT_EQ(ratio_or_zero(1, 4), 0.25);
    EXPECT_TRUE(std::isnan(ratio_or_zero(1, NAN)));
    EXPECT_TRUE(std::isnan(ratio_or_zero(NAN, 2)));
}

TEST(Residual, MeanIsExactForFrobeniusAndSpectral) {
    const Matrix x = random_matrix(9, 5, 11);
    const RowVector mean = column_mean(x);
    std::mt19937_64 generator(12);
    std::normal_distribution<double> normal(0, 0.1);
    for (int trial = 0; trial < 50; ++trial) {
        RowVector shifted = mean;
        for (Eigen::Index j = 0; j < shifted.size(); ++j) shifted(j) += normal(generator);
        EXPECT_LE(residual_norm(x, Norm::Frobenius, Center::Mean), frobenius_norm(x.rowwise() - shifted) + 1e-12);
        EXPECT_LE(residual_norm(x, Norm::Spectral, Center::Mean), spectral_norm(x.rowwise() - shifted) + 1e-12);
    }
}

TEST(Residual, Rank1ResidualMatchesEckartYoung) {
    const Matrix x = random_matrix(10, 6, 13);
    const Vector s = singular_values(x);
    // Frobenius distance to the best rank-1 matrix = sqrt(Σ_{i≥2} s_i²); spectral = s_2.
    EXPECT_NEAR(residual_norm(x, Norm::Frobenius, Center::Rank1), std::sqrt(s.squaredNorm() - s(0) * s(0)), 1e-10);
    EXPECT_NEAR(residual_norm(x, Norm::Spectral, Center::Rank1), s(1), 1e-10);
}

TEST(RankMeasures, ClosedForms) {
    Vector s(4);
    s << 4, 2, 1, 1;
    const double p[] = {0.5, 0.25, 0.125, 0.125};
    double entropy = 0;
    for (double q : p) entropy -= q * std::log(q);
    EXPECT_NEAR(effective_rank(s), std::exp(entropy), 1e-12);
    EXPECT_NEAR(stable_rank(s), (16 + 4 + 1 + 1) / 16.0, 1e-12);
    EXPECT_EQ(numerical_rank(s, 0.3), 2);
    Vector flat = Vector::Ones(5);
    EXPECT_NEAR(effective_rank(flat), 5.0, 1e-12);
}

// The same matrix at 1e-300 and 1e300: the scale-free measures are those of the matrix at 1, the norms scale with it
// (ℓ1·ℓ∞ overflowed to +Inf, s² and |row|² underflowed to 0, and measure refused the file).
TEST(RankMeasures, EveryMeasureHoldsAtTheEdgesOfTheDoubleRange) {
    const Matrix x = random_matrix(6, 2, 31) * random_matrix(2, 5, 32);
    for (const double scale : {1e-300, 1e300}) {
        SCOPED_TRACE(scale);
        const Matrix scaled = x * scale;
        for (Norm norm : {Norm::L1, Norm::LInf, Norm::Composite, Norm::Frobenius, Norm::Spectral}) {
            EXPECT_NEAR(matrix_norm(scaled, norm) / scale, matrix_norm(x, norm), 1e-12 * matrix_norm(x, norm));
            for (Center center : {Center::Mean, Center::Median, Center::Exact, Center::Rank1})
                EXPECT_NEAR(relative_residual(scaled, norm, center), relative_residual(x, norm, center), 1e-12);
        }
        EXPECT_NEAR(frobenius_norm(scaled) / scale, frobenius_norm(x), 1e-12 * frobenius_norm(x));
        EXPECT_NEAR(stable_rank(singular_values(scaled)), stable_rank(singular_values(x)), 1e-12);
        EXPECT_NEAR(effective_rank(singular_values(scaled)), effective_rank(singular_values(x)), 1e-12);
        EXPECT_NEAR(mean_pairwise_cosine(scaled), mean_pairwise_cosine(x), 1e-12);
    }
    // Zero stays zero, and a NaN anywhere stays NaN (the scaling must not turn it into a norm of 0).
    EXPECT_EQ(frobenius_norm(Matrix::Zero(3, 2)), 0.0);
    Matrix with_nan = Matrix::Zero(3, 2);
    with_nan(1, 0) = NAN;
    EXPECT_TRUE(std::isnan(frobenius_norm(with_nan)));
    EXPECT_TRUE(std::isnan(matrix_norm(with_nan, Norm::Frobenius)));
    with_nan(2, 1) = 5;
    EXPECT_TRUE(std::isnan(frobenius_norm(with_nan)));
}

TEST(RankMeasures, NumericalRankOfLowRankProduct) {
    const Matrix x = random_matrix(20, 3, 1) * random_matrix(3, 12, 2);
    const Vector s = singular_values(x);
    EXPECT_EQ(numerical_rank(s, default_rank_tolerance(20, 12, s, 0x1p-52)), 3);
}

TEST(RankMeasures, MeanPairwiseCosineByBruteForce) {
    Matrix x = random_matrix(7, 4, 21);
    x.row(3).setZero();  // left out
    double sum = 0;
    int pairs = 0;
    for (int i = 0; i < 7; ++i)
        for (int j = i + 1; j < 7; ++j) {
            if (i == 3 || j == 3) continue;
            sum += x.row(i).dot(x.row(j)) / (x.row(i).norm() * x.row(j).norm());
            ++pairs;
        }
    EXPECT_NEAR(mean_pairwise_cosine(x), sum / pairs, 1e-12);
    EXPECT_NEAR(mean_pairwise_cosine(Matrix::Ones(3, 2)), 1.0, 1e-12);
}

TEST(Attention, UniformAndOneHotAttention) {
    const int n = 6;
    const Matrix uniform = Matrix::Constant(n, n, 1.0 / n);
    ASSERT_TRUE(is_row_stochastic(uniform));
    const auto u = attention_measures(uniform);
    EXPECT_NEAR(u.mean_row_entropy, std::log(n), 1e-12);
    EXPECT_NEAR(u.first_token_share, 1.0 / n, 1e-12);
    EXPECT_NEAR(u.sigma2, 0.0, 1e-12);
    EXPECT_NEAR(u.spectral_gap, 1.0, 1e-12);
    const Matrix identity = Matrix::Identity(n, n);
    const auto i = attention_measures(identity);
    EXPECT_NEAR(i.mean_row_entropy, 0.0, 1e-12);
    EXPECT_NEAR(i.sigma2, 1.0, 1e-12);
    EXPECT_NEAR(i.spectral_gap, 0.0, 1e-12);
    Matrix sink = Matrix::Zero(n, n);
    sink.col(0).setOnes();
    EXPECT_NEAR(attention_measures(sink).first_token_share, 1.0, 1e-12);
    EXPECT_FALSE(is_row_stochastic(random_matrix(n, n, 1)));
}

TEST(Names, RoundTripAndRejectUnknown) {
    for (Norm norm : all_norms()) EXPECT_EQ(parse_norm(to_string(norm)), norm);
    for (Center center : all_centers()) EXPECT_EQ(parse_center(to_string(center)), center);
    EXPECT_THROW(parse_norm("l2"), std::exception);
    EXPECT_THROW(parse_center("mode"), std::exception);
}

// The top singular triplet's fast path (LAPACK dsyevr, the top eigenpair only) against its reference (Eigen's full
// eigen-decomposition of the same Gram matrix) and against an SVD: both Gram sides, square, single rows and columns,
// exactly rank 1, zero, a repeated top singular value (where the vectors are not unique: only σ1 and the residual's
// norm are compared), and attention-product-like stochastic matrices close to rank 1.
TEST(TopSingularTriplet, LapackTopPairEqualsTheFullEigenSolve) {
    std::mt19937_64 rng(11);
    std::normal_distribution<double> normal;
    auto random = [&](Eigen::Index rows, Eigen::Index cols) {
        Matrix m(rows, cols);
        for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
        return m;
    };
    std::vector<Matrix> cases = {random(128, 64), random(64, 128), random(40, 40), random(1, 7), random(9, 1),
                                 random(128, 1) * random(1, 128), Matrix::Zero(5, 3)};
    Matrix repeated = Matrix::Zero(6, 4);
    repeated(0, 0) = repeated(1, 1) = 3.0, repeated(2, 2) = 1.0;
    cases.push_back(repeated);
    for (int k = 1; k <= 12; k += 11) {  // products of k row-stochastic 128 × 128 matrices
        Matrix product = Matrix::Identity(128, 128);
        for (int j = 0; j < k; ++j) {
            Matrix a = random(128, 128).array().exp().matrix();
            for (Eigen::Index i = 0; i < a.rows(); ++i) a.row(i) /= a.row(i).sum();
            product = a * product;
        }
        cases.push_back(product);
    }
    for (std::size_t c = 0; c < cases.size(); ++c) {
        SCOPED_TRACE("case " + std::to_string(c));
        const Matrix& x = cases[c];
        const auto fast = rankscope::detail::top_singular_triplet(x);
        const auto reference = rankscope::detail::top_singular_triplet_reference(x);
        const Vector s = Eigen::JacobiSVD<Matrix>(x).singularValues();
        const double scale = std::max(1.0, s.size() ? s(0) : 0.0);
        EXPECT_NEAR(fast.sigma, reference.sigma, 1e-12 * scale);
        EXPECT_NEAR(fast.sigma, s.size() ? s(0) : 0.0, 1e-10 * scale);
        const Matrix fast_rest = x - fast.sigma * fast.u * fast.v.transpose();
        const Matrix reference_rest = x - reference.sigma * reference.u * reference.v.transpose();
        EXPECT_NEAR(fast_rest.norm(), reference_rest.norm(), 1e-10 * scale);
        if (c != 7) {  // a unique top pair: the same rank-1 approximation
            EXPECT_LE((fast_rest - reference_rest).cwiseAbs().maxCoeff(), 1e-10 * scale);
        }
        if (fast.sigma > 0) {
            EXPECT_NEAR(fast.v.norm(), 1.0, 1e-12);
        }
    }
}
