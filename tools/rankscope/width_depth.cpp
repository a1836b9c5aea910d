// rankscope width-depth — E5: models with (nearly) equal parameter counts, shallow-and-wide vs deep-and-narrow,
// trained on the same task: accuracy, residual per layer, and path-length distribution side by side.
#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/paths.hpp"
#include "rankscope/tasks.hpp"
#include "task_settings_options.hpp"

namespace rankscope::cli {
namespace {

struct WidthDepthOptions {
    CommonOptions common;
    std::string task;
    std::vector<int> layers = {2, 6, 12};
    std::string checkpoints;
    bool retrain = false;
};

// The width (a multiple of the head count) whose model at `layers` layers has the parameter count closest to `target`.
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

void run_width_depth(const WidthDepthOptions& options, const TaskSettings& base) {
    const Provenance provenance = start_run(options.common);
    const std::filesystem::path out = options.common.out;
    std::filesystem::create_directories(out);
    const std::filesystem::path checkpoints = options.checkpoints.empty() ? out / "checkpoints" : std::filesystem::path(options.checkpoints);
    const TaskSplits data = make_task_data(base, out);
    TaskModel reference(model_config_for(base, data));
    const std::int64_t target = parameter_count(reference);

    CsvTable models, residuals, paths;
    models.columns = {"task", "layers", "heads", "d_model", "parameters", "whole_model_accuracy", "majority_accuracy",
                      "mean_path_length", "train_seconds"};
    residuals.columns = {"task", "layers", "d_model", "layer", "relative_depth", "mean", "std"};
    paths.columns = {"task", "layers", "d_model", "k", "paths", "share"};
    const double majority = majority_accuracy(data.train, data.eval, data.classes);
    nlohmann::json summary = nlohmann::json::array();
    for (int layers : options.layers) {
        TaskSettings settings = base;
        settings.layers = layers;
        settings.d_model = matching_width(base, data, layers, target);
        TrainedTask trained = train_or_load(settings, data, checkpoints, options.retrain, options.common.allow_nonfinite);
        const double accuracy = token_accuracy(trained.model, data.eval);
        const auto distribution = path_length_distribution(layers, settings.heads);
        const double mean_length = mean_path_length(distribution, false);
        const std::int64_t parameters = parameter_count(trained.model);
        models.add({base.task, std::to_string(layers), std::to_string(settings.heads), std::to_string(settings.d_model),
                    std::to_string(parameters), format_number(accuracy), format_number(majority), format_number(mean_length),
                    trained.reused ? "" : format_number(trained.train_seconds)});
        for (const auto& r : residual_by_layer(trained.model, data.eval))
            residuals.add({base.task, std::to_string(layers), std::to_string(settings.d_model), std::to_string(r.layer),
                           format_number(static_cast<double>(r.layer) / layers), format_number(r.mean), format_number(r.std)});
        for (const auto& r : distribution)
            paths.add({base.task, std::to_string(layers), std::to_string(settings.d_model), std::to_string(r.length),
                       format_number(r.count), format_number(r.share)});
        summary.push_back({{"layers", layers}, {"d_model", settings.d_model}, {"parameters", parameters},
                           {"whole_model_accuracy", accuracy}, {"mean_path_length", mean_length},
                           {"checkpoint", trained.checkpoint}, {"reused_checkpoint", trained.reused},
                           {"train_seconds", trained.reused ? nlohmann::json(nullptr) : nlohmann::json(trained.train_seconds)}});
        std::cout << fmt::format("{} L={:<3} d={:<4} {} parameters: accuracy {:.4f}, mean path length {:.2f}{}\n", base.task,
                                 layers, settings.d_model, parameters, accuracy, mean_length,
                                 trained.reused ? " (checkpoint reused)" : fmt::format(", trained in {:.1f} s", trained.train_seconds));
    }
    write_csv_atomically(out / "width_depth.csv", models, provenance);
    write_csv_atomically(out / "width_depth_residual.csv", residuals, provenance);
    write_csv_atomically(out / "width_depth_paths.csv", paths, provenance);
    write_json_atomically(out / "width_depth.json",
                          {{"task", base.task}, {"target_parameters", target}, {"majority_accuracy", majority},
                           {"base_settings", base.to_json()}, {"models", summary}},
                          provenance);

    std::vector<std::pair<int, std::string>> depths;
    for (std::size_t i = 0; i < options.layers.size(); ++i)
        depths.emplace_back(options.layers[i], fmt::format("L={} (d={}), accuracy {:.3f}", options.layers[i], models.rows[i][3],
                                                           std::stod(models.rows[i][5])));
    render_figure(out, width_depth_figure(base.task, depths), csv_provenance_lines(provenance));
    write_manifest(out, provenance, {{"subcommand", "width-depth"}, {"task", base.task}});
}

}  // namespace

std::function<void()> setup_width_depth(CLI::App& command) {
    auto options = std::make_shared<WidthDepthOptions>();
    add_common_options(command, options->common, true);
    command.add_option("--task", options->task, "sort or hull")->required()->check(CLI::IsMember({"sort", "hull"}));
    command.add_option("--depths", options->layers,
                       "Layer counts to compare; each gets the width whose parameter count is closest to the base model's")
        ->delimiter(',')
        ->capture_default_str()
        ->transform(IntRange(1, 48));
    auto flags = std::make_shared<TaskSettingFlags>(command);
    command.add_option("--checkpoints", options->checkpoints, "Checkpoint folder (default OUT/checkpoints)");
    command.add_flag("--retrain", options->retrain, "Train even when a checkpoint with the same settings exists");
    return [options, flags] {
        for (int layers : options->layers)
            if (layers < 1) throw Error("--depths: layer counts must be positive");
        run_width_depth(*options, flags->settings_for(options->task, options->common.seed));
    };
}

}  // namespace rankscope::cli
