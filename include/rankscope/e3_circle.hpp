#pragma once
// E3 (SPEC.md §4, paper §4.2): the circle. A 1-layer, 2-head attention model (d = 32) is trained to map two points
// walking two half-circle arcs (radius 0.3) to their next points, then fed its own output for `steps` steps from the
// first item. The paper's shape: pure attention (SAN) merges the two trajectories; with a skip and/or an MLP they
// follow the arcs. Every variant is trained over several seeds and the claim is judged on all of them.
//
//   CircleSettings settings;                       // the four variants, seeds {2, 3, 4}, 300 steps, defaults below
//   settings.checkpoints = "out/checkpoints";
//   CircleResult result = run_circle_experiment(settings);
//   Findings findings = circle_findings(result, settings);   // verdicts computed from result.runs
//
// No libtorch here: the result is plain numbers (the model lives in src/experiments/e3_circle.cpp).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/findings.hpp"
#include "rankscope/task_settings.hpp"

namespace rankscope {

constexpr double kCircleRadius = 0.3;

// The four model variants, in the paper's order: "SAN" (attention only: no skip, no LayerNorm anywhere in the layer),
// "SAN+skip" (X + SA(X)), "SAN+MLP" (MLP(SA(X)), no skip), "SAN+skip+MLP" (both sublayers with their skips).
const std::vector<std::string>& circle_variants();
// settings.skip / settings.mlp for `variant`; throws Error on an unknown name.
TaskSettings circle_variant_settings(TaskSettings settings, const std::string& variant);

struct CircleSettings {
    std::vector<std::string> variants = circle_variants();
    std::vector<std::uint64_t> seeds = {2, 3, 4};  // one trained model per variant and seed (init and epoch order)
    int steps = 300;                               // rollout length, start included (row 0 = the first item)
    TaskSettings training = default_task_settings("circle");  // seed, skip, mlp are set per run
    std::filesystem::path checkpoints;             // checkpoint folder; "" = train every time, write none
    bool retrain = false;                          // ignore existing checkpoints
    bool allow_nonfinite = false;                  // a NaN/Inf training loss keeps going instead of an Error
    // Criteria of the checks (circle_findings).
    double merge_tolerance = 1e-3;   // merged: ‖t1 − t2‖ / mean(‖t1‖, ‖t2‖) below this
    double arc_distance = 0.1 * kCircleRadius;  // "follows the arcs": mean distance to the arc point of the same step
    double small_error = 0.2;        // "trained": one-step RMSE below this fraction of the step length (2r sin(π/N))
};

// Point (step, token) of the true continuation from the first item: the arcs walked one training point per step,
// token 1 half a circle ahead (wrapping around the circle).
struct Point2 {
    double x = 0, y = 0;
};
Point2 circle_arc_point(int points, int step, int token);
// Distance a point moves in one step: 2 r sin(π / points).
double circle_step_length(int points);

// A rollout has run away from its first state with a coordinate beyond ±kRunawayCoordinate (3333 radii) or not finite;
// its measures stop there. The trajectory keeps what the model computed after it (it read NaN from there on, over
// finite values: 1057 at step 274 of a seed recorded as NaN).
constexpr double kRunawayCoordinate = 1e3;
// The measures of one rollout, trajectory[step][token], over its leading bounded states.
struct RolloutMeasures {
    double mean_distance_to_arcs = 0;  // mean over bounded states and both tokens of ‖p − arc point of that step‖
    double mean_radial_deviation = 0;  // mean over bounded states and both tokens of |‖p‖ − r| (distance to the circle)
    int merge_step = -1;               // first step with relative token distance < tolerance; −1 = never
    double final_relative_distance = 0;  // ‖t1 − t2‖ / mean(‖t1‖, ‖t2‖) at the last bounded state
    int bounded_steps = 0;             // leading states (the start included) with every coordinate finite and within
                                       // ±kRunawayCoordinate
};
RolloutMeasures measure_rollout(const std::vector<std::vector<Point2>>& trajectory, int points, double merge_tolerance);

struct CircleRun {
    std::string variant;
    std::uint64_t seed = 0;
    TaskSettings settings;             // exactly what this model was trained with
    std::string model;                 // the model configuration, JSON text
    std::int64_t parameters = 0;
    std::string checkpoint;
    bool reused = false;               // loaded from a checkpoint (then epochs = −1, train_seconds = NaN)
    int epochs = -1;                   // epochs run (≤ the budget settings.epochs when the target MSE was reached)
    double train_seconds = 0;
    std::vector<EpochRecord> history;
    double train_rmse = 0;             // one-step RMSE over the training items (per coordinate), after training
    double heldout_rmse = 0;           // the same on held-out items: points half a step between the training points
    RolloutMeasures rollout;
    std::vector<std::vector<Point2>> trajectory;  // [steps][2 tokens]
};

struct CircleResult {
    int points = 0;                    // points on the circle (= training.train_count)
    double step_length = 0;            // circle_step_length(points)
    std::vector<CircleRun> runs;       // variant-major, in settings order, then seeds
};

CircleResult run_circle_experiment(const CircleSettings& settings);

// The run's rollout stayed finite, never merged, and its mean distance to the arc point of the same step is below
// `limit` (CircleSettings::arc_distance): "follows the arcs".
bool follows_circle_arcs(const CircleRun& run, double limit);
// The same with the distance to the circle, |‖p‖ − r|, in place of the arc point's: on the circle in any phase.
bool stays_on_circle(const CircleRun& run, double limit);

// The rollout ended early: a token left the floats (runs away) before the last step.
bool circle_run_diverged(const CircleRun& run);

// The circle figures draw x and y in [−kCirclePlotLimit, kCirclePlotLimit] (the arcs have radius 0.3).
constexpr double kCirclePlotLimit = 0.5;
// Lines for a figure panel about the rollouts of `variant` that its fixed axes cannot show: runaways ("2/3 ran away
// (1 after merging)"; one seed: "ran away after 37 steps", "then ran away ..." after a merge) and finite
// rollouts beyond the axes ("1/3 left the plot (up to 0.624)"); empty when every rollout stayed finite and inside.
std::vector<std::string> circle_escape_notes(const CircleResult& result, const std::string& variant);

// The figure's words per variant (in `variants` order). Title: with several seeds the merges over all of them
// ("SAN+skip: 0/3 merged"), with one its outcome ("SAN: merged at step 14", "SAN: no merge"); short enough for the
// 300-unit panel. Notes, drawn inside the panel: circle_escape_notes (the titles alone once hid runaways beside
// "0/3 merged", and rollouts that left the axes).
struct CirclePanelText {
    std::vector<std::string> titles;
    std::vector<std::vector<std::string>> notes;
};
CirclePanelText circle_panel_text(const CircleResult& result, const std::vector<std::string>& variants);

// The E3 checks (experiment "E3"): the training precondition, SAN merges in every seed, and per other variant: the
// trajectories follow the arcs in every seed. Key numbers per variant, a reading generated from the numbers, notes.
Findings circle_findings(const CircleResult& result, const CircleSettings& settings);

}  // namespace rankscope
