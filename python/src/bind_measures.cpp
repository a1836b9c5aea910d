// The measures of SPEC.md §2 on numpy arrays [..., n, d], batched over the leading dimensions, and the `measure`
// command's full table.
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "bindings.hpp"
#include "rankscope/attention_rows.hpp"
#include "rankscope/error.hpp"
#include "rankscope/measure_all.hpp"
#include "rankscope/measures.hpp"

namespace rankscope::python {
namespace {

using namespace pybind11::literals;

// The batch as a tensor over the array's memory, after the checks the command line makes: rank >= 2, no empty matrix,
// every entry finite (errors name `what`, e.g. "x").
at::Tensor checked_batch(const py::array& array, const std::string& what) {
    const at::Tensor x = tensor_view(array, what);
    if (x.dim() < 2) throw Error("need a matrix (rank >= 2), got an array of rank " + std::to_string(x.dim()), what);
    if (x.size(-2) == 0 || x.size(-1) == 0)
        throw Error(fmt::format("empty matrix ({} x {})", x.size(-2), x.size(-1)), what);
    if (x.numel() == 0) throw Error("empty batch (a leading dimension is 0)", what);
    if (at::isFloatingType(x.scalar_type())) {
        const at::Tensor finite = at::isfinite(x).reshape({-1});
        if (!finite.all().item<bool>()) {
            const std::int64_t index = finite.logical_not().nonzero()[0][0].item<std::int64_t>();
            const double value = x.reshape({-1})[index].item<double>();
            throw Error(fmt::format("{} at {}", std::isnan(value) ? "NaN" : "Inf",
                                    entry_position_text(std::vector<std::int64_t>(x.sizes().begin(), x.sizes().end()), index)),
                        what);
        }
    }
    return x;
}

// float32 and float64 reach the kernels as they are (no copy when contiguous); other dtypes become float64.
at::Tensor floating(const at::Tensor& x) {
    return x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble ? x : x.to(at::kDouble);
}

// fn(const Matrix& item, double* out) on every n × d item of x [..., n, d], in parallel over the batch with the GIL
// released, Ctrl-C polled between items; returns [..., item_shape...] float64.
template <typename ItemFunction>
at::Tensor per_item(const at::Tensor& x, const std::vector<std::int64_t>& item_shape, ItemFunction fn) {
    const std::int64_t n = x.size(-2), d = x.size(-1);
    std::int64_t outputs = 1;
    for (auto e : item_shape) outputs *= e;
    std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end() - 2);
    at::Tensor out;
    {
        py::gil_scoped_release release;
        const at::Tensor items = x.reshape({-1, n, d}).to(at::kDouble).contiguous();
        const std::int64_t batch = items.size(0);
        out = at::empty({batch, outputs}, at::TensorOptions().dtype(at::kDouble));
        const double* input = items.data_ptr<double>();
        double* result = out.data_ptr<double>();
        const InterruptPoll interrupt = python_interrupt();
        at::parallel_for(0, batch, 1, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t b = begin; b < end; ++b) {
                interrupt.poll();
                const Matrix item = Eigen::Map<const Matrix>(input + b * n * d, n, d);
                fn(item, result + b * outputs);
            }
        });
    }
    shape.insert(shape.end(), item_shape.begin(), item_shape.end());
    return out.reshape(shape);
}

