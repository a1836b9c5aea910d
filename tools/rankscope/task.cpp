// rankscope task — E3 (circle trajectories) and E4 (path effectiveness) on models rankscope trains itself.
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>
#include <map>

#include "common.hpp"
#include "task_settings_options.hpp"
#include "rankscope/error.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/io.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/tasks.hpp"
#include "rankscope/tensor_file.hpp"

namespace rankscope::cli {
namespace {

struct TaskOptions {
    CommonOptions common;
    std::string task;
    TaskSettings settings;  // filled from the task's defaults, then the flags given
    std::string checkpoints;
    bool retrain = false;
    std::vector<int> n_paths = {5, 20};
    int repeats = 5;
    std::string sub_path = "no";
    std::vector<std::string> circle_variants = {"SAN", "SAN+skip", "SAN+MLP", "SAN+skip+MLP"};
    int steps = 300;
};

std::filesystem::path checkpoint_dir(const TaskOptions& options, const std::filesystem::path& out) {
    return options.checkpoints.empty() ? out / "checkpoints" : std::filesystem::path(options.checkpoints);
}

void write_training(const std::filesystem::path& path, const std::string& label, const TrainedTask& trained,
                    bool classification, const Provenance& provenance) {
    CsvTable table;
    table.columns = {"model", "epoch", "loss", classification ? "train_accuracy" : "train_mse", "seconds"};
    for (const auto& e : trained.history)
        table.add({label, std::to_string(e.epoch), format_number(e.loss), format_number(e.train_metric), format_number(e.seconds)});
    write_csv_atomically(path, table, provenance);
}

// The evaluation batch, so that any number of the run can be recomputed outside rankscope.
void write_eval_data(const std::filesystem::path& path, const TaskBatch& batch, const Provenance& provenance) {
    NamedTensors tensors = {{"inputs", batch.inputs}, {"targets", batch.targets}};
    if (batch.key_bias.defined()) tensors.emplace_back("key_bias", batch.key_bias);
    write_tensors(path.string(), tensors, {{"command", provenance.command}, {"version", version_string()}});
}

nlohmann::json training_summary(const TrainedTask& trained, TaskModel& model) {
    return {{"checkpoint", trained.checkpoint},
            {"reused_checkpoint", trained.reused},
            {"train_seconds", trained.reused ? nlohmann::json(nullptr) : nlohmann::json(trained.train_seconds)},
            {"parameters", parameter_count(model)},
            {"model", model->config.to_json()}};
}

// E3: train the four variants, roll each out for `steps` steps from the first item, draw the trajectories.
void run_circle(const TaskOptions& options, const Provenance& provenance, const std::filesystem::path& out) {
    CsvTable trajectories;
    trajectories.columns = {"variant", "step", "token", "x", "y", "target_x", "target_y"};
    nlohmann::json variants = nlohmann::json::object();
    for (const auto& variant : options.circle_variants) {
        TaskSettings settings = options.settings;
        settings.skip = variant.find("skip") != std::string::npos;
        settings.mlp = variant.find("MLP") != std::string::npos;
        if (variant != "SAN" && !settings.skip && !settings.mlp) throw Error("unknown circle variant '" + variant + "'");
        const TaskSplits data = make_task_data(settings, out);
        TrainedTask trained = train_or_load(settings, data, checkpoint_dir(options, out), options.retrain, options.common.allow_nonfinite);
        const at::Tensor path = circle_rollout(trained.model, data.train.inputs.narrow(0, 0, 1), options.steps);
        // The true continuation: the same arcs, one point per step (wrapping around the circle).
        const int points = settings.train_count;
        double mean_error = 0;
        int finite_steps = 0;
        for (int step = 0; step < options.steps && torch::isfinite(path[step]).all().item<bool>(); ++step) finite_steps = step + 1;
        if (finite_steps < options.steps && !options.common.allow_nonfinite)
            throw Error(fmt::format("the rollout is NaN/Inf from step {} of {} (pass --allow-nonfinite to keep it)", finite_steps,
                                    options.steps),
                        "circle variant " + variant);
        // Rows grouped by token, then step, so that gnuplot draws each trajectory as one connected line.
        for (int token = 0; token < 2; ++token) {
            for (int step = 0; step < options.steps; ++step) {
                const int t = (step + token * (points / 2)) % points;
                const double angle = 2.0 * M_PI * t / points, tx = 0.3 * std::cos(angle), ty = 0.3 * std::sin(angle);
                const double x = path[step][token][0].item<double>(), y = path[step][token][1].item<double>();
                if (step < finite_steps) mean_error += std::hypot(x - tx, y - ty) / (2.0 * finite_steps);
                trajectories.add({variant, std::to_string(step), std::to_string(token), format_number(x), format_number(y),
                                  format_number(tx), format_number(ty)});
            }
        }
        // Rank collapse of the 2-token state, scale-free: ‖t1 − t2‖ / mean(‖t1‖, ‖t2‖); the first step where it falls
        // below 1e-3 (the tokens have merged), and its value at the last finite step.
        auto relative_gap = [&](int step) {
            const at::Tensor state = path[step];
            return (state[0] - state[1]).norm().item<double>() /
                   std::max(1e-30, 0.5 * (state[0].norm().item<double>() + state[1].norm().item<double>()));
        };
        int merged_at = -1;
        for (int step = 0; step < finite_steps && merged_at < 0; ++step)
            if (relative_gap(step) < 1e-3) merged_at = step;
        const double final_gap = relative_gap(finite_steps - 1);
        write_training(out / fmt::format("training_{}.csv", variant), variant, trained, false, provenance);
        variants[variant] = training_summary(trained, trained.model);
        variants[variant]["final_relative_token_distance"] = final_gap;
        variants[variant]["finite_steps"] = finite_steps;
        variants[variant]["tokens_merged_at_step"] = merged_at < 0 ? nlohmann::json(nullptr) : nlohmann::json(merged_at);
        variants[variant]["mean_distance_to_arcs"] = mean_error;
        variants[variant]["settings"] = settings.to_json();
        std::cout << fmt::format("{:<14} tokens merged (relative distance < 1e-3) at step {}; after {} finite steps the "
                                 "relative distance is {:.3g}, mean distance to the arcs {:.3g}{}\n",
                                 variant, merged_at < 0 ? std::string("never") : std::to_string(merged_at), finite_steps,
                                 final_gap, mean_error, trained.reused ? " (checkpoint reused)" : "");
    }
    write_csv_atomically(out / "circle_trajectories.csv", trajectories, provenance);
    write_json_atomically(out / "task.json", {{"task", "circle"}, {"steps", options.steps}, {"variants", variants}}, provenance);

    std::string plot = "set size ratio -1\nset xrange [-0.5:0.5]\nset yrange [-0.5:0.5]\nset key bottom right font ',8'\n";
    plot += "set multiplot layout 2,2\n";
    for (std::size_t v = 0; v < options.circle_variants.size(); ++v) {
        const std::string is = fmt::format("strcol(1) eq '{}'", options.circle_variants[v]);
        plot += v == 0 ? "set key\n" : "unset key\n";
        plot += fmt::format(
            "set title '{0}'\nplot 'circle_trajectories.csv' using ({1} && $3==0 ? $6 : 1/0):7 with lines lc rgb '#999999' "
            "dt 2 title 'arcs', 'circle_trajectories.csv' using ({1} && $3==1 ? $6 : 1/0):7 with lines lc rgb '#999999' dt 2 "
            "notitle, 'circle_trajectories.csv' using ({1} && $3==0 ? $4 : 1/0):5 with linespoints pt 7 ps 0.3 lc rgb "
            "'#d95f02' title 'token 1', 'circle_trajectories.csv' using ({1} && $3==1 ? $4 : 1/0):5 with linespoints pt 7 "
            "ps 0.3 lc rgb '#1b9e77' title 'token 2'\n",
            options.circle_variants[v], is);
    }
    plot += "unset multiplot\n";
    render_figure(out, {"circle", "E3: 300 recurrent steps of the trained 1-layer attention model", plot},
                  csv_provenance_lines(provenance));
}

// E4: train (or reuse) one model, measure whole-model and majority accuracy, and the path ensembles.
void run_classification_task(const TaskOptions& options, const Provenance& provenance, const std::filesystem::path& out) {
    const TaskSettings& settings = options.settings;
    const TaskSplits data = make_task_data(settings, out);
    TrainedTask trained = train_or_load(settings, data, checkpoint_dir(options, out), options.retrain, options.common.allow_nonfinite);
    TaskModel& model = trained.model;
    const double whole = token_accuracy(model, data.eval);
    const double majority = majority_accuracy(data.train, data.eval, data.classes);
    std::vector<bool> modes;
    if (options.sub_path != "yes") modes.push_back(false);
    if (options.sub_path != "no") modes.push_back(true);
    std::vector<PathEffectivenessRow> rows;
    for (bool mode : modes) {
        auto part = path_effectiveness(model, data.eval, settings.task, options.n_paths, options.repeats, mode, settings.seed);
        rows.insert(rows.end(), part.begin(), part.end());
    }
    CsvTable table;
    table.columns = {"task", "sub_path", "k", "n_paths", "repeat", "metric", "value"};
    for (const auto& r : rows)
        table.add({r.task, r.sub_path ? "yes" : "no", std::to_string(r.length), std::to_string(r.n_paths),
                   std::to_string(r.repeat), "token_accuracy", format_number(r.accuracy)});
    // The reference lines of the figure, measured in this run.
    table.add({settings.task, "", "", "", "", "whole_model_accuracy", format_number(whole)});
    table.add({settings.task, "", "", "", "", "majority_accuracy", format_number(majority)});
    write_csv_atomically(out / "paths_effectiveness.csv", table, provenance);

    CsvTable residual;
    residual.columns = {"task", "layer", "norm", "center", "mean", "std", "n"};
    for (const auto& r : residual_by_layer(model, data.eval)) {
        check_finite(options.common, r.mean, "the relative residual", fmt::format("{} model, layer {}", settings.task, r.layer));
        residual.add({settings.task, std::to_string(r.layer), "composite", "mean", format_number(r.mean), format_number(r.std),
                      std::to_string(r.n)});
    }
    write_csv_atomically(out / "residual.csv", residual, provenance);
    write_training(out / "training.csv", settings.task, trained, true, provenance);
    write_eval_data(out / "eval_data.safetensors", data.eval, provenance);

    // Accuracy per (mode, n, k) over repeats: task.json, standard output and the summary CSV.
    std::map<std::tuple<bool, int, int>, std::vector<double>> accuracies;
    for (const auto& r : rows) accuracies[{r.sub_path, r.n_paths, r.length}].push_back(r.accuracy);
    std::map<std::tuple<bool, int, int>, Summary> by_cell;
    for (const auto& [key, values] : accuracies) by_cell[key] = summarize(values);
    nlohmann::json by_length = nlohmann::json::array();
    for (const auto& [key, cell] : by_cell)
        by_length.push_back({{"sub_path", std::get<0>(key)}, {"n_paths", std::get<1>(key)}, {"k", std::get<2>(key)},
                             {"mean_accuracy", cell.mean}});
    nlohmann::json summary = training_summary(trained, model);
    summary.update({{"task", settings.task},
                    {"settings", settings.to_json()},
                    {"whole_model_accuracy", whole},
                    {"whole_model_train_accuracy", token_accuracy(model, data.train)},
                    {"majority_accuracy", majority},
                    {"chance_accuracy", 1.0 / data.classes},
                    {"eval_sequences", data.eval.size()},
                    {"path_accuracy", by_length}});
    write_json_atomically(out / "task.json", summary, provenance);

    std::cout << fmt::format("{}: whole-model token accuracy {:.4f}, majority {:.4f}, {} parameters, {}\n", settings.task,
                             whole, majority, parameter_count(model),
                             trained.reused ? "checkpoint reused" : fmt::format("trained in {:.1f} s", trained.train_seconds));
    for (const auto& [key, cell] : by_cell)
        std::cout << fmt::format("  sub_path={} n_paths={:>2} k={}: accuracy {:.4f}\n", std::get<0>(key) ? "yes" : "no",
                                 std::get<1>(key), std::get<2>(key), cell.mean);

    // Figure: accuracy vs path length, mean ± std over repeats, with the measured whole-model and majority lines.
    CsvTable summary_table;
    summary_table.columns = {"task", "sub_path", "n_paths", "k", "mean", "std"};
    for (const auto& [key, cell] : by_cell)
        summary_table.add({settings.task, std::get<0>(key) ? "yes" : "no", std::to_string(std::get<1>(key)),
                           std::to_string(std::get<2>(key)), format_number(cell.mean), format_number(cell.std)});
    write_csv_atomically(out / "paths_effectiveness_summary.csv", summary_table, provenance);
    std::vector<std::pair<std::string, int>> series;
    for (bool mode : modes)
        for (int n : options.n_paths) series.emplace_back(mode ? "yes" : "no", n);
    render_figure(out, paths_effectiveness_figure(settings.task, series), csv_provenance_lines(provenance));
}

}  // namespace

std::function<void()> setup_task(CLI::App& command) {
    auto options = std::make_shared<TaskOptions>();
    add_common_options(command, options->common, true);
    command.add_option("task", options->task, "circle, sort, hull or memorize")
        ->required()
        ->check(CLI::IsMember({"circle", "sort", "hull", "memorize"}));
    auto flags = std::make_shared<TaskSettingFlags>(command);
    command.add_option("--checkpoints", options->checkpoints, "Checkpoint folder (default OUT/checkpoints)");
    command.add_flag("--retrain", options->retrain, "Train even when a checkpoint with the same settings exists");
    command.add_option("--paths", options->n_paths, "Paths per ensemble")
        ->delimiter(',')
        ->capture_default_str()
        ->transform(IntRange(1, 10000));
    command.add_option("--repeats", options->repeats, "Ensembles drawn per (k, n)")->capture_default_str()->transform(IntRange(1, 1000));
    command.add_option("--sub-path", options->sub_path,
                       "Keep each head layer's own skip and LN (yes), drop them as the paper's runs did (no), or both")
        ->capture_default_str()
        ->check(CLI::IsMember({"no", "yes", "both"}));
    command.add_option("--variants", options->circle_variants, "Circle variants")
        ->delimiter(',')
        ->capture_default_str()
        ->check(OneOf({"SAN", "SAN+skip", "SAN+MLP", "SAN+skip+MLP"}, "circle variant"));
    command.add_option("--steps", options->steps, "Circle: recurrent steps")->capture_default_str()->transform(IntRange(1, 100000));
    return [options, flags] {
        options->settings = flags->settings_for(options->task, options->common.seed);
        const TaskSettings& s = options->settings;
        const Provenance provenance = start_run(options->common);
        const std::filesystem::path out = options->common.out;
        std::filesystem::create_directories(out);
        if (s.task == "circle") run_circle(*options, provenance, out);
        else run_classification_task(*options, provenance, out);
        write_manifest(out, provenance, {{"subcommand", "task"}, {"task", s.task}, {"settings", s.to_json()}});
    };
}

}  // namespace rankscope::cli
