// rankscope width-depth — E5: models with (nearly) equal parameter counts, shallow-and-wide vs deep-and-narrow,
// trained on the same task: accuracy, residual per layer, and path-length distribution side by side.
#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "rankscope/e5_width_depth.hpp"
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

void run_width_depth(const WidthDepthOptions& options, const TaskSettings& base) {
    const Provenance provenance = start_run(options.common);
    const std::filesystem::path out = options.common.out;
    std::filesystem::create_directories(out);
    const std::filesystem::path checkpoints = options.checkpoints.empty() ? out / "checkpoints" : std::filesystem::path(options.checkpoints);
    WidthDepthSettings experiment;
    experiment.base = base;
    experiment.depths = options.layers;
    experiment.work_dir = out;
    experiment.checkpoints = checkpoints;
    experiment.retrain = options.retrain;
    experiment.allow_nonfinite = options.common.allow_nonfinite;
    const WidthDepthResult result = run_width_depth_experiment(experiment);
    const std::int64_t target = result.target_parameters;
    const double majority = result.majority_accuracy;

    CsvTable models, residuals, paths;
    models.columns = {"task", "layers", "heads", "d_model", "parameters", "whole_model_accuracy", "majority_accuracy",
                      "mean_path_length", "train_seconds"};
    residuals.columns = {"task", "layers", "d_model", "layer", "relative_depth", "mean", "std", "n"};
    paths.columns = {"task", "layers", "d_model", "k", "paths", "share"};
    nlohmann::json summary = nlohmann::json::array();
    for (const auto& m : result.models) {
        const int layers = m.settings.layers;
        const TaskSettings& settings = m.settings;
        models.add({base.task, std::to_string(layers), std::to_string(settings.heads), std::to_string(settings.d_model),
                    std::to_string(m.parameters), format_number(m.accuracy), format_number(majority),
                    format_number(m.mean_path_length), std::isnan(m.train_seconds) ? "" : format_number(m.train_seconds)});
        for (const auto& r : m.residual)
            residuals.add({base.task, std::to_string(layers), std::to_string(settings.d_model), std::to_string(r.layer),
                           format_number(static_cast<double>(r.layer) / layers), format_number(r.mean), format_number(r.std),
                           std::to_string(r.n)});
        for (const auto& r : m.paths)
            paths.add({base.task, std::to_string(layers), std::to_string(settings.d_model), std::to_string(r.length),
                       format_number(r.count), format_number(r.share)});
        summary.push_back({{"layers", layers}, {"d_model", settings.d_model}, {"parameters", m.parameters},
                           {"whole_model_accuracy", m.accuracy}, {"mean_path_length", m.mean_path_length},
                           {"checkpoint", m.checkpoint}, {"reused_checkpoint", m.reused},
                           {"train_seconds", std::isnan(m.train_seconds) ? nlohmann::json(nullptr) : nlohmann::json(m.train_seconds)}});
        std::cout << fmt::format("{} L={:<3} d={:<4} {} parameters: accuracy {:.4f}, mean path length {:.2f}{}\n", base.task,
                                 layers, settings.d_model, m.parameters, m.accuracy, m.mean_path_length,
                                 m.reused ? " (checkpoint reused)" : fmt::format(", trained in {:.1f} s", m.train_seconds));
    }
    write_findings(out, width_depth_findings(result, experiment), provenance);
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
    const std::vector<std::string> figures =
        render_figure(out, width_depth_figure(base.task, depths), csv_provenance_lines(provenance));
    write_manifest(out, provenance,
                   {{"task", base.task},
                    {"outputs", {"findings.json", "verdicts.csv", "width_depth.csv", "width_depth_residual.csv",
                                 "width_depth_paths.csv", "width_depth.json"}},
                    {"figures", figures}});
}

}  // namespace

std::function<void()> setup_width_depth(CLI::App& command) {
    auto options = std::make_shared<WidthDepthOptions>();
    // --task first, as `rankscope task`'s positional: the first missing requirement is the one said.
    command.add_option("--task", options->task, "sort or hull")->required()->check(CLI::IsMember({"sort", "hull"}));
    add_common_options(command, options->common, OutFolder::required());
    add_device_option(command, options->common);
    command.add_option("--depths", options->layers,
                       "Layer counts to compare; each gets the width whose parameter count is closest to the base model's")
        ->delimiter(',')
        ->capture_default_str()
        ->transform(IntRange(1, 48));
    auto flags = std::make_shared<TaskSettingFlags>(command, std::vector<std::string>{"sort", "hull"});
    command.add_option("--checkpoints", options->checkpoints, "Checkpoint folder (default OUT/checkpoints)")->check(FolderOrNew());
    command.add_flag("--retrain", options->retrain, "Train even when a checkpoint with the same settings exists");
    return [options, flags] {
        for (int layers : options->layers)
            if (layers < 1) throw Error(fmt::format("layer count {} is not positive", layers), "--depths");
        TaskSettings base = flags->settings_for(options->task, options->common.seed);
        base.device = options->common.device;
        run_width_depth(*options, base);
    };
}

}  // namespace rankscope::cli