// fn on x [..., n, d] → [...], a chunk of matrices at a time with the GIL released and Ctrl-C polled between chunks:
// about 2^20 entries per chunk, one matrix per chunk for the exact centre (an LP per matrix: seconds each at 128 × 64).
template <typename BatchedFunction>
py::array library_batched(const py::array& array, BatchedFunction fn, bool one_matrix_at_a_time = false) {
    const at::Tensor x = floating(checked_batch(array, "x"));
    std::vector<std::int64_t> batch_shape(x.sizes().begin(), x.sizes().end() - 2);
    at::Tensor result;
    {
        py::gil_scoped_release release;
        const at::Tensor items = x.reshape({-1, x.size(-2), x.size(-1)});
        const std::int64_t count = items.size(0), entries = std::max<std::int64_t>(1, x.size(-2) * x.size(-1));
        const std::int64_t chunk = one_matrix_at_a_time ? 1 : std::max<std::int64_t>(1, (std::int64_t{1} << 20) / entries);
        const InterruptPoll interrupt = python_interrupt();
        std::vector<at::Tensor> parts;
        for (std::int64_t begin = 0; begin < count; begin += chunk) {
            interrupt.poll();
            parts.push_back(fn(items.narrow(0, begin, std::min(chunk, count - begin))));
        }
        result = parts.empty() ? fn(items) : parts.size() == 1 ? parts.front() : at::cat(parts);
    }
    return to_numpy(result.reshape(batch_shape));
}

// An exact centre of matrices too large for its LP, refused naming the argument (x) before any work: the library's
// check names no argument.
void check_exact_size(const py::array& x, Center center, Norm norm) {
    // Only linf and composite need the LP (l1's exact centre is the median, frobenius' the mean): exact_center's rule.
    if (center != Center::Exact || (norm != Norm::LInf && norm != Norm::Composite) || x.ndim() < 2) return;
    check_exact_center_size(x.shape(x.ndim() - 2), x.shape(x.ndim() - 1), "exact " + to_string(norm) + " centre", "x");
}

// measure(centers=[...]): an unknown name is said of `centers`, the argument given (parse_center says "center").
std::vector<Center> parse_centers(const std::vector<std::string>& names) {
    std::vector<Center> centers;
    for (const auto& name : names) {
        try {
            centers.push_back(parse_center(name));
        } catch (const Error& e) {
            throw Error(e.what(), "centers");
        }
    }
    return centers;
}

}  // namespace

