// The intervals the E1/E2 verdicts are judged on (summary.hpp, intervals.cpp), against independent references: printed
// tables of Student's t quantiles and a brute-force count over every sign pattern of m draws for the median's
// order-statistic interval.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "rankscope/error.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/summary.hpp"

namespace rankscope {
namespace {

// Two-sided 95% (0.975) and one-sided 95% (0.95) quantiles, as printed in standard t tables (10 digits).
TEST(Intervals, StudentTQuantilesMatchTheTables) {
    EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062047362, 1e-9);
    EXPECT_NEAR(student_t_quantile(0.975, 3), 3.1824463053, 1e-9);
    EXPECT_NEAR(student_t_quantile(0.975, 7), 2.3646242516, 1e-9);
    EXPECT_NEAR(student_t_quantile(0.975, 31), 2.0395134464, 1e-9);
    EXPECT_NEAR(student_t_quantile(0.95, 10), 1.8124611228, 1e-9);
    EXPECT_NEAR(student_t_quantile(0.975, 100000), 1.9599877, 1e-6);  // → the normal's 1.959964 as df grows
    EXPECT_THROW(student_t_quantile(0.975, 0), Error);
    EXPECT_THROW(student_t_quantile(1.0, 3), Error);
    EXPECT_THROW(student_t_quantile(std::nan(""), 3), Error);
}

// mean ± t · s/√n: 4 values of std 2 give ± 3.1824463 (t_{0.975,3} · 2/2); one value gives none.
TEST(Intervals, MeanIntervalIsStudents) {
    Summary s;
    s.mean = 1, s.std = 2, s.n = 4;
    const Interval i = mean_interval(s);
    ASSERT_TRUE(i.defined());
    EXPECT_NEAR(i.low, 1 - 3.1824463053, 1e-9);
    EXPECT_NEAR(i.high, 1 + 3.1824463053, 1e-9);
    // Computed from values: 2, 4, 9 (mean 5, std √13), t_{0.975,2} = 4.3026527297.
    const Interval from_values = mean_interval(summarize({2, 4, 9}));
    EXPECT_NEAR(from_values.high - 5, 4.3026527297 * std::sqrt(13.0) / std::sqrt(3.0), 1e-8);
    EXPECT_FALSE(mean_interval(summarize({0.25})).defined());
    s.std = 0;  // identical samples: the interval is the point
    EXPECT_EQ(mean_interval(s).low, 1);
    EXPECT_EQ(mean_interval(s).high, 1);
}

// P(j ≤ B ≤ m − j), B ~ Binomial(m, 1/2), counted over all 2^m equally likely patterns of "draw below the median".
double brute_force_coverage(int m, int j) {
    long covered = 0;
    for (long pattern = 0; pattern < (1L << m); ++pattern) {
        const int below = __builtin_popcountl(static_cast<unsigned long>(pattern));
        covered += below >= j && below <= m - j;
    }
    return static_cast<double>(covered) / static_cast<double>(1L << m);
}

TEST(Intervals, MedianCoverageIsTheBinomialCount) {
    for (int m = 1; m <= 16; ++m)
        for (int j = 1; 2 * j <= m + 1; ++j)
            EXPECT_NEAR(median_interval_coverage(m, j), brute_force_coverage(m, j), 1e-12) << "m " << m << " j " << j;
    EXPECT_THROW(median_interval_coverage(5, 0), Error);
    EXPECT_THROW(median_interval_coverage(5, 4), Error);
}

// The narrowest pair of order statistics that still covers 95%, checked against the brute-force coverage of the pair
// chosen and of the next narrower one.
TEST(Intervals, MedianIntervalIsTheNarrowestCoveringPair) {
    std::mt19937_64 generator(7);
    std::uniform_real_distribution<double> uniform(0, 1);
    for (int m = 6; m <= 16; ++m) {
        std::vector<double> values(static_cast<std::size_t>(m));
        for (double& v : values) v = uniform(generator);
        std::vector<double> sorted = values;
        std::sort(sorted.begin(), sorted.end());
        const Interval i = median_interval(values);
        ASSERT_TRUE(i.defined()) << m;
        const int j = static_cast<int>(std::find(sorted.begin(), sorted.end(), i.low) - sorted.begin()) + 1;
        EXPECT_EQ(i.high, sorted[static_cast<std::size_t>(m - j)]) << m;
        EXPECT_GE(brute_force_coverage(m, j), 0.95) << m;
        if (2 * (j + 1) <= m + 1) {
            EXPECT_LT(brute_force_coverage(m, j + 1), 0.95) << m;
        }
    }
    // 20 draws: x_(6) and x_(15) (coverage 0.9586; x_(7), x_(14): 0.8847).
    std::vector<double> twenty;
    for (int v = 20; v >= 1; --v) twenty.push_back(v);
    EXPECT_EQ(median_interval(twenty).low, 6);
    EXPECT_EQ(median_interval(twenty).high, 15);
    // 5 draws: even [min, max] covers 1 − 2/32 = 0.9375 < 0.95; 6 draws: [min, max] covers 0.96875.
    EXPECT_FALSE(median_interval({1, 2, 3, 4, 5}).defined());
    EXPECT_EQ(median_interval({6, 1, 5, 2, 4, 3}).low, 1);
    EXPECT_EQ(median_interval({6, 1, 5, 2, 4, 3}).high, 6);
    EXPECT_FALSE(median_interval({}).defined());
    EXPECT_FALSE(median_interval({1, std::nan(""), 3, 4, 5, 6}).defined());  // no order, no interval (no throw)
}

// Reproduced over the whole interval, not reproduced nowhere in it, otherwise (straddling or undefined) not
// comparable; and never judged where the settings cannot show the claim.
TEST(Intervals, JudgeOnAnInterval) {
    EXPECT_EQ(judge_interval(true, true, false), Verdict::Reproduced);
    EXPECT_EQ(judge_interval(true, false, true), Verdict::NotReproduced);
    EXPECT_EQ(judge_interval(true, false, false), Verdict::NotComparable);
    EXPECT_EQ(judge_interval(false, true, false), Verdict::NotComparable);
    const Interval undefined;
    EXPECT_EQ(judge_interval(true, undefined.high <= 0.05, undefined.low > 0.05), Verdict::NotComparable);
    EXPECT_EQ(quote_with_interval(0.0123, {0.011, 0.0136}, 8), "0.0123 (95% interval 0.0110–0.0136)");
    EXPECT_EQ(quote_with_interval(0.0123, undefined, 1), "0.0123 (1 value: no interval)");
    EXPECT_EQ(quote_with_interval(0.0123, undefined, 5), "0.0123 (5 values: no interval)");
}

}  // namespace
}  // namespace rankscope
