// Attention rows on tensors (see attention_rows.hpp).
#include "rankscope/attention_rows.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace rankscope {

std::optional<NonAttentionRow> first_non_attention_row(const at::Tensor& p, double tolerance, const at::Tensor& real) {
    const at::Tensor values = p.to(at::kDouble);
    at::Tensor bad = ((values.sum(-1) - 1).abs() > tolerance) | (values < -std::min(tolerance, 1e-4)).any(-1) |
                     values.isnan().any(-1);
    if (real.defined()) bad = bad & real;
    if (!bad.any().item<bool>()) return std::nullopt;
    const at::Tensor first = bad.nonzero()[0].contiguous();
    NonAttentionRow row;
    row.index.assign(first.data_ptr<std::int64_t>(), first.data_ptr<std::int64_t>() + first.numel());
    const at::Tensor entries = values.index(std::vector<at::indexing::TensorIndex>(row.index.begin(), row.index.end()));
    row.sum = entries.sum().item<double>();
    row.smallest = entries.min().item<double>();
    return row;
}

std::string non_attention_row_detail(const NonAttentionRow& row, double tolerance) {
    return fmt::format("(sum {:.6g}, smallest entry {:.6g}; rows must be >= 0 and sum to 1 within {:g})", row.sum,
                       row.smallest, tolerance);
}

}  // namespace rankscope
