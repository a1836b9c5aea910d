// E3 in training regimes: the rates from the runs, and the regime judges flipping on contradicting results.
#include <gtest/gtest.h>

#include <cmath>

#include "rankscope/e3_regimes.hpp"
#include "rankscope/error.hpp"
#include "verdict_of.hpp"

using namespace rankscope;
using rankscope::test_support::verdict_of;

namespace {

// One regime's result: `merged[v]` of 8 seeds of variant v merge (at step first_step[v] + seed, 10 + seed by default),
// the rest follow the arcs (mean distance 0.001, on the circle: radial deviation 0.001) or, for `off[v]` of them, drift
// off the arcs (0.2) and, unless `phase_only`, off the circle too (radial 0.2).
CircleRegimeResult synthetic_regime(const std::string& name, const std::vector<int>& merged, const std::vector<int>& off,
                                    std::vector<int> first_step = {}, bool phase_only = false) {
    if (first_step.empty()) first_step.assign(merged.size(), 10);
    CircleRegimeResult r;
    r.regime = {name, 0, false};
    r.settings.seeds = {0, 1, 2, 3, 4, 5, 6, 7};
    r.settings.steps = 20;
    r.result.points = 1000;
    r.result.step_length = circle_step_length(1000);
    for (std::size_t v = 0; v < r.settings.variants.size(); ++v)
        for (std::uint64_t seed : r.settings.seeds) {
            CircleRun run;
            run.variant = r.settings.variants[v];
            run.seed = seed;
            run.train_rmse = 1e-4;
            run.trajectory.assign(20, {Point2{}, Point2{}});
            run.rollout.bounded_steps = 20;
            const int i = static_cast<int>(seed);
            run.rollout.merge_step = i < merged[v] ? first_step[v] + i : -1;
            const bool drifts = i >= merged[v] && i < merged[v] + off[v];
            run.rollout.mean_distance_to_arcs = drifts ? 0.2 : 0.001;
            run.rollout.mean_radial_deviation = drifts && !phase_only ? 0.2 : 0.001;
            r.result.runs.push_back(run);
        }
    return r;
}

}  // namespace

TEST(CircleRegimes, RatesCountMergesAndArcsPerVariant) {
    const auto r = synthetic_regime("plain", {6, 1, 2, 0}, {0, 2, 0, 8});
    const CircleRates san = circle_rates(r.result, "SAN", r.settings);
    EXPECT_EQ(san.seeds, 8);
    EXPECT_EQ(san.merged, 6);
    EXPECT_EQ(san.merge_steps, (std::vector<int>{10, 11, 12, 13, 14, 15}));
    EXPECT_EQ(san.on_arcs, 2);
    EXPECT_DOUBLE_EQ(san.merge_rate(), 0.75);
    const CircleRates skip = circle_rates(r.result, "SAN+skip", r.settings);
    EXPECT_EQ(skip.on_arcs, 5);  // 8 − 1 merged − 2 off
    EXPECT_EQ(circle_rates(r.result, "SAN+skip+MLP", r.settings).on_arcs, 0);
    EXPECT_EQ(skip.on_circle, 5);
    EXPECT_DOUBLE_EQ(san.median_merge_step(), 12.5);  // steps 10..15
    EXPECT_DOUBLE_EQ(circle_rates(r.result, "SAN+skip", r.settings).median_merge_step(), 10);
    EXPECT_TRUE(std::isnan(circle_rates(r.result, "SAN+skip+MLP", r.settings).median_merge_step()));
    // Over all 8 seeds, never = +∞: SAN's sorted times 10..15, ∞, ∞ → (13 + 14) / 2; one merge of 8 → never.
    EXPECT_DOUBLE_EQ(san.median_time_to_merge(), 13.5);
    EXPECT_TRUE(std::isinf(circle_rates(r.result, "SAN+skip", r.settings).median_time_to_merge()));
    // Off the arcs in phase only: still on the circle.
    const auto slipped = synthetic_regime("slip", {6, 1, 2, 0}, {0, 2, 0, 8}, {}, true);
    EXPECT_EQ(circle_rates(slipped.result, "SAN+skip+MLP", slipped.settings).on_arcs, 0);
    EXPECT_EQ(circle_rates(slipped.result, "SAN+skip+MLP", slipped.settings).on_circle, 8);
    const Table table = circle_regimes_table({r});
    ASSERT_EQ(table.rows(), 4u);
    EXPECT_EQ(table.column("merge_steps").texts[0], "10 11 12 13 14 15");
    EXPECT_DOUBLE_EQ(table.column("arc_rate").reals[1], 5.0 / 8);
    EXPECT_DOUBLE_EQ(table.column("circle_rate").reals[1], 5.0 / 8);
    EXPECT_DOUBLE_EQ(table.column("median_merge_step").reals[0], 12.5);
    EXPECT_DOUBLE_EQ(table.column("median_time_to_merge").reals[0], 13.5);
    EXPECT_TRUE(std::isnan(table.column("median_time_to_merge").reals[1]));  // missing: fewer than half merged
    ASSERT_EQ(default_circle_regimes(0.005).size(), 4u);
    EXPECT_EQ(default_circle_regimes(0.005)[3].name, "denoising σ = 0.005 / input LN");
}

