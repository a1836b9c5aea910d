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
    s.std = s.n > 1 ? std::sqrt(square / static_cast<double>(s.n - 1)) : 0.0;
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    s.min = *low, s.max = *high;
    return s;
}

double median(std::vector<double> values) {
    if (values.empty()) return NAN;
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

Summary summarize(const at::Tensor& values) {
    const at::Tensor flat = values.to(at::kDouble).contiguous().view(-1);
    return summarize(std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()));
}

}  // namespace rankscope
