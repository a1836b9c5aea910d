#pragma once
// Beyond the paper (SPEC.md §7): the two failure modes of attention at initialisation over the query/key weight scale s
// and depth — rank collapse (tokens alike, small s) and entropy collapse (near one-hot attention, large s); Zhai et al.
// 2023, Giorlandino & Goldt 2025.
//
//   network   W_Q, W_K ~ N(0, s²/d), every other weight N(0, 1/fan_in) (san.hpp query_key_scale = s); one network of
//             `layers` blocks per seed, measured after every block (depth l = the first l blocks: a deeper network of
//             the same seed starts with the same blocks). Variants: "SAN" (pure attention, the paper's) and
//             "transformer" (attention + ReLU MLP, both skips, post-LN: BERT's block at init).
//   input     X_0 ~ N(0, 1) [B, n, d]
//   measured  per layer l: normalised attention entropy  Ĥ_l = mean over samples, heads, query rows of
//             −Σ_j P_ij ln P_ij / ln n   (1 = uniform, 0 = one-hot), the relative residual r_l = ‖res(X_l)‖/‖X_l‖
//             (composite norm, mean centre) and the mean pairwise token cosine of X_l.
//   theory    layer 1 sees i.i.d. Gaussian tokens: the logits of one query row are ≈ i.i.d. N(0, σ²) with σ ≈ s², so
//             (random energy model) Ĥ_1 ≈ 1 − s⁴(1 − 1/n)/(2 ln n) while s⁴ ≪ 2 ln n, and attention freezes onto a few keys
//             as σ passes √(2 ln n), i.e. at s_c = (2 ln n)^{1/4}.
#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/interrupt.hpp"
#include "rankscope/san.hpp"
#include "rankscope/table.hpp"

namespace rankscope {

struct FailureModesSettings {
    std::vector<double> query_key_scales = {0.25, 0.35, 0.5, 0.71, 1, 1.41, 2, 2.83, 4};
    std::vector<std::string> variants = {"SAN", "transformer"};
    int layers = 24;
    int d_model = 64;
    int heads = 4;
    int tokens = 32;
    int samples = 8;
    int seeds = 3;
    std::uint64_t seed = 0;
    // A cell of the phase diagram is in entropy collapse when Ĥ < entropy_collapse_below, in rank collapse when
    // r < rank_collapse_below.
    double entropy_collapse_below = 0.2;
    double rank_collapse_below = 1e-3;
    void validate() const;  // throws rankscope::Error naming the setting
};

const std::vector<std::string>& failure_mode_variants();  // "SAN", "transformer"
SanConfig failure_modes_network(const FailureModesSettings& settings, const std::string& variant, double query_key_scale);

// s_c = (2 ln n)^{1/4}: the query/key scale at which layer 1's attention freezes (random energy model).
double entropy_freezing_scale(int tokens);
// The small-s expansion 1 − s⁴(1 − 1/n)/(2 ln n) of layer 1's normalised entropy (the logits' variance over n keys is
// s⁴(1 − 1/n); measured at d_model 64, 4 heads, n = 32: the deficit over it is 0.97–1.00 below s = 0.71).
double first_layer_entropy_expansion(double query_key_scale, int tokens);

// Mean normalised entropy of attention patterns [B, H, n, n] (rows summing to 1): −Σ_j p ln p / ln n, 0 ln 0 = 0.
double normalized_attention_entropy(const at::Tensor& patterns);

struct FailureModesRow {
    std::string variant;
    double query_key_scale = 0;
    std::uint64_t seed = 0;
    int layer = 0;                   // 1..layers
    double normalized_entropy = 0;   // Ĥ_l of block l's attention
    double relative_residual = 0;    // of X_l
    double mean_cosine = 0;          // of X_l
};

struct FailureModesResult {
    std::vector<FailureModesRow> rows;  // variant × scale × seed × layer, in the settings' order
};

FailureModesResult run_failure_modes_experiment(const FailureModesSettings& settings, const InterruptPoll& interrupt = {});

// failure_modes.csv: the rows.
Table failure_modes_table(const FailureModesResult& result);
// failure_modes_summary.csv: per variant, scale and layer, means over seeds (log10 of the mean residual, with 1e-300
// standing for an exact 0) and the cell's regime: "rank collapse",
// "entropy collapse", "both" or "neither" (by the settings' thresholds on the means).
Table failure_modes_summary_table(const FailureModesResult& result, const FailureModesSettings& settings);

// The published descriptions judged on the result: small s → rank collapse with near-uniform attention (pure
// attention); large s → near one-hot attention with the tokens kept apart (blocks with skips and LayerNorm); larger s
// delays pure attention's collapse (the paper's bound); layer 1 freezes near s_c; the small-s expansion of Ĥ_1.
Findings failure_modes_findings(const FailureModesResult& result, const FailureModesSettings& settings);

}  // namespace rankscope
