#pragma once
// Mean ± sample standard deviation, min and max of a list of values (one per sample, draw or repeat): the summary
// every CSV row of rankscope that aggregates samples reports.
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
// The middle value (mean of the two middle values for an even count); NaN for an empty list.
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

}  // namespace rankscope