void bind_measures(py::module_& m) {
    py::list norms, centers;
    for (Norm norm : all_norms()) norms.append(to_string(norm));
    for (Center center : all_centers()) centers.append(to_string(center));
    m.attr("NORMS") = py::tuple(norms);
    m.attr("CENTERS") = py::tuple(centers);
    m.attr("EXACT_DEFAULT_LIMIT") = kExactDefaultLimit;

    m.def(
        "matrix_norm",
        [](const py::array& x, const std::string& norm) {
            const Norm parsed = parse_norm(norm);
            return library_batched(x, [&](const at::Tensor& t) { return batched_matrix_norm(t, parsed); });
        },
        "x"_a, "norm"_a, "||X|| per matrix of x [..., n, d] -> [...] float64.");
    m.def(
        "residual_norm",
        [](const py::array& x, const std::string& norm, const std::string& center) {
            const Norm parsed_norm = parse_norm(norm);
            const Center parsed_center = parse_center(center);
            check_exact_size(x, parsed_center, parsed_norm);
            return library_batched(
                x, [&](const at::Tensor& t) { return batched_residual_norm(t, parsed_norm, parsed_center); },
                parsed_center == Center::Exact);
        },
        "x"_a, "norm"_a, "center"_a, "||res(X)|| per matrix -> [...] float64.");
    m.def(
        "relative_residual",
        [](const py::array& x, const std::string& norm, const std::string& center) {
            const Norm parsed_norm = parse_norm(norm);
            const Center parsed_center = parse_center(center);
            check_exact_size(x, parsed_center, parsed_norm);
            return library_batched(
                x, [&](const at::Tensor& t) { return batched_relative_residual(t, parsed_norm, parsed_center); },
                parsed_center == Center::Exact);
        },
        "x"_a, "norm"_a, "center"_a, "||res(X)|| / ||X|| per matrix (0 for X = 0) -> [...] float64.");
    m.def(
        "residual",
        [](const py::array& array, const std::string& norm, const std::string& center) {
            const Norm parsed_norm = parse_norm(norm);
            const Center parsed_center = parse_center(center);
            check_exact_size(array, parsed_center, parsed_norm);
            const at::Tensor x = checked_batch(array, "x");
            return to_numpy(per_item(x, {x.size(-2), x.size(-1)}, [&](const Matrix& item, double* out) {
                Eigen::Map<Matrix>(out, item.rows(), item.cols()) = residual(item, parsed_norm, parsed_center);
            }));
        },
        "x"_a, "norm"_a, "center"_a, "res(X) = X - 1 x^T (rank1: X - its best rank-1 matrix) -> [..., n, d].");
    m.def(
        "center",
        [](const py::array& array, const std::string& norm, const std::string& center) {
            const Norm parsed_norm = parse_norm(norm);
            const Center parsed_center = parse_center(center);
            if (parsed_center == Center::Rank1) throw Error("the rank1 residual has no single centre row", "center");
            check_exact_size(array, parsed_center, parsed_norm);
            const at::Tensor x = checked_batch(array, "x");
            return to_numpy(per_item(x, {x.size(-1)}, [&](const Matrix& item, double* out) {
                Eigen::Map<RowVector>(out, item.cols()) = center_of(item, parsed_norm, parsed_center);
            }));
        },
        "x"_a, "norm"_a, "center"_a, "The centre x (mean, median or exact for the norm) -> [..., d].");
    m.def(
        "exact_center",
        [](const py::array& array, const std::string& norm) {
            const Norm parsed_norm = parse_norm(norm);
            check_exact_size(array, Center::Exact, parsed_norm);
            const at::Tensor x = checked_batch(array, "x");
            const std::int64_t d = x.size(-1);
            // Per item: the centre (d values), the residual, the number of LPs.
            const at::Tensor packed = per_item(x, {d + 2}, [&](const Matrix& item, double* out) {
                const ExactCenter best = exact_center(item, parsed_norm);
                Eigen::Map<RowVector>(out, d) = best.center;
                out[d] = best.residual;
                out[d + 1] = best.linear_programs;
            });
            return py::make_tuple(to_numpy(packed.narrow(-1, 0, d).contiguous()), to_numpy(packed.select(-1, d).contiguous()),
                                  to_numpy(packed.select(-1, d + 1).to(at::kLong)));
        },
        "x"_a, "norm"_a, "(centre [..., d], residual [...], linear programs [...]) of the true argmin.");
    m.def(
        "singular_values",
        [](const py::array& array) {
            const at::Tensor x = checked_batch(array, "x");
            const std::int64_t k = std::min(x.size(-2), x.size(-1));
            return to_numpy(per_item(x, {k}, [&](const Matrix& item, double* out) {
                Eigen::Map<Vector>(out, k) = singular_values(item);
            }));
        },
        "x"_a, "Singular values, descending -> [..., min(n, d)].");
    m.def(
        "effective_rank",
        [](const py::array& array) {
            return to_numpy(per_item(checked_batch(array, "x"), {},
                                     [](const Matrix& item, double* out) { *out = effective_rank(singular_values(item)); }));
        },
        "x"_a, "exp(-sum p_i log p_i), p_i = s_i / sum s -> [...].");
    m.def(
        "stable_rank",
        [](const py::array& array) {
            return to_numpy(per_item(checked_batch(array, "x"), {},
                                     [](const Matrix& item, double* out) { *out = stable_rank(singular_values(item)); }));
        },
        "x"_a, "sum s^2 / s_1^2 -> [...].");
    m.def(
        "numerical_rank",
        [](const py::array& array, double rank_tolerance, double stored_epsilon) {
            const at::Tensor x = checked_batch(array, "x");
            return to_numpy(per_item(x, {}, [&](const Matrix& item, double* out) {
                                const Vector s = singular_values(item);
                                *out = numerical_rank(s, rank_tolerance >= 0 ? rank_tolerance
                                                                             : default_rank_tolerance(item.rows(), item.cols(),
                                                                                                      s, stored_epsilon));
                            }).to(at::kLong));
        },
        "x"_a, "rank_tolerance"_a, "stored_epsilon"_a,
        "#{s_i > tolerance * s_1}; tolerance < 0: the default for values stored with machine epsilon stored_epsilon "
        "(default_rank_tolerance, measures.hpp) -> [...] int64.");
    m.def(
        "mean_pairwise_cosine",
        [](const py::array& array) {
            return to_numpy(per_item(checked_batch(array, "x"), {},
                                     [](const Matrix& item, double* out) { *out = mean_pairwise_cosine(item); }));
        },
        "x"_a, "Mean cos(x_i, x_j) over token pairs i < j (zero rows left out) -> [...].");
    m.def(
        "attention_measures",
        [](const py::array& array, double stored_epsilon) {
            const at::Tensor p = checked_batch(array, "p");
            if (p.size(-1) != p.size(-2))
                throw Error(fmt::format("attention matrices must be square, got {} x {}", p.size(-2), p.size(-1)), "p");
            // Rows stored in float16 or bfloat16 sum to 1 within that dtype's epsilon (`stored_epsilon`: the dtype the
            // caller's values were in), as measure's rows do.
            const double tolerance = std::max(1e-4, stored_epsilon);
            // The first row that is not an attention row, named by its index (the message named no matrix or row).
            if (const auto row = first_non_attention_row(p, tolerance)) {
                std::vector<std::int64_t> matrix = row->index;
                matrix.pop_back();
                // (one matrix has no index: "row 0 of matrix []" read as an empty matrix)
                throw Error(fmt::format("row {}{} is not an attention row {}", row->index.back(),
                                        matrix.empty() ? "" : fmt::format(" of matrix [{}]", fmt::join(matrix, ", ")),
                                        non_attention_row_detail(*row, tolerance)),
                            "p");
            }
            const at::Tensor packed = per_item(p, {5}, [](const Matrix& item, double* out) {
                const AttentionMeasures a = attention_measures(item);
                out[0] = a.mean_row_entropy;
                out[1] = a.max_row_entropy;
                out[2] = a.first_token_share;
                out[3] = a.sigma2;
                out[4] = a.spectral_gap;
            });
            py::dict result;
            const char* names[] = {"mean_row_entropy", "max_row_entropy", "first_token_share", "sigma2", "spectral_gap"};
            for (int i = 0; i < 5; ++i) result[names[i]] = to_numpy(packed.select(-1, i).contiguous());
            return result;
        },
        "p"_a, "stored_epsilon"_a,
        "Row entropy (mean, max; nats), first-token share, sigma_2, spectral gap of row-stochastic [..., n, n].");
    m.def(
        "measure",
        [](const py::array& array, const std::vector<std::string>& centers, double rank_tolerance, double stored_epsilon,
           bool allow_nonfinite, const std::string& where) {
            py::array contiguous;
            const ArrayView view = array_view_of(array, contiguous, where);
            MeasureArrayOptions options;
            options.centers = parse_centers(centers);
            options.rank_tolerance = rank_tolerance;
            options.stored_epsilon = stored_epsilon;
            options.allow_nonfinite = allow_nonfinite;
            MeasureArrayResult result;
            {
                py::gil_scoped_release release;
                result = measure_array(view, options, where, python_interrupt());
            }
            return py::make_tuple(table_columns(measures_table(result)), result.exact_skipped);
        },
        "x"_a, "centers"_a, "rank_tolerance"_a, "stored_epsilon"_a, "allow_nonfinite"_a, "where"_a,
        "Every measure of every matrix, as `rankscope measure` (measures.csv's columns), and whether the exact centre "
        "was left out by default.");
}

}  // namespace rankscope::python
