// The exact argmin of ||X − 1xᵀ|| over the centre row x, for every supported norm.
//
// linf and composite need linear programming. With e_ij ≥ |X_ij − x_j| the two induced norms are
//   ||·||_1   = max_j Σ_i e_ij  ≤ a            ||·||_inf = max_i Σ_j e_ij ≤ b
// so S = {(a, b) : some x reaches them} is a convex polyhedron. ||·||_inf alone is min b over S (one LP). The composite
// norm sqrt(a·b) is minimised over S's lower-left frontier; log a + log b is concave, so the minimum sits at a vertex
// of S. The vertices are enumerated exactly by the non-inferior-set-estimation recursion: the two lexicographic end
// points, then for each pair of neighbours p, q the LP  min (b_p − b_q)·a + (a_q − a_p)·b  either returns a point
// strictly below the segment pq (a new vertex: recurse on both halves) or proves pq is a frontier edge.
#include <fmt/format.h>
#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "measures/kernels.hpp"
#include "rankscope/error.hpp"

namespace rankscope {
namespace {

struct FrontierPoint {
    RowVector center;
    double a = 0, b = 0;  // ||·||_1 and ||·||_inf of X − 1 centerᵀ, recomputed in double from the LP's x
};

class CenterProgram {
public:
    explicit CenterProgram(const Matrix& x) : x_(x), n_(static_cast<int>(x.rows())), d_(static_cast<int>(x.cols())) {
        problem_.reset(glp_create_prob());
        glp_set_obj_dir(problem_.get(), GLP_MIN);
        // Columns: x_1..x_d (free), e_11..e_nd (≥ 0), a, b (≥ 0).
        glp_add_cols(problem_.get(), d_ + n_ * d_ + 2);
        for (int j = 0; j < d_; ++j) glp_set_col_bnds(problem_.get(), x_column(j), GLP_FR, 0, 0);
        for (int k = 0; k < n_ * d_; ++k) glp_set_col_bnds(problem_.get(), d_ + 1 + k, GLP_LO, 0, 0);
        glp_set_col_bnds(problem_.get(), a_column(), GLP_LO, 0, 0);
        glp_set_col_bnds(problem_.get(), b_column(), GLP_LO, 0, 0);
        // Rows: e_ij + x_j ≥ X_ij, e_ij − x_j ≥ −X_ij, a − Σ_i e_ij ≥ 0 (per j), b − Σ_j e_ij ≥ 0 (per i).
        const int rows = 2 * n_ * d_ + d_ + n_;
        glp_add_rows(problem_.get(), rows);
        std::vector<int> row_index{0}, column_index{0};
        std::vector<double> value{0};
        auto add = [&](int r, int c, double v) {
            row_index.push_back(r);
            column_index.push_back(c);
            value.push_back(v);
        };
        int r = 0;
        for (int i = 0; i < n_; ++i)
            for (int j = 0; j < d_; ++j) {
                glp_set_row_bnds(problem_.get(), ++r, GLP_LO, x(i, j), 0);
                add(r, e_column(i, j), 1);
                add(r, x_column(j), 1);
                glp_set_row_bnds(problem_.get(), ++r, GLP_LO, -x(i, j), 0);
                add(r, e_column(i, j), 1);
                add(r, x_column(j), -1);
            }
        for (int j = 0; j < d_; ++j) {
            glp_set_row_bnds(problem_.get(), ++r, GLP_LO, 0, 0);
            add(r, a_column(), 1);
            for (int i = 0; i < n_; ++i) add(r, e_column(i, j), -1);
        }
        for (int i = 0; i < n_; ++i) {
            glp_set_row_bnds(problem_.get(), ++r, GLP_LO, 0, 0);
            add(r, b_column(), 1);
            for (int j = 0; j < d_; ++j) add(r, e_column(i, j), -1);
        }
        glp_load_matrix(problem_.get(), static_cast<int>(value.size()) - 1, row_index.data(), column_index.data(),
                        value.data());
        glp_init_smcp(&parameters_);
        parameters_.msg_lev = GLP_MSG_OFF;
        parameters_.presolve = GLP_OFF;  // keep the basis between solves (warm starts)
    }

