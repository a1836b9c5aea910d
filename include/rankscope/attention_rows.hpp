#pragma once
// Which rows of stored attention are attention rows (>= 0, summing to 1), on tensors: the one check that
// `paths sample --patterns`, Python's sample_path_products and Python's attention_measures share. is_row_stochastic
// (measures.hpp) is the same rule on one Eigen matrix.
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rankscope {

struct NonAttentionRow {
    std::vector<std::int64_t> index;  // p's leading indices, then the row's
    double sum = 0;                   // the row's sum
    double smallest = 0;              // its smallest entry
};
// The first row, in index order, of p [..., n, n] (any float dtype, read as float64) that is not an attention row by
// is_row_stochastic's rule: an entry below −min(tolerance, 1e-4) (rounding keeps a probability's sign), a sum
// farther than `tolerance` from 1, or a NaN. With `real` (bool, p's shape less the last dimension), the rows where it
// is false (padding) are left out. nullopt when every row is an attention row.
std::optional<NonAttentionRow> first_non_attention_row(const at::Tensor& p, double tolerance,
                                                       const at::Tensor& real = {});
// What was wrong with it, for an error: "(sum 2, smallest entry 0.25; rows must be >= 0 and sum to 1 within 0.0001)".
std::string non_attention_row_detail(const NonAttentionRow& row, double tolerance);

}  // namespace rankscope
