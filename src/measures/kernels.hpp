#pragma once
// Internal fused kernels shared by the measure implementations.
#include "rankscope/measures.hpp"

namespace rankscope::detail {

// ||·||_1, ||·||_inf and ||·||_F of X − 1cᵀ in one pass over X, without forming the residual.
struct SumNorms {
    double l1 = 0, linf = 0, frobenius = 0;
    double composite() const;
    double get(Norm norm) const;  // not for Norm::Spectral
};
SumNorms shifted_sum_norms(const Matrix& x, const RowVector& center);
SumNorms sum_norms(const Matrix& x);

// σ1, u1, v1 of X from the top eigenpair of the smaller Gram matrix (double precision): LAPACK dsyevr computing that
// pair only (the fast path), or Eigen's full eigen-decomposition (the reference, and the fallback should LAPACK fail).
// The sign of u, v is the solver's; σ1 u v1ᵀ is not affected by it.
struct TopSingular {
    double sigma = 0;
    Vector u, v;
};
TopSingular top_singular_triplet(const Matrix& x);
TopSingular top_singular_triplet_reference(const Matrix& x);

}  // namespace rankscope::detail

namespace rankscope::detail {

// Fast path for a contiguous row-major n × d item: the sum norms of X − 1cᵀ and of X itself in one pass
// (c = column mean when `center` is null). T is float or double; accumulation is in double.
template <typename T>
void fused_mean_residual_norms(const T* x, std::int64_t n, std::int64_t d, SumNorms& residual, SumNorms& whole);

}  // namespace rankscope::detail