    // min weight_a·a + weight_b·b, optionally with a ≤ a_cap or b ≤ b_cap.
    FrontierPoint solve(double weight_a, double weight_b, double a_cap = -1, double b_cap = -1) {
        glp_set_obj_coef(problem_.get(), a_column(), weight_a);
        glp_set_obj_coef(problem_.get(), b_column(), weight_b);
        set_cap(a_column(), a_cap);
        set_cap(b_column(), b_cap);
        int status = glp_simplex(problem_.get(), &parameters_);
        if (status != 0 || glp_get_status(problem_.get()) != GLP_OPT) {
            // A stale basis can fail after a bound change; retry once from the standard basis.
            glp_std_basis(problem_.get());
            status = glp_simplex(problem_.get(), &parameters_);
        }
        if (status != 0 || glp_get_status(problem_.get()) != GLP_OPT) {
            // The primal simplex can also report "no feasible solution" for this always-feasible LP (phase 1 lost
            // to round-off: tests/fixtures/exact_center/); the dual simplex, then primal, solves those.
            glp_smcp dual = parameters_;
            dual.meth = GLP_DUALP;
            glp_std_basis(problem_.get());
            status = glp_simplex(problem_.get(), &dual);
        }
        if (status != 0 || glp_get_status(problem_.get()) != GLP_OPT)
            throw Error("exact centre: the linear program did not reach an optimum (GLPK status " +
                        std::to_string(glp_get_status(problem_.get())) + ")");
        ++solves_;
        FrontierPoint point;
        point.center.resize(d_);
        for (int j = 0; j < d_; ++j) point.center(j) = glp_get_col_prim(problem_.get(), x_column(j));
        const auto norms = detail::shifted_sum_norms(x_, point.center);
        point.a = norms.l1;
        point.b = norms.linf;
        return point;
    }
    int solves() const { return solves_; }

private:
    int x_column(int j) const { return 1 + j; }
    int e_column(int i, int j) const { return d_ + 1 + i * d_ + j; }
    int a_column() const { return d_ + n_ * d_ + 1; }
    int b_column() const { return d_ + n_ * d_ + 2; }
    void set_cap(int column, double cap) {
        if (cap < 0) glp_set_col_bnds(problem_.get(), column, GLP_LO, 0, 0);
        else if (cap == 0) glp_set_col_bnds(problem_.get(), column, GLP_FX, 0, 0);
        else glp_set_col_bnds(problem_.get(), column, GLP_DB, 0, cap);
    }
    struct Deleter {
        void operator()(glp_prob* p) const { glp_delete_prob(p); }
    };
    const Matrix& x_;
    int n_, d_;
    std::unique_ptr<glp_prob, Deleter> problem_;
    glp_smcp parameters_{};
    int solves_ = 0;
};

// Relative slack for "this LP optimum ties that bound": GLPK's feasibility tolerance is 1e-7 relative.
constexpr double kLpSlack = 1e-7;

// Enough for every frontier seen in practice (a handful of vertices); a cap keeps a numerically noisy frontier finite.
constexpr int kMaxLinearPrograms = 200;

void enumerate_frontier(CenterProgram& program, const FrontierPoint& p, const FrontierPoint& q,
                        std::vector<FrontierPoint>& vertices, int depth) {
    const double weight_a = p.b - q.b, weight_b = q.a - p.a;
    if (weight_a <= 0 || weight_b <= 0 || depth > 60 || program.solves() >= kMaxLinearPrograms) return;
    const FrontierPoint r = program.solve(weight_a, weight_b);
    const double on_segment = weight_a * p.a + weight_b * p.b;
    const double found = weight_a * r.a + weight_b * r.b;
    if (found < on_segment - kLpSlack * std::max(1.0, on_segment)) {
        vertices.push_back(r);
        enumerate_frontier(program, p, r, vertices, depth + 1);
        enumerate_frontier(program, r, q, vertices, depth + 1);
    }
}

}  // namespace

// The LP cases on a well-scaled problem: translating X by a row vector translates the optimal centre, and scaling X
// scales every norm, so solve for Y = (X − 1 meanᵀ)/s with s = max |Y_ij| and map the centre back. Without this a
// nearly collapsed X (residual 1e-12 of entries ~1) sits below GLPK's tolerances.
ExactCenter exact_center_scaled(const Matrix& x, Norm norm);

void check_exact_center_size(long long rows, long long cols, const std::string& what, const std::string& where) {
    if (rows * cols <= kMaxExactCenterEntries) return;
    throw Error(fmt::format("the {} of a {} x {} matrix ({} entries) is a linear program too large to finish in reasonable "
                            "time: at most {} entries (64 x 64); the mean and median centres have no limit",
                            what, rows, cols, rows * cols, kMaxExactCenterEntries),
                where);
}

ExactCenter exact_center(const Matrix& x, Norm norm) {
    if (norm == Norm::LInf || norm == Norm::Composite)
        check_exact_center_size(x.rows(), x.cols(), norm == Norm::LInf ? "exact linf centre" : "exact composite centre");
    if ((norm == Norm::LInf || norm == Norm::Composite) && x.size() > 0) {
        const RowVector mean = column_mean(x);
        const Matrix centred = x.rowwise() - mean;
        const double scale = centred.cwiseAbs().maxCoeff();
        ExactCenter out;
        if (scale == 0) {
            out.center = mean;
            return out;
        }
        ExactCenter scaled = exact_center_scaled(centred / scale, norm);
        out.center = mean + scale * scaled.center;
        out.linear_programs = scaled.linear_programs;
        const auto norms = detail::shifted_sum_norms(x, out.center);
        out.residual = norm == Norm::LInf ? norms.linf : norms.composite();
        // Never worse than the closed-form centres evaluated on the original matrix.
        const auto at_mean = detail::shifted_sum_norms(x, mean);
        const double mean_value = norm == Norm::LInf ? at_mean.linf : at_mean.composite();
        if (mean_value < out.residual) {
            out.center = mean;
            out.residual = mean_value;
        }
        return out;
    }
    return exact_center_scaled(x, norm);
}

ExactCenter exact_center_scaled(const Matrix& x, Norm norm) {
    ExactCenter out;
    if (x.rows() == 0 || x.cols() == 0) {
        out.center = RowVector::Zero(x.cols());
        return out;
    }
    switch (norm) {
        case Norm::L1:
            out.center = column_median(x);
            out.residual = detail::shifted_sum_norms(x, out.center).l1;
            return out;
        case Norm::Frobenius:
            out.center = column_mean(x);
            out.residual = detail::shifted_sum_norms(x, out.center).frobenius;
            return out;
        case Norm::Spectral:
            out.center = column_mean(x);
            out.residual = spectral_norm(x.rowwise() - out.center);
            return out;
        case Norm::LInf: {
            CenterProgram program(x);
            FrontierPoint best = program.solve(0, 1);
            for (const RowVector& candidate : {column_mean(x), column_median(x)}) {
                const double value = detail::shifted_sum_norms(x, candidate).linf;
                if (value < best.b) best = {candidate, 0, value};
            }
            out.center = best.center;
            out.residual = best.b;
            out.linear_programs = program.solves();
            return out;
        }
        case Norm::Composite: break;
    }

    CenterProgram program(x);
    // End points: min a then min b at that a; min b then min a at that b.
    const FrontierPoint min_a = program.solve(1, 0);
    const FrontierPoint left = program.solve(0, 1, min_a.a * (1 + kLpSlack) + kLpSlack, -1);
    const FrontierPoint min_b = program.solve(0, 1);
    const FrontierPoint right = program.solve(1, 0, -1, min_b.b * (1 + kLpSlack) + kLpSlack);
    std::vector<FrontierPoint> vertices = {left, right};
    enumerate_frontier(program, left, right, vertices, 0);
    // The closed-form centres are candidates too, so the answer never loses to them through LP tolerance.
    for (const RowVector& candidate : {column_mean(x), column_median(x)}) {
        const auto norms = detail::shifted_sum_norms(x, candidate);
        vertices.push_back({candidate, norms.l1, norms.linf});
    }
    const auto best = std::min_element(vertices.begin(), vertices.end(), [](const auto& u, const auto& v) {
        return u.a * u.b < v.a * v.b;
    });
    out.center = best->center;
    out.residual = std::sqrt(best->a * best->b);
    out.linear_programs = program.solves();
    return out;
}

}  // namespace rankscope
