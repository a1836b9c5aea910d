#pragma once
// Every measure of SPEC.md §2 for one matrix, as tidy records, and for a batch of matrices as `rankscope measure`
// computes them (its policy on the exact centre, its checks, its table).
//
//   MeasureArrayResult result = measure_array(read_npy("x.npy").view(), {}, "x.npy");   // [..., n, d], any dtype
//   write_csv_atomically(out / "measures.csv", measures_table(result).to_csv(), provenance);
#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/array.hpp"
#include "rankscope/interrupt.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/table.hpp"

namespace rankscope {

struct MeasureRecord {
    std::string measure;  // "norm", "residual", "relative_residual", "exact_below_mean", "singular_value", ...
    std::string norm;     // "" when the measure has no norm
    std::string center;   // "" when the measure has no centre
    int index = -1;       // position for vector measures (singular values), else -1
    double value = 0;
};

struct MeasureAllOptions {
    std::vector<Center> centers = all_centers();
    double rank_tolerance = -1;       // relative to σ1; < 0 = default_rank_tolerance (measures.hpp)
    double stored_epsilon = 0x1p-52;  // machine epsilon of the dtype the values were stored in (the default tolerance)
};

// Norms; residual and relative residual for each norm × centre; how far `exact` is below `mean` (1 − exact/mean);
// singular values, effective/stable/numerical rank, mean pairwise cosine; attention measures when X is square and
// row-stochastic.
std::vector<MeasureRecord> measure_all(const Matrix& x, const MeasureAllOptions& options);

// ---- a batch [..., n, d]: the `measure` command ---------------------------------------------------------------------
// Matrices above this many entries skip the LP-based `exact` centre unless the centres are named explicitly.
constexpr std::int64_t kExactDefaultLimit = kMaxExactCenterEntries;  // measures.hpp

struct MeasureArrayOptions {
    std::vector<Center> centers;   // empty = all (without `exact` above kExactDefaultLimit entries)
    double rank_tolerance = -1;    // relative to σ1; < 0 = default_rank_tolerance for the stored dtype
    double stored_epsilon = -1;    // <= 0: the array's dtype's; else the caller's (a bfloat16 tensor converted to float32)
    bool allow_nonfinite = false;  // a NaN/Inf result is an error unless set
};

struct MeasureArrayResult {
    std::vector<std::int64_t> shape;  // of the input
    DType dtype = DType::F64;         // of the input
    std::int64_t rows = 0, cols = 0;  // n, d of each matrix
    std::vector<std::vector<MeasureRecord>> matrices;  // one list per matrix, in row-major batch order
    bool exact_skipped = false;       // the default centres left `exact` out (matrices above kExactDefaultLimit)
};

// Splits `array` (rank >= 2, any dtype) into its n × d matrices and measures each (measure_all; float16/32 set the
// default rank tolerance to float32's). Throws Error naming `where`: rank < 2, an empty matrix, a NaN/Inf entry (with
// its flat index), a non-finite result (unless allowed). `interrupt` is polled between matrices.
MeasureArrayResult measure_array(const ArrayView& array, const MeasureArrayOptions& options, const std::string& where,
                                 const InterruptPoll& interrupt = {});

// measures.csv: matrix, measure, norm, center, index (empty for scalars), value.
Table measures_table(const MeasureArrayResult& result);

}  // namespace rankscope
