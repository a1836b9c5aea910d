#pragma once
// `rankscope theory`: the collapse of random SAN variants layer by layer beside the bounds of SPEC.md §3.
//
// Bound used (stated in every output). For input X = 1x*ᵀ + R (x* the exact composite-norm centre, r = ||R||_{1,∞})
// and head h: logits = ℓ_h 1ᵀ-free part + row constants + E_h/√k with E_h = R W_QK,h Rᵀ, and P_h = 1 p_hᵀ + Δ_h,
// p_h = softmax of the logit row a query at x* would have. Since Δ_h 1 = 0, SA(X) = 1(...)ᵀ + Σ_h Δ_h R W_h, so
//   r_out ≤ H · ||Δ||·r·||W||          (||·|| composite of the head-wise maxima of ||·||_1 and ||·||_inf)
//         = (4 γ β H / √k) r³   with   γ = √k ||Δ|| / (4 ||E||)   (the softmax's sensitivity at this layer's
//           attention entries),  β = ||W_QK|| · ||W_V W_O||   (||E|| ≤ ||W_QK|| r²).
// An MLP multiplies the base by λ = L_act · ||W_in|| ||W_out|| (with its skip: sqrt((1+λ_1)(1+λ_inf))); the paper's
// affine LN by 1/σ of the sample. Skip connections and true LayerNorm have no such bound (NaN in the table).
// Per layer: bound_step = c_l r_{l−1}³; bound_cumulative = c_l B_{l−1}³ with B_0 = r_0 (Theorem 2.2/2.3/Cor. 3.2
// chained with the measured c_l); bound_theorem = c_max^{(3^l−1)/2} r_0^{3^l} (the theorems' closed form).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/array.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/interrupt.hpp"
#include "rankscope/san.hpp"
#include "rankscope/table.hpp"

