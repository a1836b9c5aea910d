#include "rankscope/summary.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "rankscope/error.hpp"

namespace rankscope {

Summary summarize(const std::vector<double>& values) {
    if (values.empty()) throw Error("nothing to summarise: no values");
    Summary s;
    s.n = static_cast<int>(values.size());
    for (double v : values) s.mean += v;
    s.mean /= static_cast<double>(s.n);
    double square = 0;
    for (double v : values) square += (v - s.mean) * (v - s.mean);
    // A spread needs two values: one value's sample std is undefined (NaN), not 0, which would read "no spread".
    s.std = s.n > 1 ? std::sqrt(square / static_cast<double>(s.n - 1)) : NAN;
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    s.min = *low, s.max = *high;
    return s;
}

double median(std::vector<double> values) {
    if (values.empty()) return NAN;
    // No order with a NaN (std::sort's result is undefined: [NaN, 0.3, 0.1] gave 0.1): the median is NaN.
    if (std::any_of(values.begin(), values.end(), [](double v) { return std::isnan(v); })) return NAN;
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

namespace {
// Ranks 1..n, ties sharing the mean of the ranks they span.
std::vector<double> ranks(const std::vector<double>& values) {
    std::vector<std::size_t> order(values.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    std::vector<double> rank(values.size());
    for (std::size_t start = 0; start < order.size();) {
        std::size_t end = start + 1;
        while (end < order.size() && values[order[end]] == values[order[start]]) ++end;
        const double shared = 0.5 * static_cast<double>(start + 1 + end);  // mean of ranks start+1 .. end
        for (std::size_t i = start; i < end; ++i) rank[order[i]] = shared;
        start = end;
    }
    return rank;
}
}  // namespace

double spearman_correlation(const std::vector<double>& x, const std::vector<double>& y) {
    if (x.size() != y.size()) throw Error("spearman_correlation: lists of different lengths");
    for (std::size_t i = 0; i < x.size(); ++i)
        if (std::isnan(x[i]) || std::isnan(y[i])) throw Error("spearman_correlation: NaN in the values");
    if (x.size() < 2) return NAN;
    const std::vector<double> rx = ranks(x), ry = ranks(y);
    const double n = static_cast<double>(x.size()), mean = (n + 1) / 2;
    double sxy = 0, sxx = 0, syy = 0;
    for (std::size_t i = 0; i < rx.size(); ++i) {
        sxy += (rx[i] - mean) * (ry[i] - mean);
        sxx += (rx[i] - mean) * (rx[i] - mean);
        syy += (ry[i] - mean) * (ry[i] - mean);
    }
    if (sxx == 0 || syy == 0) return NAN;
    return sxy / std::sqrt(sxx * syy);
}

double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y) {
    if (x.size() != y.size()) throw Error("least_squares_slope: lists of different lengths");
    if (x.size() < 2) return NAN;
    const double n = static_cast<double>(x.size());
    double mean_x = 0, mean_y = 0;
    for (std::size_t i = 0; i < x.size(); ++i) mean_x += x[i] / n, mean_y += y[i] / n;
    double sxy = 0, sxx = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        sxy += (x[i] - mean_x) * (y[i] - mean_y);
        sxx += (x[i] - mean_x) * (x[i] - mean_x);
    }
    return sxx > 0 ? sxy / sxx : NAN;
}

Summary summarize(const at::Tensor& values) {
    const at::Tensor flat = values.to(at::kCPU, at::kDouble).contiguous().view(-1);  // read back from a GPU
    return summarize(std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()));
}

double fisher_exact_greater(int a, int n_a, int b, int n_b) {
    if (a < 0 || b < 0 || a > n_a || b > n_b) throw Error("fisher_exact_greater: counts outside 0..n");
    // P(X = x) = C(n_a, x) C(n_b, k − x) / C(n_a + n_b, k), k = a + b, in logarithms (lgamma) to stay finite.
    const int k = a + b;
    auto log_choose = [](int n, int r) { return std::lgamma(n + 1.0) - std::lgamma(r + 1.0) - std::lgamma(n - r + 1.0); };
    double tail = 0;
    for (int x = a; x <= std::min(k, n_a); ++x)
        if (k - x <= n_b) tail += std::exp(log_choose(n_a, x) + log_choose(n_b, k - x) - log_choose(n_a + n_b, k));
    return std::min(1.0, tail);
}

}  // namespace rankscope
