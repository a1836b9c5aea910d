// Intervals that say how far a mean or a median of a few samples can be trusted (summary.hpp), with Boost.Math's
// distributions: the verdicts of E1/E2 are judged on the whole interval, not on the point value alone.
#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "rankscope/error.hpp"
#include "rankscope/summary.hpp"

namespace rankscope {

double student_t_quantile(double level, int degrees_of_freedom) {
    if (!(level > 0 && level < 1)) throw Error("student_t_quantile: level outside (0, 1)");
    if (degrees_of_freedom < 1) throw Error("student_t_quantile: needs at least 1 degree of freedom");
    return boost::math::quantile(boost::math::students_t(static_cast<double>(degrees_of_freedom)), level);
}

Interval mean_interval(const Summary& s, double level) {
    if (s.n < 2 || std::isnan(s.std) || std::isnan(s.mean)) return {};
    const double half = student_t_quantile(0.5 + level / 2, s.n - 1) * s.std / std::sqrt(static_cast<double>(s.n));
    return {s.mean - half, s.mean + half};
}

double median_interval_coverage(int m, int j) {
    if (m < 1 || j < 1 || 2 * j > m + 1) throw Error("median_interval_coverage: needs 1 ≤ j ≤ (m + 1) / 2");
    // P(B ≤ j − 1) in each tail; the two tails are equal for p = 1/2.
    const double tail = boost::math::cdf(boost::math::binomial(static_cast<double>(m), 0.5), static_cast<double>(j - 1));
    return std::max(0.0, 1 - 2 * tail);
}

Interval median_interval(std::vector<double> values, double level) {
    const int m = static_cast<int>(values.size());
    if (m < 1) return {};
    for (double v : values)
        if (std::isnan(v)) return {};  // no order: undefined, as a mean's interval of NaN is (a verdict not comparable)
    // The largest j (the narrowest interval) that still covers `level`: coverage falls as j grows, so bisect.
    if (median_interval_coverage(m, 1) < level) return {};
    int best = 1, above = (m + 1) / 2 + 1;  // coverage(best) ≥ level; `above` is past the last j or fails
    while (above - best > 1) {
        const int j = best + (above - best) / 2;
        (median_interval_coverage(m, j) >= level ? best : above) = j;
    }
    std::sort(values.begin(), values.end());
    return {values[static_cast<std::size_t>(best - 1)], values[static_cast<std::size_t>(m - best)]};
}

}  // namespace rankscope
