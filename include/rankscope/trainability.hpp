#pragma once
// Beyond the paper (SPEC.md §7): rank collapse and trainability at initialisation (Noci et al. 2022, "Signal propagation
// in transformers: theoretical perspectives and the role of rank collapse"). For depths L, post-LN and pre-LN blocks
// (attention + MLP, both with skips), with plain residuals (α = 1) and with branches scaled by α = 1/√L:
//
//   forward   X_0 = random N(0, 1) tokens [B, n, d];  X_l = block_l(X_{l-1})        (san.hpp, residual_scale = α)
//   loss      ℒ = Σ_{b,i,c} G_bic X_L,bic / sqrt(B·n·d),  G ~ N(0, 1) fixed          (a linear read-out: ∂ℒ/∂X_L = G/√(Bnd))
//   measured  cos_l = mean over samples of the mean pairwise token cosine of X_l (measures.hpp mean_pairwise_cosine),
//             r_L = mean relative residual ‖res(X_L)‖/‖X_L‖ (composite norm, mean centre), and
//             ‖∂ℒ/∂W_Q,l‖_F, ‖∂ℒ/∂W_K,l‖_F, ‖∂ℒ/∂W_V,l‖_F of every layer l (all heads together), in float64.
//
// Why the query/key gradients vanish under collapse: if the rows of a layer's input are equal (X = 1xᵀ), a change of W_Q
// or W_K moves every score of a row by the same amount, and softmax ignores a constant added to a row, so
// ∂ℒ/∂W_Q = ∂ℒ/∂W_K = 0 exactly, whatever the loss; the value path (P X W_V) does not have this invariance.
#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/interrupt.hpp"
#include "rankscope/san.hpp"
#include "rankscope/table.hpp"

namespace at {
class Tensor;
}

namespace rankscope {

enum class ResidualScaling { Plain, InverseSqrtDepth };
std::string to_string(ResidualScaling scaling);  // "plain", "inverse-sqrt-depth"
ResidualScaling parse_residual_scaling(const std::string& text);
double residual_scale(ResidualScaling scaling, int depth);  // 1 or 1/√depth

struct TrainabilitySettings {
    std::vector<int> depths = {2, 4, 8, 16, 32, 64};
    std::vector<LayerNormKind> layer_norms = {LayerNormKind::Post, LayerNormKind::Pre};
    std::vector<ResidualScaling> scalings = {ResidualScaling::Plain, ResidualScaling::InverseSqrtDepth};
    int d_model = 64;
    int heads = 4;
    int tokens = 32;
    int samples = 8;               // B, per seed
    int seeds = 3;                 // seed, seed + 1, ...
    std::uint64_t seed = 0;
    void validate() const;         // throws rankscope::Error naming the setting
};

// The network of one configuration: attention + ReLU MLP with both skips scaled by α, LayerNorm where given.
SanConfig trainability_network(const TrainabilitySettings& settings, int depth, LayerNormKind layer_norm,
                               ResidualScaling scaling);

struct TrainabilityLayer {
    int layer = 0;                // 0-based block index
    double input_cosine = 0;      // cos of the block's input X_{l}
    double grad_query = 0, grad_key = 0, grad_value = 0;  // Frobenius norms of ∂ℒ/∂W_Q, W_K, W_V
};

// One network, one input batch, one read-out: the measurements above (the network must be float64).
struct TrainabilityProbe {
    double last_cosine = 0;             // cos of X_L
    double last_relative_residual = 0;  // r_L
    std::vector<TrainabilityLayer> layers;
};
TrainabilityProbe probe_trainability(SanImpl& network, const at::Tensor& input, const at::Tensor& readout);

struct TrainabilityRun {
    int depth = 0;
    LayerNormKind layer_norm = LayerNormKind::Post;
    ResidualScaling scaling = ResidualScaling::Plain;
    std::uint64_t seed = 0;
    TrainabilityProbe probe;
};

struct TrainabilityResult {
    std::vector<TrainabilityRun> runs;  // layer_norm × scaling × depth × seed, in the settings' order (seed fastest)
};

TrainabilityResult run_trainability_experiment(const TrainabilitySettings& settings, const InterruptPoll& interrupt = {});

// trainability.csv: one row per run and layer (input cosine, the three gradient norms and q/v, k/v ratios).
Table trainability_layers_table(const TrainabilityResult& result);
// trainability_runs.csv: one row per run (last-layer cosine and relative residual, median and last-layer q/v ratio).
Table trainability_runs_table(const TrainabilityResult& result);
// trainability_summary.csv: one row per configuration (layer_norm, scaling, depth): the runs' values summarised over
// seeds (mean, std, min, max of the last-layer cosine; means of the relative residual and the median q/v ratio).
Table trainability_summary_table(const TrainabilityResult& result);

// Noci et al.'s claims judged on the result: tokens align with depth without scaling; query/key gradients shrink
// relative to value gradients as a layer's input aligns; 1/√L scaling keeps tokens apart and query/key gradients alive.
Findings trainability_findings(const TrainabilityResult& result, const TrainabilitySettings& settings);

}  // namespace rankscope
