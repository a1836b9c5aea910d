// Batched measures over torch tensors [..., n, d]: each n × d item runs the single-matrix kernel, in parallel over the
// batch on ATen's intra-op thread pool.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <type_traits>

#include "measures/kernels.hpp"
#include "rankscope/error.hpp"

namespace rankscope {
namespace {

// Runs item_function(data, n, d) -> double on every contiguous n × d item of x [..., n, d], where data is a
// const float* or const double* (item_function is generic), in parallel over the batch; returns [...] float64.
template <typename ItemFunction>
at::Tensor for_each_item(const at::Tensor& x, ItemFunction item_function) {
    if (x.dim() < 2) throw Error("a batched measure needs a tensor of rank >= 2, got rank " + std::to_string(x.dim()));
    if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kDouble)
        throw Error("a batched measure needs float32 or float64 data");
    const auto n = x.size(-2), d = x.size(-1);
    const at::Tensor items = (x.is_cpu() ? x : x.to(at::kCPU)).reshape({-1, n, d}).contiguous();
    const std::int64_t batch = items.size(0);
    at::Tensor out = at::empty({batch}, at::TensorOptions().dtype(at::kDouble));
    double* result = out.data_ptr<double>();
    const bool single = items.scalar_type() == at::kFloat;
    at::parallel_for(0, batch, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b)
            result[b] = single ? item_function(items.data_ptr<float>() + b * n * d, n, d)
                               : item_function(items.data_ptr<double>() + b * n * d, n, d);
    });
    std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end() - 2);
    return out.reshape(shape);
}

// item_function(const Matrix&) on a double copy of each item (the single-matrix reference kernels).
template <typename ItemFunction>
at::Tensor map_items(const at::Tensor& x, ItemFunction item_function) {
    return for_each_item(x, [&](const auto* data, std::int64_t n, std::int64_t d) {
        using T = std::remove_const_t<std::remove_pointer_t<decltype(data)>>;
        thread_local Matrix item;
        item = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(data, n, d)
                   .template cast<double>();
        return item_function(item);
    });
}

// The paper's measure on raw memory: one fused pass per item (detail::fused_mean_residual_norms), no copies.
at::Tensor batched_mean_relative_residual(const at::Tensor& x, Norm norm) {
    return for_each_item(x, [&](const auto* data, std::int64_t n, std::int64_t d) {
        detail::SumNorms residual, whole;
        detail::fused_mean_residual_norms(data, n, d, residual, whole);
        const double denominator = whole.get(norm);
        return denominator == 0 ? 0.0 : residual.get(norm) / denominator;  // a NaN denominator keeps the NaN
    });
}

}  // namespace

Matrix to_matrix(const at::Tensor& x2d) {
    if (x2d.dim() != 2) throw Error("to_matrix needs a 2-d tensor, got rank " + std::to_string(x2d.dim()));
    const at::Tensor values = x2d.to(at::kDouble).contiguous();
    return Eigen::Map<const Matrix>(values.data_ptr<double>(), values.size(0), values.size(1));
}

at::Tensor batched_residual_norm(const at::Tensor& x, Norm norm, Center center) {
    return map_items(x, [&](const Matrix& item) { return residual_norm(item, norm, center); });
}

at::Tensor batched_relative_residual(const at::Tensor& x, Norm norm, Center center) {
    if (norm != Norm::Spectral && center == Center::Mean)
        return x.is_cpu() ? batched_mean_relative_residual(x, norm) : batched_mean_relative_residual_on_device(x, norm);
    return map_items(x, [&](const Matrix& item) { return relative_residual(item, norm, center); });
}

at::Tensor batched_mean_relative_residual_on_device(const at::Tensor& x, Norm norm) {
    if (x.dim() < 2) throw Error("a batched measure needs a tensor of rank >= 2, got rank " + std::to_string(x.dim()));
    if (norm == Norm::Spectral) throw Error("internal: the spectral norm is not a sum norm");
    // ‖M‖_1 = max_j Σ_i |M_ij|, ‖M‖_∞ = max_i Σ_j |M_ij|, composite √(‖M‖_1 ‖M‖_∞), ‖M‖_F = √(Σ M_ij²); amax keeps NaN.
    auto sum_norm = [norm](const at::Tensor& m) {
        if (norm == Norm::Frobenius) {
            // Scaled by the largest entry before squaring, as the fused kernel and shifted_sum_norms (entries beyond
            // 1e154 overflowed the squares, below 1e-154 underflowed them); an all-zero matrix keeps its 0.
            const at::Tensor largest = m.abs().amax({-2, -1}, /*keepdim=*/true);
            const at::Tensor scale = at::where(largest > 0, largest, at::ones_like(largest));
            return (m / scale).square().sum({-2, -1}).sqrt() * scale.squeeze(-1).squeeze(-1);
        }
        const at::Tensor magnitude = m.abs();
        if (norm == Norm::L1) return magnitude.sum(-2).amax(-1);
        if (norm == Norm::LInf) return magnitude.sum(-1).amax(-1);
        return magnitude.sum(-2).amax(-1).sqrt() * magnitude.sum(-1).amax(-1).sqrt();  // (as SumNorms::composite)
    };
    const at::Tensor values = x.to(at::kDouble);
    const at::Tensor whole = sum_norm(values);
    const at::Tensor residual = sum_norm(values - values.mean(-2, /*keepdim=*/true));
    // whole == 0 only for X = 0 (then the residual is 0 too); a NaN whole fails the test and keeps the NaN.
    return at::where(whole == 0, at::zeros_like(whole), residual / whole);
}

at::Tensor batched_matrix_norm(const at::Tensor& x, Norm norm) {
    return map_items(x, [&](const Matrix& item) { return matrix_norm(item, norm); });
}

at::Tensor batched_mean_pairwise_cosine(const at::Tensor& x) {
    return map_items(x, [](const Matrix& item) { return mean_pairwise_cosine(item); });
}

}  // namespace rankscope
