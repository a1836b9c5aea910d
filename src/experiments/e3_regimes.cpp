// E3 in training regimes: plain MSE vs denoising, with and without the input LayerNorm; see e3_regimes.hpp.
#include "rankscope/e3_regimes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace rankscope {

std::vector<CircleRegime> default_circle_regimes(double noise) {
    std::vector<CircleRegime> regimes;
    for (double sigma : {0.0, noise})
        for (bool layer_norm : {false, true})
            // No comma in a name: the trajectory CSV is read by gnuplot, which splits fields at every comma.
            regimes.push_back({fmt::format("{} / {}", sigma == 0 ? std::string("plain MSE") : fmt::format("denoising σ = {:g}", sigma),
                                           layer_norm ? "input LN" : "no input LN"),
                               sigma, layer_norm});
    return regimes;
}

std::vector<CircleRegimeResult> run_circle_regimes(const CircleSettings& base, const std::vector<CircleRegime>& regimes) {
    std::vector<CircleRegimeResult> results;
    for (const auto& regime : regimes) {
        CircleRegimeResult r;
        r.regime = regime;
        r.settings = base;
        r.settings.training.input_noise = regime.input_noise;
        r.settings.training.embedding_layer_norm = regime.embedding_layer_norm;
        r.result = run_circle_experiment(r.settings);
        results.push_back(std::move(r));
    }
    return results;
}

CircleRates circle_rates(const CircleResult& result, const std::string& variant, const CircleSettings& settings) {
    CircleRates rates;
    for (const auto& run : result.runs) {
        if (run.variant != variant) continue;
        ++rates.seeds;
        if (run.rollout.merge_step >= 0) ++rates.merged, rates.merge_steps.push_back(run.rollout.merge_step);
        rates.on_arcs += follows_circle_arcs(run, settings.arc_distance);
        rates.trained += std::isfinite(run.train_rmse) && run.train_rmse < settings.small_error * result.step_length;
        rates.worst_train_rmse = std::max(rates.worst_train_rmse, std::isfinite(run.train_rmse) ? run.train_rmse : HUGE_VAL);
    }
    return rates;
}

Table circle_regimes_table(const std::vector<CircleRegimeResult>& results) {
    Table table({{"regime", Table::Text}, {"input_noise", Table::Real}, {"embedding_layer_norm", Table::Text},
                 {"variant", Table::Text}, {"seeds", Table::Integer}, {"merged", Table::Integer}, {"merge_rate", Table::Real},
                 {"merge_steps", Table::Text}, {"on_arcs", Table::Integer}, {"arc_rate", Table::Real},
                 {"trained", Table::Integer}, {"worst_train_rmse", Table::Real}, {"step_length", Table::Real}});
    for (const auto& r : results)
        for (const auto& variant : r.settings.variants) {
            const CircleRates rates = circle_rates(r.result, variant, r.settings);
            table.add({r.regime.name, r.regime.input_noise, r.regime.embedding_layer_norm ? "yes" : "no", variant, rates.seeds,
                       rates.merged, rates.merge_rate(), fmt::format("{}", fmt::join(rates.merge_steps, " ")), rates.on_arcs,
                       rates.arc_rate(), rates.trained, rates.worst_train_rmse, r.result.step_length});
        }
    return table;
}