namespace rankscope {

struct TheoryVariant {
    std::string name;  // "SAN", "SAN+skip", ... with "/H=4" for multi-head
    SanConfig config;
    bool has_bound() const;
};
// SAN, SAN+skip, SAN+MLP, SAN+skip+MLP, SAN+LN (post), SAN+affine-LN, each single-head and with `heads` heads.
std::vector<TheoryVariant> theory_variants(const SanConfig& base, int heads);

struct TheoryRow {
    std::string variant;
    int heads = 1;
    std::uint64_t seed = 0;
    int layer = 0;                  // 0 = input
    double residual = 0;            // ||res(X^l)||_{1,∞}, exact centre
    double relative_residual = 0;   // composite, mean centre (the paper's plotted quantity)
    double gamma = NAN, beta = NAN, lambda = NAN, c = NAN;
    double bound_step = NAN, bound_cumulative = NAN, bound_theorem = NAN;
    // The residual is at float64 round-off (relative residual < kRoundOff): the bound's inputs (Δ, E) are noise there
    // and the measured residual is round-off, not collapse; such rows are not checked against the bound.
    bool at_round_off = false;
};
constexpr double kRoundOff = 1e-12;

// One variant, one seed: a fresh network (torch seed = seed), float64. The input is `input` ([n, d_model], any float
// dtype) when given, else N(0, 1) drawn from the seed. Network and input are drawn on the CPU, then the forward runs on
// `device`; the measures and bounds read its activations (and the weights) back to the CPU.
std::vector<TheoryRow> run_theory(const TheoryVariant& variant, std::uint64_t seed, const at::Tensor* input = nullptr,
                                  const at::Device& device = at::kCPU);

// Slope of log(−log r_l) against l over layers l ≥ 1 with 1e-12 < r_l < 1 (relative residual, pooled over seeds):
// log 3 ≈ 1.0986 means doubly exponential with base 3. NaN with fewer than 2 usable layers.
double fitted_collapse_rate(const std::vector<TheoryRow>& rows);

// The step exponent a of log r_l = a · log r_(l−1) + b_s (a = 3 is the theorems' cubic step), fitted by least squares
// within each seed s (its own intercept: the constant c differs between networks) over that seed's collapsing steps:
// consecutive layers whose residual r (the exact-centre one the theorems bound, the fitted quantity) falls, neither
// at round-off. A seed with fewer than kStepsToFit such steps is not fitted (two points always lie on a line: three
// test the power law); median, min and max over the fitted seeds (NaN when none is). With skips the residual grows:
// too few collapsing steps, no exponent. How well a power law describes the steps: each fitted seed's root mean
// square of ln r_l − (a ln r_(l−1) + b_s) over its steps (0 for an exact power law; 0.1 is about a 10% miss per step),
// the largest over the seeds in rms_max.
constexpr int kStepsToFit = 3;
struct SeedStepFit {
    std::uint64_t seed = 0;
    double exponent = NAN, log_constant = NAN;  // a and b_s of ln r_l = a ln r_(l−1) + b_s
    int steps = 0;                              // the collapsing steps fitted (≥ kStepsToFit)
};
struct StepExponentFit {
    double median = NAN, min = NAN, max = NAN;
    int seeds_fitted = 0, seeds = 0;
    double rms_max = NAN;
    int steps_min = 0, steps_max = 0;     // the fewest and most steps of a fitted seed (0: none fitted)
    std::vector<SeedStepFit> per_seed{};  // the fitted seeds, in seed order
};
StepExponentFit fitted_collapse_exponent(const std::vector<TheoryRow>& rows);

// ---- the experiment: every variant × seed, summarised ---------------------------------------------------------
struct TheorySettings {
    SanConfig network;         // layers, d_model, tokens, d_qk, d_v, biases, init_scale (heads/blocks set per variant)
    int heads = 4;             // of the multi-head variants
    int seeds = 5;             // seed, seed + 1, ...
    std::uint64_t seed = 0;
    std::string input_label = "random N(0,1) per seed";  // where X came from (a file name with --input)
    at::Device device = at::kCPU;  // where the forwards run (--device)
};

// Per variant and layer: means over seeds (bounds over the seeds whose residual is above round-off; NaN when none).
struct TheoryLayerSummary {
    std::string variant;
    int heads = 1;
    int layer = 0;
    double relative_residual_mean = 0, residual_mean = 0, bound_step_mean = NAN, bound_cumulative_mean = NAN;
};
struct TheoryVariantSummary {
    std::string variant;
    int heads = 1;
    bool has_bound = false;
    double fitted_slope = NAN;     // fitted_collapse_rate
    double fitted_base = NAN;      // exp(fitted_slope): 3 for the theorems' doubly exponential collapse
    StepExponentFit exponent;      // fitted_collapse_exponent
    double final_relative_residual = NAN;  // mean over seeds at the last layer
    double bound_over_measured_log10_mean = NAN;  // mean log10(bound_step / residual) over checked rows
    double final_relative_residual_min = NAN, final_relative_residual_max = NAN;  // over seeds at the last layer
    bool still_collapsing = false;  // the mean residual r falls from the layer before the last into the last
    struct LastLayer {
        std::uint64_t seed = 0;
        double residual = NAN, relative_residual = NAN;
    };
    std::vector<LastLayer> last_layer{};  // each seed's residual r and relative residual at the last layer
};
struct TheoryResult {
    std::vector<TheoryRow> rows;  // every variant × seed × layer
    std::vector<TheoryLayerSummary> layers;
    std::vector<TheoryVariantSummary> variants;
    int bound_rows_checked = 0;   // rows with a bound, above round-off
    int bound_violations = 0;     // of those, residual > bound_step (relative tolerance 1e-9)
    // How loose the bound is over those rows: the least and largest log10(bound_step / residual) (NaN: no row).
    double bound_log10_ratio_min = NAN, bound_log10_ratio_max = NAN;
};

// Runs every (variant, seed) job in parallel (progress on a terminal), float64. `input` as in run_theory. `interrupt`
// is polled between jobs.
TheoryResult run_theory_experiment(const TheorySettings& settings, const at::Tensor* input = nullptr,
                                   const InterruptPoll& interrupt = {});
// The summaries and bound counts of a set of rows (run_theory_experiment's second half; tested on its own).
TheoryResult summarize_theory(std::vector<TheoryRow> rows, const std::vector<TheoryVariant>& variants);

// The paper's §3 claims checked on the result: doubly exponential collapse of SAN (1 and H heads), the per-layer
// bound, skip connections stopping collapse, MLPs not stopping it, LayerNorm (the paper's affine model and true LN).
Findings theory_findings(const TheoryResult& result, const TheorySettings& settings);

// ---- inputs, limits and tables of `rankscope theory` (src/experiments/theory_tables.cpp) ----------------------------
// A given X (`--input`): one finite n × d matrix with 2 ≤ n ≤ 512 and d ≤ 512, returned as float64 [n, d]; sets
// settings.network.tokens, d_model and input_label (= where). Throws Error naming `where`.
at::Tensor theory_input(const ArrayView& array, const std::string& where, TheorySettings& settings);
// Each job keeps one network's attention maps alive: heads × tokens² × layers float64 values, at most 2^26; and the
// network must be valid (SanConfig::validate). Throws Error naming the flags.
void check_theory_settings(const TheorySettings& settings);
// A diverged network (e.g. a huge init scale) gives NaN/Inf residuals: an Error naming variant, seed and layer,
// unless allowed.
void check_theory_finite(const TheoryResult& result, bool allow_nonfinite);
// The bound as computed, in words (theory.json's bound_definition).
const char* theory_bound_definition();
// theory.csv: one row per variant × seed × layer (TheoryRow's fields; at_round_off as 0/1).
Table theory_table(const TheoryResult& result);
// theory_summary.csv: per variant and layer, means over seeds.
Table theory_summary_table(const TheoryResult& result);
// theory.json's "variants": per variant the fitted rates, final residual and bound tightness (NaN = not fitted).
Table theory_variants_table(const TheoryResult& result);

}  // namespace rankscope
