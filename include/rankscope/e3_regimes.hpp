#pragma once
// E3 in training regimes (SPEC.md §7, "E3 training regimes"): the circle experiment (e3_circle.hpp) run once per regime —
// plain MSE training (the paper's: inputs exactly on the circle) and denoising training (inputs with N(0, σ²) noise,
// targets the noisy inputs rotated one step), each with and without the LayerNorm after the input projection — with
// the same variants, seeds and every other setting. Per regime and variant: the merge rate (seeds whose two tokens
// merged / seeds), the merge steps, the arc-following rate, the one-step error.
//
//   CircleSettings base;                                // variants, seeds (8 or more for rates), training recipe
//   auto results = run_circle_regimes(base, default_circle_regimes(0.005));
//   Findings f = circle_regimes_findings(results, base);
#include <string>
#include <vector>

#include "rankscope/e3_circle.hpp"
#include "rankscope/table.hpp"

namespace rankscope {

struct CircleRegime {
    std::string name;           // "plain MSE / input LN", "denoising σ = 0.005 / no input LN", ... (no commas)
    double input_noise = 0;     // 0 = plain MSE
    bool embedding_layer_norm = false;
};

// plain MSE and denoising with `noise`, each without and with the input LayerNorm (4 regimes, that order).
std::vector<CircleRegime> default_circle_regimes(double noise);

struct CircleRegimeResult {
    CircleRegime regime;
    CircleSettings settings;  // the base settings with the regime's training recipe
    CircleResult result;
};

std::vector<CircleRegimeResult> run_circle_regimes(const CircleSettings& base, const std::vector<CircleRegime>& regimes);

// The rates behind the checks, per regime and variant.
struct CircleRates {
    int seeds = 0, merged = 0, on_arcs = 0;
    int on_circle = 0;                    // finite, never merged, mean |‖p‖ − r| below arc_distance (any phase)
    int trained = 0;                      // seeds whose one-step RMSE is below settings.small_error step lengths
    std::vector<int> merge_steps;         // of the merged seeds, in seed order
    double worst_train_rmse = 0;          // largest one-step RMSE over the seeds (training points)
    double merge_rate() const { return seeds ? static_cast<double>(merged) / seeds : 0; }
    double arc_rate() const { return seeds ? static_cast<double>(on_arcs) / seeds : 0; }
    double circle_rate() const { return seeds ? static_cast<double>(on_circle) / seeds : 0; }
    double median_merge_step() const;     // of merge_steps (mean of the middle two when even); NaN when none merged
    // Median over all seeds of the step of the merge, a seed that never merged counting as +∞: finite only when at
    // least half the seeds merged (the "earliest" check's measure; median_merge_step alone would let one lucky seed
    // decide).
    double median_time_to_merge() const;
};
CircleRates circle_rates(const CircleResult& result, const std::string& variant, const CircleSettings& settings);

// circle_regimes.csv: regime, input_noise, embedding_layer_norm, variant, seeds, merged, merge_rate, merge_steps,
// median_merge_step (empty when none merged), median_time_to_merge (empty when fewer than half merged), on_arcs, arc_rate, on_circle,
// circle_rate, trained, worst_train_rmse, step_length.
Table circle_regimes_table(const std::vector<CircleRegimeResult>& results);

// Per regime, four checks. "First" read two ways: "pure attention collapses first" (SAN's merge rate above every
// other variant's, each by a one-sided Fisher exact test at p < 0.05: the issue's definition) and "pure attention
// collapses earliest" (SAN's median_time_to_merge finite and below every other variant's). "Follow" read two ways:
// "skip/MLP follow the arcs" (each other variant on the arcs, phase included, in at least half of the seeds) and
// "skip/MLP stay on the circle" (the same with any phase: on_circle). Comparable with ≥ 8 seeds per variant, every one
// trained to E3's precondition (one-step RMSE below small_error step lengths), as circle_findings requires.
Findings circle_regimes_findings(const std::vector<CircleRegimeResult>& results);

}  // namespace rankscope
