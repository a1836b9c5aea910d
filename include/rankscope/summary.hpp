#pragma once
// Mean ± sample standard deviation, min and max of a list of values (one per sample, draw or repeat): the summary
// every CSV row of rankscope that aggregates samples reports.
#include <algorithm>
#include <cmath>
#include <vector>

namespace at {
class Tensor;
}

namespace rankscope {

struct Summary {
    double mean = 0, std = 0, min = 0, max = 0;  // std with n − 1 (NaN for a single value)
    int n = 0;
};

// Throws rankscope::Error for an empty list.
Summary summarize(const std::vector<double>& values);
// The same over every element of a tensor (any shape and floating type).
Summary summarize(const at::Tensor& values);
// The larger of two values, NaN when either is (std::max(0, NaN) is 0: a NaN run's largest value read 0).
inline double max_or_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
// The middle value (mean of the two middle values for an even count); NaN for an empty list or one holding a NaN.
double median(std::vector<double> values);
// Spearman's rank correlation: Pearson's correlation of the ranks (tied values get the mean of their ranks). NaN when
// fewer than 2 pairs or when either list is constant. Throws rankscope::Error when the lists differ in length or hold NaN.
double spearman_correlation(const std::vector<double>& x, const std::vector<double>& y);
// The least-squares slope of y on x (with an intercept). NaN when fewer than 2 points or x is constant. Throws
// rankscope::Error when the lists differ in length.
double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y);
// One-sided Fisher exact test that a/n_a is above b/n_b: P(X ≥ a) for X hypergeometric (a + b successes drawn into
// groups of n_a and n_b), i.e. the chance of a split at least this lopsided when both groups share one rate. Throws
// rankscope::Error unless 0 ≤ a ≤ n_a and 0 ≤ b ≤ n_b.
double fisher_exact_greater(int a, int n_a, int b, int n_b);

// ---- how far a summary can be trusted (intervals.cpp; Boost.Math's Student t and binomial distributions) ----------
// A two-sided interval; `defined()` is false (NaN bounds) when the values cannot give one at the level asked.
struct Interval {
    double low = NAN, high = NAN;
    bool defined() const { return !std::isnan(low) && !std::isnan(high); }
};
// The `level` quantile of Student's t with `degrees_of_freedom` ≥ 1 (0 < level < 1).
double student_t_quantile(double level, int degrees_of_freedom);
// The Student-t interval of the mean of s.n values with sample standard deviation s.std:
// s.mean ± t_{(1+level)/2, n−1} · s.std / √n. Undefined for n < 2 (one value has no spread).
Interval mean_interval(const Summary& s, double level = 0.95);
// The distribution-free interval of the median of m values: the order statistics x_(j) ≤ x_(m+1−j) with the largest j
// whose coverage P(j ≤ B ≤ m − j), B ~ Binomial(m, 1/2), is at least `level`. Undefined when even [min, max] covers
// less (m ≤ 5 at 95%), or when a value is NaN.
Interval median_interval(std::vector<double> values, double level = 0.95);
// That coverage for order statistics j and m + 1 − j of m values (1 ≤ j ≤ (m + 1) / 2).
double median_interval_coverage(int m, int j);

}  // namespace rankscope