TEST(CircleRegimes, JudgesFlipOnContradictingResults) {
    const std::string first = "Pure attention collapses first", follow = "follow the arcs";
    const std::string earliest = "Pure attention collapses earliest", circle = "stay on the circle";
    // SAN merges most, the others stay on the arcs in ≥ half their seeds.
    Findings f = circle_regimes_findings({synthetic_regime("a", {7, 1, 2, 0}, {0, 0, 2, 0})});
    EXPECT_EQ(verdict_of(f, first), Verdict::Reproduced);
    EXPECT_EQ(verdict_of(f, follow), Verdict::Reproduced);
    EXPECT_EQ(verdict_of(f, circle), Verdict::Reproduced);
    // Over all seeds SAN (7 of 8 from step 10) is earlier than variants where fewer than half merged, although
    // SAN+skip's one merge came at step 10 too: one seed does not make a variant early.
    EXPECT_EQ(verdict_of(f, earliest), Verdict::Reproduced);
    // SAN merges at steps 5..10, SAN+skip as often from step 20: earliest, though not more often.
    f = circle_regimes_findings({synthetic_regime("t", {6, 6, 2, 0}, {0, 0, 0, 0}, {5, 20, 20, 20})});
    EXPECT_EQ(verdict_of(f, earliest), Verdict::Reproduced);
    EXPECT_EQ(verdict_of(f, first), Verdict::NotReproduced);
    // A variant merging as often and earlier flips it; SAN merging in fewer than half its seeds is never earliest,
    // however early those merges come.
    f = circle_regimes_findings({synthetic_regime("u", {6, 6, 2, 0}, {0, 0, 0, 0}, {5, 1, 20, 20})});
    EXPECT_EQ(verdict_of(f, earliest), Verdict::NotReproduced);
    f = circle_regimes_findings({synthetic_regime("v", {3, 0, 0, 0}, {0, 0, 0, 0}, {1, 20, 20, 20})});
    EXPECT_EQ(verdict_of(f, earliest), Verdict::NotReproduced);
    f = circle_regimes_findings({synthetic_regime("v0", {0, 6, 2, 0}, {0, 0, 0, 0}, {5, 20, 20, 20})});
    EXPECT_EQ(verdict_of(f, earliest), Verdict::NotReproduced);
    // Off the arcs in phase only (5 of 8 seeds of SAN+skip+MLP): the arcs judge fails, the circle judge holds; off the
    // circle too, both fail.
    f = circle_regimes_findings({synthetic_regime("w", {7, 0, 0, 0}, {0, 0, 0, 5}, {}, true)});
    EXPECT_EQ(verdict_of(f, follow), Verdict::NotReproduced);
    EXPECT_EQ(verdict_of(f, circle), Verdict::Reproduced);
    f = circle_regimes_findings({synthetic_regime("w", {7, 0, 0, 0}, {0, 0, 0, 5})});
    EXPECT_EQ(verdict_of(f, circle), Verdict::NotReproduced);
    // SAN merges more often than each other variant, but by one seed (5 of 8 vs 4 of 8): not first (Fisher p = 0.5).
    f = circle_regimes_findings({synthetic_regime("s", {5, 4, 4, 4}, {0, 0, 0, 0})});
    EXPECT_EQ(verdict_of(f, first), Verdict::NotReproduced);
    // A variant with a skip merges as often as SAN: not first.
    f = circle_regimes_findings({synthetic_regime("b", {6, 6, 2, 0}, {0, 0, 0, 0})});
    EXPECT_EQ(verdict_of(f, first), Verdict::NotReproduced);
    // SAN+skip+MLP off the arcs in 5 of 8 seeds.
    f = circle_regimes_findings({synthetic_regime("c", {7, 0, 0, 0}, {0, 0, 0, 5})});
    EXPECT_EQ(verdict_of(f, follow), Verdict::NotReproduced);
    // Fewer than 8 seeds: rates too coarse to judge.
    auto few = synthetic_regime("d", {7, 1, 2, 0}, {0, 0, 2, 0});
    few.settings.seeds.resize(4);
    f = circle_regimes_findings({few});
    EXPECT_EQ(verdict_of(f, first), Verdict::NotComparable);
    // A model that missed the one-step precondition makes the regime's rates not comparable (as E3's own checks).
    auto untrained = synthetic_regime("e", {7, 1, 2, 0}, {0, 0, 2, 0});
    untrained.result.runs[9].train_rmse = 0.5 * untrained.result.step_length;
    f = circle_regimes_findings({untrained});
    EXPECT_EQ(verdict_of(f, first), Verdict::NotComparable);
    EXPECT_EQ(verdict_of(f, follow), Verdict::NotComparable);
    EXPECT_EQ(verdict_of(f, earliest), Verdict::NotComparable);
    EXPECT_EQ(verdict_of(f, circle), Verdict::NotComparable);
    EXPECT_EQ(circle_rates(untrained.result, "SAN+skip", untrained.settings).trained, 7);
    // Four checks per regime.
    f = circle_regimes_findings({synthetic_regime("x", {7, 1, 2, 0}, {0, 0, 0, 0}), synthetic_regime("y", {1, 1, 1, 1}, {0, 0, 0, 0})});
    EXPECT_EQ(f.checks.size(), 8u);
    EXPECT_EQ(verdict_of(f, first + " (y)"), Verdict::NotReproduced);
}