Findings circle_regimes_findings(const std::vector<CircleRegimeResult>& results) {
    Findings f;
    f.experiment = "E3";
    if (results.empty()) return f;
    const CircleSettings& any = results.front().settings;
    f.subject = fmt::format("the circle in {} training regimes, {} seeds per variant, {} recurrent steps", results.size(),
                            any.seeds.size(), any.steps);
    std::vector<std::string> sentences;
    for (const auto& r : results) {
        const auto& variants = r.settings.variants;
        const std::string setting = fmt::format("{}; {} seeds, {} points, at most {} epochs", r.regime.name, r.settings.seeds.size(),
                                                r.settings.training.train_count, r.settings.training.epochs);
        std::vector<std::string> rates_text;
        double worst_rmse = 0;
        int trained = 0, runs = 0;
        for (const auto& variant : variants) {
            const CircleRates rates = circle_rates(r.result, variant, r.settings);
            worst_rmse = std::max(worst_rmse, rates.worst_train_rmse);
            trained += rates.trained, runs += rates.seeds;
            rates_text.push_back(fmt::format("{} merged {}/{}{}, on the arcs {}/{}", variant, rates.merged, rates.seeds,
                                             rates.merge_steps.empty() ? "" : fmt::format(" (steps {})", fmt::join(rates.merge_steps, ", ")),
                                             rates.on_arcs, rates.seeds));
            f.key(fmt::format("{}: {}", r.regime.name, variant),
                  fmt::format("merge rate {}/{}, on the arcs {}/{}, trained {}/{}, worst one-step RMSE {}", rates.merged,
                              rates.seeds, rates.on_arcs, rates.seeds, rates.trained, rates.seeds,
                              quote_number(rates.worst_train_rmse, 2)));
        }
        // Comparable as E3's own checks: enough seeds for a rate, and every model trained to the one-step precondition
        // (a rollout of a map that was never learned says nothing about the architecture).
        const bool enough_seeds = r.settings.seeds.size() >= 8 && trained == runs;
        const std::string measured = fmt::format("{}; {}/{} models trained to one-step RMSE < {} step; worst {} ({} step lengths)",
                                                 fmt::join(rates_text, "; "), trained, runs, quote_number(r.settings.small_error, 2),
                                                 quote_number(worst_rmse, 2), quote_number(worst_rmse / r.result.step_length, 2));
        const bool has_san = std::find(variants.begin(), variants.end(), "SAN") != variants.end();
        if (has_san && variants.size() >= 2) {
            const CircleRates san = circle_rates(r.result, "SAN", r.settings);
            bool first = true;
            for (const auto& variant : variants)
                if (variant != "SAN") first = first && san.merge_rate() > circle_rates(r.result, variant, r.settings).merge_rate();
            f.check({"E3", fmt::format("Pure attention collapses first ({})", r.regime.name),
                     "§4.2: pure attention merges the two trajectories; skip and/or MLP keep them apart", measured,
                     "SAN's merge rate above every other variant's (≥ 8 seeds each, every model trained)", judge(enough_seeds, first), setting});
        }
        bool follow = true;
        int others = 0;
        for (const auto& variant : variants) {
            if (variant == "SAN") continue;
            ++others;
            const CircleRates rates = circle_rates(r.result, variant, r.settings);
            follow = follow && 2 * rates.on_arcs >= rates.seeds;
        }
        if (others > 0)
            f.check({"E3", fmt::format("Skip and/or MLP follow the arcs ({})", r.regime.name),
                     "§4.2 figure: with a skip and/or an MLP the trajectories stay on their arcs", measured,
                     "every variant with a skip or an MLP on the arcs in at least half of its seeds (≥ 8 seeds each, every "
                     "model trained)",
                     judge(enough_seeds, follow), setting});
        const CircleRates san = circle_rates(r.result, "SAN", r.settings);
        if (has_san)
            sentences.push_back(fmt::format("{}: SAN merged in {} of {} seeds; the other variants merged in {}", r.regime.name,
                                            san.merged, san.seeds, [&] {
                                                std::vector<std::string> parts;
                                                for (const auto& variant : variants)
                                                    if (variant != "SAN") {
                                                        const CircleRates o = circle_rates(r.result, variant, r.settings);
                                                        parts.push_back(fmt::format("{}/{} ({}; on the arcs {}/{})", o.merged,
                                                                                    o.seeds, variant, o.on_arcs, o.seeds));
                                                    }
                                                return fmt::format("{}", fmt::join(parts, ", "));
                                            }()));
    }
    f.reading = fmt::format("{}.", fmt::join(sentences, ". "));
    f.notes.push_back("Every regime trains the same variants from the same seeds with the same recipe except the input "
                      "noise and the input LayerNorm; the rates are the quantities the paper's one-seed figure cannot give. "
                      "A merge is ‖t1 − t2‖/mean‖t‖ below the merge tolerance within the rollout; on the arcs: finite, no "
                      "merge, mean distance to the arc point of the same step below 0.1 × radius.");
    return f;
}

}  // namespace rankscope
