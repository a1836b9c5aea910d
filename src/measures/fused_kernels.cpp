// The hot loop of the paper's measure (composite relative residual, x = column mean) over raw memory.
// Naive reference: detail::shifted_sum_norms (Eigen, two matrices); tests/unit/test_fused_kernels.cpp compares them.
//
//   pass 1:  c_j = (1/n) Σ_i X_ij
//   pass 2:  r_ij = |X_ij − c_j|, a_ij = |X_ij|
//            residual: ||·||_1 = max_j Σ_i r_ij, ||·||_inf = max_i Σ_j r_ij, ||·||_F² = Σ r_ij²; same for a (whole X)
// Compiled for AVX2+FMA and for the baseline, picked at load time (GCC target_clones); the OpenMP simd pragma lets the
// row reductions vectorise without -ffast-math.
#include <algorithm>
#include <cmath>
#include <vector>

#include "measures/kernels.hpp"

namespace rankscope::detail {
namespace {

// max that keeps a NaN (std::max(0.0, NaN) is 0.0): a NaN or Inf anywhere in X makes the measure NaN, not a number
// that looks fine (E1 names non-finite hidden states by it).
inline double max_keeping_nan(double a, double b) { return b > a || b != b ? b : a; }

template <typename T>
__attribute__((target_clones("avx2", "default")))
void mean_residual_kernel(const T* __restrict x, std::int64_t n, std::int64_t d, double* __restrict center,
                          double* __restrict residual_columns, double* __restrict whole_columns, double* out) {
    for (std::int64_t j = 0; j < d; ++j) center[j] = residual_columns[j] = whole_columns[j] = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
        const T* row = x + i * d;
#pragma omp simd
        for (std::int64_t j = 0; j < d; ++j) center[j] += static_cast<double>(row[j]);
    }
    const double inverse = 1.0 / static_cast<double>(n);
#pragma omp simd
    for (std::int64_t j = 0; j < d; ++j) center[j] *= inverse;

    double residual_linf = 0, whole_linf = 0, residual_squares = 0, whole_squares = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const T* row = x + i * d;
        double residual_row = 0, whole_row = 0, residual_row_squares = 0, whole_row_squares = 0;
#pragma omp simd reduction(+ : residual_row, whole_row, residual_row_squares, whole_row_squares)
        for (std::int64_t j = 0; j < d; ++j) {
            const double value = static_cast<double>(row[j]);
            const double r = std::fabs(value - center[j]);
            const double a = std::fabs(value);
            residual_columns[j] += r;
            whole_columns[j] += a;
            residual_row += r;
            whole_row += a;
            residual_row_squares += r * r;
            whole_row_squares += a * a;
        }
        residual_linf = max_keeping_nan(residual_linf, residual_row);
        whole_linf = max_keeping_nan(whole_linf, whole_row);
        residual_squares += residual_row_squares;
        whole_squares += whole_row_squares;
    }
    double residual_l1 = 0, whole_l1 = 0;
    for (std::int64_t j = 0; j < d; ++j) {
        residual_l1 = max_keeping_nan(residual_l1, residual_columns[j]);
        whole_l1 = max_keeping_nan(whole_l1, whole_columns[j]);
    }
    out[0] = residual_l1;
    out[1] = residual_linf;
    out[2] = std::sqrt(residual_squares);
    out[3] = whole_l1;
    out[4] = whole_linf;
    out[5] = std::sqrt(whole_squares);
}

// ||X − 1 cᵀ||_F (center null: ||X||_F) with every entry divided by `scale` before it is squared: the plain sum of
// squares overflows for entries beyond 1e154 and underflows for entries below 1e-154 (1e160 read NaN, 1e-170 read 0).
template <typename T>
double scaled_frobenius(const T* x, std::int64_t n, std::int64_t d, const double* center, double scale) {
    double squares = 0;
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < d; ++j) {
            const double entry = (static_cast<double>(x[i * d + j]) - (center ? center[j] : 0.0)) / scale;
            squares += entry * entry;
        }
    return scale * std::sqrt(squares);
}

// Whether the plain sum of squares of a matrix whose largest row sum of |entries| is `linf` may have overflowed or
// underflowed: its largest entry lies in [linf / d, linf], so in [1e-140, 1e140] its square and any sum of up to 1e20
// squares are normal doubles. NaN and ±Inf stay as the fast pass left them.
bool frobenius_needs_scaling(double linf) { return std::isfinite(linf) && linf > 0 && (linf < 1e-140 || linf > 1e140); }

}  // namespace

template <typename T>
void fused_mean_residual_norms(const T* x, std::int64_t n, std::int64_t d, SumNorms& residual, SumNorms& whole) {
    thread_local std::vector<double> scratch;
    scratch.resize(static_cast<std::size_t>(3 * d));
    double out[6];
    const double* center = scratch.data();
    mean_residual_kernel(x, n, d, scratch.data(), scratch.data() + d, scratch.data() + 2 * d, out);
    if (frobenius_needs_scaling(out[1])) out[2] = scaled_frobenius(x, n, d, center, out[1]);
    if (frobenius_needs_scaling(out[4])) out[5] = scaled_frobenius<T>(x, n, d, nullptr, out[4]);
    residual = {out[0], out[1], out[2]};
    whole = {out[3], out[4], out[5]};
}

template void fused_mean_residual_norms<float>(const float*, std::int64_t, std::int64_t, SumNorms&, SumNorms&);
template void fused_mean_residual_norms<double>(const double*, std::int64_t, std::int64_t, SumNorms&, SumNorms&);

}  // namespace rankscope::detail
