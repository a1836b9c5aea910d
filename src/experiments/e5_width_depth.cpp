#include "rankscope/e5_width_depth.hpp"

#include <fmt/ranges.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "rankscope/e4_path_effectiveness.hpp"
#include "rankscope/warnings.hpp"

namespace rankscope {

int matching_width(TaskSettings settings, const TaskSplits& data, int layers, std::int64_t target) {
    settings.layers = layers;
    int best = settings.heads;
    std::int64_t best_gap = -1;
    for (int d = settings.heads; d <= 1024; d += settings.heads) {
        settings.d_model = d;
        TaskModel model(model_config_for(settings, data));
        const std::int64_t gap = std::abs(parameter_count(model) - target);
        if (best_gap < 0 || gap < best_gap) best = d, best_gap = gap;
        if (parameter_count(model) > target) break;
    }
    return best;
}

namespace {

// E5 compares models of equal size: a depth whose nearest width (a multiple of the head count, at least one
// dimension a head) misses the target by more than kSizeTolerance is said so (48 layers of 64 heads: 806794
// parameters against 102538, presented without a word).
constexpr double kSizeTolerance = 0.1;
std::vector<std::string> unequal_size_notes(const WidthDepthResult& result) {
    std::vector<std::string> notes;
    for (const auto& m : result.models) {
        const double ratio = static_cast<double>(m.parameters) / static_cast<double>(result.target_parameters);
        if (std::fabs(ratio - 1) > kSizeTolerance)
            notes.push_back(fmt::format("L = {} (d = {}) has {} parameters, {}× the target {}: no width that is a multiple "
                                        "of the {} heads comes within {}% of it, so this depth is not compared at equal size.",
                                        m.settings.layers, m.settings.d_model, m.parameters, quote_number(ratio),
                                        result.target_parameters, m.settings.heads, std::lround(100 * kSizeTolerance)));
    }
    return notes;
}

}  // namespace

WidthDepthResult run_width_depth_experiment(const WidthDepthSettings& settings) {
    const TaskSplits data = make_task_data(settings.base, settings.work_dir);
    TaskModel reference(model_config_for(settings.base, data));
    WidthDepthResult result;
    result.target_parameters = parameter_count(reference);
    result.majority_accuracy = majority_accuracy(data.train, data.eval, data.classes);
    for (int layers : settings.depths) {
        WidthDepthModel m;
        m.settings = settings.base;
        m.settings.layers = layers;
        m.settings.d_model = matching_width(settings.base, data, layers, result.target_parameters);
        TrainedTask trained = train_or_load(m.settings, data, settings.checkpoints, settings.retrain, settings.allow_nonfinite);
        m.accuracy = token_accuracy(trained.model, data.eval);
        m.paths = path_length_distribution(layers, m.settings.heads);
        m.mean_path_length = mean_path_length(m.paths, false);
        m.parameters = parameter_count(trained.model);
        m.residual = residual_by_layer(trained.model, data.eval);
        m.reused = trained.reused;
        m.train_seconds = trained.history_known ? trained.train_seconds : NAN;
        m.checkpoint = trained.checkpoint;
        result.models.push_back(std::move(m));
    }
    for (const std::string& note : unequal_size_notes(result)) warn(note);
    return result;
}

Findings width_depth_findings(const WidthDepthResult& result, const WidthDepthSettings& settings) {
    Findings f;
    f.experiment = "E5";
    // The matched widths come in steps of the head count, so the models' sizes straddle the target: say their range,
    // the models run's only (the target's own count was in it even when no model had it: "180098–181253" for models of
    // 181001 and 181253).
    std::int64_t fewest = result.models.empty() ? result.target_parameters : result.models.front().parameters;
    std::int64_t most = fewest;
    for (const auto& m : result.models) fewest = std::min(fewest, m.parameters), most = std::max(most, m.parameters);
    const std::string sizes =
        fewest == most && most == result.target_parameters ? fmt::format("{} parameters", most)
        : fewest == most ? fmt::format("{} parameters (target {})", most, result.target_parameters)
                         : fmt::format("{}–{} parameters (target {})", fewest, most, result.target_parameters);
    f.subject = fmt::format("width vs depth at {}, {}, {} epoch{} on {} items{}", sizes, settings.base.task,
                            settings.base.epochs, settings.base.epochs == 1 ? "" : "s", settings.base.train_count,
                            at_paper_scale(settings.base) ? "" : " (below paper scale)");
    std::vector<std::string> parts;
    const WidthDepthModel *best = nullptr, *runner_up = nullptr;
    for (const auto& m : result.models) {
        f.key(fmt::format("L = {}, d = {} ({} parameters)", m.settings.layers, m.settings.d_model, m.parameters),
              fmt::format("accuracy {}, mean path length {}", quote_number(m.accuracy), quote_number(m.mean_path_length)));
        parts.push_back(fmt::format("L = {} (d = {}): accuracy {}, mean path length {}", m.settings.layers, m.settings.d_model,
                                    quote_number(m.accuracy), quote_number(m.mean_path_length)));
        if (!best || m.accuracy > best->accuracy) runner_up = best, best = &m;
        else if (!runner_up || m.accuracy > runner_up->accuracy) runner_up = &m;
    }
    f.reading = fmt::format("At {} on {} (majority level {}): {}.", sizes, settings.base.task,
                            quote_number(result.majority_accuracy), fmt::format("{}", fmt::join(parts, "; ")));
    // One trained model per depth: the ranking's margin is stated, and that no spread between seeds backs it.
    if (best && runner_up && best->accuracy == runner_up->accuracy)
        f.reading += fmt::format(" L = {} and L = {} are the most accurate, equally.", best->settings.layers,
                                 runner_up->settings.layers);
    else if (best && runner_up)
        f.reading += fmt::format(" The most accurate is L = {} (d = {}), {} above L = {}; one training run per depth, so "
                                 "the spread between seeds is not measured.",
                                 best->settings.layers, best->settings.d_model,
                                 quote_number(best->accuracy - runner_up->accuracy), runner_up->settings.layers);
    for (const std::string& note : unequal_size_notes(result)) f.notes.push_back(note);
    f.notes.push_back("The paper gives no number for E5's accuracies; they are reported, not judged. The mean path length is "
                      "the count's L·H/(H+1) (Binomial(L, H/(H+1)), as E6), not measured on the trained models: it grows "
                      "with L by construction, so it is reported, not judged either.");
    return f;
}

}  // namespace rankscope
