// E3 in training regimes: the rates from the runs, and the regime judges flipping on contradicting results.
#include <gtest/gtest.h>

#include "rankscope/e3_regimes.hpp"
#include "rankscope/error.hpp"
#include "verdict_of.hpp"

using namespace rankscope;
using rankscope::test_support::verdict_of;

namespace {

// One regime's result: `merged[v]` of 8 seeds of variant v merge (at step 10 + seed), the rest follow the arcs
// (mean distance 0.001) or, for `off[v]` of them, drift off (0.2).
CircleRegimeResult synthetic_regime(const std::string& name, const std::vector<int>& merged, const std::vector<int>& off) {
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
            run.rollout.finite_steps = 20;
            const int i = static_cast<int>(seed);
            run.rollout.merge_step = i < merged[v] ? 10 + i : -1;
            run.rollout.mean_distance_to_arcs = i >= merged[v] && i < merged[v] + off[v] ? 0.2 : 0.001;
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
    const Table table = circle_regimes_table({r});
    ASSERT_EQ(table.rows(), 4u);
    EXPECT_EQ(table.column("merge_steps").texts[0], "10 11 12 13 14 15");
    EXPECT_DOUBLE_EQ(table.column("arc_rate").reals[1], 5.0 / 8);
    ASSERT_EQ(default_circle_regimes(0.005).size(), 4u);
    EXPECT_EQ(default_circle_regimes(0.005)[3].name, "denoising σ = 0.005 / input LN");
}

TEST(CircleRegimes, JudgesFlipOnContradictingResults) {
    const std::string first = "Pure attention collapses first", follow = "follow the arcs";
    // SAN merges most, the others stay on the arcs in ≥ half their seeds.
    Findings f = circle_regimes_findings({synthetic_regime("a", {7, 1, 2, 0}, {0, 0, 2, 0})});
    EXPECT_EQ(verdict_of(f, first), Verdict::Reproduced);
    EXPECT_EQ(verdict_of(f, follow), Verdict::Reproduced);
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
    EXPECT_EQ(circle_rates(untrained.result, "SAN+skip", untrained.settings).trained, 7);
    // One check pair per regime.
    f = circle_regimes_findings({synthetic_regime("x", {7, 1, 2, 0}, {0, 0, 0, 0}), synthetic_regime("y", {1, 1, 1, 1}, {0, 0, 0, 0})});
    EXPECT_EQ(f.checks.size(), 4u);
    EXPECT_EQ(verdict_of(f, first + " (y)"), Verdict::NotReproduced);
}
