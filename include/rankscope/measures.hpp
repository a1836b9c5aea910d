#pragma once
// Measures of rank collapse (SPEC.md §2): how far a matrix of token representations is from rank 1.
//
// Dimension legend: X is n × d (n tokens = rows, d features = columns); 1 is the all-ones n-vector; "..." is any number
// of leading batch dimensions.
//
//   using namespace rankscope;
//   Matrix x = ...;                                             // n × d, row-major, double
//   double r = relative_residual(x, Norm::Composite, Center::Mean);     // the paper's plotted quantity
//   ExactCenter best = exact_center(x, Norm::Composite);                 // the true argmin over centres
//   at::Tensor per_sample = batched_relative_residual(hidden, Norm::Composite, Center::Mean);  // [..., n, d] -> [...]
//
// Norms (induced, of the matrix as an operator):
//   ||M||_1   = max_j Σ_i |M_ij|       largest column abs sum
//   ||M||_inf = max_i Σ_j |M_ij|       largest row abs sum
//   ||M||_{1,inf} = sqrt(||M||_1 ||M||_inf)   "composite", the paper's (not a norm: no triangle inequality)
//   ||M||_F, ||M||_2 (largest singular value)
// Residual res(X) = X − 1 xᵀ with the centre x chosen by Center; Rank1 instead subtracts the best rank-1 matrix
// (truncated SVD, Eckart–Young), which may have non-identical rows.
#include <Eigen/Core>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace rankscope {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVector = Eigen::RowVectorXd;
using Vector = Eigen::VectorXd;

enum class Norm { L1, LInf, Composite, Frobenius, Spectral };
enum class Center {
    Mean,    // column mean: exact argmin for Frobenius and spectral; the paper's choice
    Median,  // column median: exact argmin for ||·||_1 (columns separate)
    Exact,   // the true argmin for the chosen norm (an LP for ||·||_inf; vertex enumeration for the composite)
    Rank1,   // distance to the best rank-1 matrix (truncated SVD); not of the form X − 1xᵀ
};

const std::vector<Norm>& all_norms();
const std::vector<Center>& all_centers();
std::string to_string(Norm norm);      // "l1", "linf", "composite", "frobenius", "spectral"
std::string to_string(Center center);  // "mean", "median", "exact", "rank1"
Norm parse_norm(const std::string& text);        // throws rankscope::Error listing the valid names
Center parse_center(const std::string& text);

// ---- norms -------------------------------------------------------------------------------------------------------
double induced_l1_norm(const Matrix& m);
double induced_linf_norm(const Matrix& m);
double composite_norm(const Matrix& m);
double frobenius_norm(const Matrix& m);
double spectral_norm(const Matrix& m);
double matrix_norm(const Matrix& m, Norm norm);

// ---- centres and residuals ---------------------------------------------------------------------------------------
RowVector column_mean(const Matrix& x);
RowVector column_median(const Matrix& x);  // mean of the two middle values when n is even

struct ExactCenter {
    RowVector center;         // the minimising x (1 × d)
    double residual = 0;      // ||X − 1 xᵀ|| in the requested norm, evaluated from `center` in double precision
    int linear_programs = 0;  // LP solves used (0 for the closed forms)
};
// The argmin of ||X − 1xᵀ|| for `norm`. Closed forms for l1 (median), Frobenius and spectral (mean: for v = x̄ − x,
// (X − 1xᵀ)ᵀ(X − 1xᵀ) = Xᵀ(I − 11ᵀ/n)X + n v vᵀ, minimised at v = 0). For linf an LP; for the composite norm the
// Pareto frontier of (||·||_1, ||·||_inf) is enumerated by weighted LPs and the product minimised over its vertices
// (the product is concave along each frontier edge, so a vertex attains the minimum). LPs are solved with GLPK.
// For linf and composite the linear programs have n·d + d + 2 columns and their count and cost grow steeply with n·d
// (one composite centre, 2 cores: 64 × 64 about 1 s, 100 × 100 about 28 s, 128 × 128 did not finish in minutes):
// above kMaxExactCenterEntries entries an Error says so instead of running for hours.
constexpr long long kMaxExactCenterEntries = 4096;
// Throws Error("the <what> of a <rows> x <cols> matrix (<n> entries) is a linear program too large ...", where) above
// that limit: exact_center's own check, and measure_array's before it starts on a batch.
void check_exact_center_size(long long rows, long long cols, const std::string& what, const std::string& where = "");
ExactCenter exact_center(const Matrix& x, Norm norm);

