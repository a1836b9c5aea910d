// The exact centre against brute force: it beats or ties mean and median on 200 random matrices, and neither a
// fine grid nor a random search around it finds anything lower.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <random>
#include <thread>

#include "measures/kernels.hpp"
#include "rankscope/measures.hpp"

using namespace rankscope;

namespace {
Matrix random_matrix(Eigen::Index n, Eigen::Index d, std::mt19937_64& generator) {
    std::normal_distribution<double> normal;
    std::exponential_distribution<double> heavy(1.0);
    Matrix m(n, d);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(generator) * (1 + heavy(generator));
    return m;
}
double objective(const Matrix& x, const RowVector& c, Norm norm) {
    return rankscope::detail::shifted_sum_norms(x, c).get(norm);
}
}  // namespace

TEST(ExactCenter, BeatsOrTiesMeanAndMedianOn200RandomMatrices) {
    std::mt19937_64 generator(2024);
    std::uniform_int_distribution<int> size(2, 9);
    for (int trial = 0; trial < 200; ++trial) {
        const Matrix x = random_matrix(size(generator), size(generator), generator);
        for (Norm norm : {Norm::L1, Norm::LInf, Norm::Composite, Norm::Frobenius}) {
            const ExactCenter best = exact_center(x, norm);
            EXPECT_NEAR(best.residual, objective(x, best.center, norm), 1e-12);
            const double tolerance = 1e-9 * (1 + best.residual);
            EXPECT_LE(best.residual, objective(x, column_mean(x), norm) + tolerance) << to_string(norm);
            EXPECT_LE(best.residual, objective(x, column_median(x), norm) + tolerance) << to_string(norm);
        }
    }
}

TEST(ExactCenter, NoLowerPointNearbyByRandomSearch) {
    std::mt19937_64 generator(7);
    for (int trial = 0; trial < 30; ++trial) {
        const Matrix x = random_matrix(6, 4, generator);
        for (Norm norm : {Norm::LInf, Norm::Composite}) {
            const ExactCenter best = exact_center(x, norm);
            for (double radius : {1.0, 0.1, 0.01, 1e-4}) {
                std::normal_distribution<double> step(0, radius);
                for (int probe = 0; probe < 400; ++probe) {
                    RowVector c = best.center;
                    for (Eigen::Index j = 0; j < c.size(); ++j) c(j) += step(generator);
                    ASSERT_GE(objective(x, c, norm), best.residual * (1 - 1e-9)) << to_string(norm);
                }
            }
        }
    }
}

TEST(ExactCenter, NoLowerPointOnAFineGrid) {
    // d = 2 so a dense grid covers the plane of centres around the data.
    std::mt19937_64 generator(99);
    for (int trial = 0; trial < 10; ++trial) {
        const Matrix x = random_matrix(5, 2, generator);
        const ExactCenter best = exact_center(x, Norm::Composite);
        const double lo0 = x.col(0).minCoeff(), hi0 = x.col(0).maxCoeff();
        const double lo1 = x.col(1).minCoeff(), hi1 = x.col(1).maxCoeff();
        double grid_best = INFINITY;
        for (int a = 0; a <= 300; ++a)
            for (int b = 0; b <= 300; ++b) {
                RowVector c(2);
                c << lo0 + (hi0 - lo0) * a / 300.0, lo1 + (hi1 - lo1) * b / 300.0;
                grid_best = std::min(grid_best, objective(x, c, Norm::Composite));
            }
        EXPECT_LE(best.residual, grid_best * (1 + 1e-9));
        // And the grid gets close to it (the optimum is inside the data's bounding box).
        EXPECT_LE(grid_best, best.residual * 1.02 + 1e-9);
    }
}

TEST(ExactCenter, LinfIsStrictlyBelowMeanOnAKnownCase) {
    // Rows (0,0), (0,0), (3,3): mean (1,1) gives row sums 2, 2, 4 → 4; x = (1.5,1.5) gives 3, 3, 3 → 3.
    Matrix x(3, 2);
    x << 0, 0, 0, 0, 3, 3;
    EXPECT_NEAR(exact_center(x, Norm::LInf).residual, 3.0, 1e-9);
    EXPECT_NEAR(residual_norm(x, Norm::LInf, Center::Mean), 4.0, 1e-12);
}

// `rankscope theory` solves exact centres from several threads at once: GLPK must be re-entrant (Debian builds it
// with thread-local state). Same answers in parallel as in series.
TEST(ExactCenter, ThreadSafeUnderParallelSolves) {
    std::mt19937_64 generator(5);
    std::vector<Matrix> matrices;
    for (int i = 0; i < 16; ++i) matrices.push_back(random_matrix(12, 10, generator));
    std::vector<double> serial(matrices.size()), parallel(matrices.size());
    for (std::size_t i = 0; i < matrices.size(); ++i) serial[i] = exact_center(matrices[i], Norm::Composite).residual;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (std::size_t i = static_cast<std::size_t>(t); i < matrices.size(); i += 4)
                parallel[i] = exact_center(matrices[i], Norm::Composite).residual;
        });
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(serial, parallel);
}

// A hidden state on which GLPK's primal simplex reports "no feasible solution" (theory --init-scale 1.5 stopped with
// "the linear program did not reach an optimum (GLPK status 4)"): solved, and nothing lower around it.
TEST(ExactCenter, SolvesWhereThePrimalSimplexGivesUp) {
    std::ifstream in(std::string(RANKSCOPE_FIXTURES_DIR) + "/exact_center/glpk_primal_reports_no_feasible_32x32.txt");
    ASSERT_TRUE(in.good());
    std::vector<std::vector<double>> rows;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream values(line);
        rows.emplace_back();
        for (double v; values >> v;) rows.back().push_back(v);
    }
    ASSERT_EQ(rows.size(), 32u);
    Matrix x(32, 32);
    for (int i = 0; i < 32; ++i)
        for (int j = 0; j < 32; ++j) x(i, j) = rows[i].at(j);
    std::mt19937_64 generator(11);
    for (Norm norm : {Norm::LInf, Norm::Composite}) {
        const ExactCenter best = exact_center(x, norm);
        EXPECT_NEAR(best.residual, objective(x, best.center, norm), 1e-12);
        EXPECT_LE(best.residual, objective(x, column_mean(x), norm) * (1 + 1e-9)) << to_string(norm);
        EXPECT_LE(best.residual, objective(x, column_median(x), norm) * (1 + 1e-9)) << to_string(norm);
        for (double radius : {0.1, 0.01, 1e-4}) {
            std::normal_distribution<double> step(0, radius);
            for (int probe = 0; probe < 200; ++probe) {
                RowVector c = best.center;
                for (Eigen::Index j = 0; j < c.size(); ++j) c(j) += step(generator);
                ASSERT_GE(objective(x, c, norm), best.residual * (1 - 1e-9)) << to_string(norm);
            }
        }
    }
}