// x for Center::Mean / Median / Exact. Throws for Center::Rank1 (it has no single centre row).
RowVector center_of(const Matrix& x, Norm norm, Center center);
// The best rank-1 approximation σ1 u1 v1ᵀ.
Matrix rank1_approximation(const Matrix& x);
// X − 1xᵀ, or X − σ1 u1 v1ᵀ for Rank1.
Matrix residual(const Matrix& x, Norm norm, Center center);
double residual_norm(const Matrix& x, Norm norm, Center center);
// ||res(X)|| / ||X|| (0 when X = 0; NaN when X holds a NaN or Inf).
double relative_residual(const Matrix& x, Norm norm, Center center);
// numerator / denominator for a norm `denominator` ≥ 0, and 0 when it is 0 (the zero matrix: nothing to lose). A NaN
// stays NaN: `denominator > 0 ? numerator / denominator : 0` read the NaN norm of an overflowing network as 0.
inline double ratio_or_zero(double numerator, double denominator) {
    return denominator == 0 ? 0.0 : numerator / denominator;
}

// ---- rank measures ------------------------------------------------------------------------------------------------
Vector singular_values(const Matrix& x);  // descending, min(n, d) values
// exp(−Σ p_i log p_i), p_i = s_i / Σ s (Roy & Vetterli 2007). 0 for the zero matrix.
double effective_rank(const Vector& singular_values);
// Σ s_i² / s_1² = ||X||_F² / ||X||_2².
double stable_rank(const Vector& singular_values);
// #{ s_i > tolerance · s_1 }.
int numerical_rank(const Vector& singular_values, double relative_tolerance);
// numerical_rank's default tolerance, relative to s_1, for values stored with machine epsilon `stored_epsilon`
// (dtype_epsilon, array.hpp):
// - float32, float64: numpy.linalg.matrix_rank's, max(n, d) · eps.
// - float16, bfloat16: the bound of their rounding. Rounding to nearest moves each entry by at most u·|x_ij|
//   (u = eps / 2), so the matrix by at most u·||X||_F in the spectral norm and every singular value as much (Weyl): a
//   singular value above u·||X||_F is not rounding. Relative to s_1: u·||X||_F / s_1 = u·sqrt(stable rank), never below
//   the float32 default. (numpy computes float16 in float32 and uses float32's eps, so rounding counts as rank; and
//   max(n, d)·eps of the stored dtype passes 1 at max(n, d) = 128 in bfloat16: rank 0.)
double default_rank_tolerance(Eigen::Index rows, Eigen::Index cols, const Vector& singular_values, double stored_epsilon);
// Mean of cos(x_i, x_j) over pairs of distinct tokens i < j; zero rows are left out. NaN when fewer than 2 remain.
double mean_pairwise_cosine(const Matrix& x);

// ---- attention matrices (row-stochastic n × n) -------------------------------------------------------------------
bool is_row_stochastic(const Matrix& m, double tolerance = 1e-4);
struct AttentionMeasures {
    double mean_row_entropy = 0;   // mean over rows of −Σ_j p_ij ln p_ij (nats); ln n is uniform attention
    double max_row_entropy = 0;
    double first_token_share = 0;  // mean over rows of p_i0 (the "sink rate")
    double sigma2 = 0;             // second singular value (σ1 ≥ 1 for a row-stochastic matrix)
    double spectral_gap = 0;       // 1 − σ2/σ1; 1 means rank 1
};
AttentionMeasures attention_measures(const Matrix& p);

// ---- batched over torch tensors ----------------------------------------------------------------------------------
// x: [..., n, d] float32 or float64 (contiguous or not). Returns [...] float64. Items run in parallel on the
// at::parallel_for thread pool (set its size with at::set_num_threads / --threads). A tensor on another device (a
// GPU) is read back to the CPU first, except by batched_relative_residual with a sum norm and the mean centre (the
// paper's measure), which runs there (batched_mean_relative_residual_on_device) and returns [...] on that device.
// A NaN or Inf in an item makes its mean-centre measure non-finite (E1 relies on it to name a non-finite state).
at::Tensor batched_residual_norm(const at::Tensor& x, Norm norm, Center center);
at::Tensor batched_relative_residual(const at::Tensor& x, Norm norm, Center center);
// The paper's measure in torch operations on x's own device, in float64: ‖X − 1cᵀ‖ / ‖X‖ with c the column mean, for a
// sum norm (not Norm::Spectral); 0 where ‖X‖ = 0, as the fused CPU kernel. [..., n, d] -> [...] float64 on x's device.
// Memory: up to three float64 arrays the size of x. The reference that tests/unit/test_batched.cpp holds the fused kernel to.
at::Tensor batched_mean_relative_residual_on_device(const at::Tensor& x, Norm norm);
at::Tensor batched_matrix_norm(const at::Tensor& x, Norm norm);
at::Tensor batched_mean_pairwise_cosine(const at::Tensor& x);  // mean_pairwise_cosine of each [n, d] item
// Copies one [n, d] slice of a tensor into a double Matrix.
Matrix to_matrix(const at::Tensor& x2d);

}  // namespace rankscope
