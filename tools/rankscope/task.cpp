// rankscope task — E3 (circle trajectories) and E4 (path effectiveness) on models rankscope trains itself.
#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>

#include "common.hpp"
#include "task_settings_options.hpp"
#include "rankscope/e3_circle.hpp"
#include "rankscope/e4_path_effectiveness.hpp"
#include "rankscope/error.hpp"
#include "rankscope/findings.hpp"
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
    std::vector<std::string> circle_variants = rankscope::circle_variants();
    int steps = 300;
    int seed_count = 0;                // --seeds; 0: circle 3 (kCircleSeeds), the other tasks 1
    std::vector<std::uint64_t> seeds;  // --seed, --seed + 1, ... (seed_count of them)
};

std::filesystem::path checkpoint_dir(const TaskOptions& options, const std::filesystem::path& out) {
    return options.checkpoints.empty() ? out / "checkpoints" : std::filesystem::path(options.checkpoints);
}

void write_training(const std::filesystem::path& path, const std::string& label, const std::vector<SeedOutcome>& seeds,
                    const Provenance& provenance) {
    CsvTable table;
    table.columns = {"task", "seed", "epoch", "loss", "train_accuracy", "seconds"};
    for (const auto& s : seeds)
        for (const auto& e : s.trained.history)
            table.add({label, std::to_string(s.seed), std::to_string(e.epoch), format_number(e.loss), format_number(e.train_metric),
                       format_number(e.seconds)});
    write_csv_atomically(path, table, provenance);
}

// The evaluation batch, so that any number of the run can be recomputed outside rankscope.
void write_eval_data(const std::filesystem::path& path, const TaskBatch& batch, const Provenance& provenance) {
    NamedTensors tensors = {{"inputs", batch.inputs}, {"targets", batch.targets}};
    if (batch.key_bias.defined()) tensors.emplace_back("key_bias", batch.key_bias);
    write_tensors(path.string(), tensors, {{"command", provenance.command}, {"version", version_string()}});
}

// What a task run wrote into --out, for its manifest (a re-run removes what the last one listed: task.cpp listed
// nothing, and sort's files stayed beside a later circle run's).
struct TaskFiles {
    std::vector<std::string> outputs, figures;
};

// E3: the experiment unit trains and rolls out every variant × seed; here its result is written and drawn.
TaskFiles run_circle(const TaskOptions& options, const Provenance& provenance, const std::filesystem::path& out) {
    CircleSettings settings;
    settings.variants = options.circle_variants;
    settings.seeds = options.seeds;
    settings.steps = options.steps;
    settings.training = options.settings;
    settings.checkpoints = checkpoint_dir(options, out);
    settings.retrain = options.retrain;
    settings.allow_nonfinite = options.common.allow_nonfinite;
    const CircleResult result = run_circle_experiment(settings);
    const Findings findings = circle_findings(result, settings);

    CsvTable trajectories, summary, training;
    trajectories.columns = {"variant", "seed", "step", "token", "x", "y", "target_x", "target_y"};
    summary.columns = {"variant", "seed", "train_rmse", "heldout_rmse", "step_length", "epochs", "train_seconds",
                       "mean_distance_to_arcs", "mean_radial_deviation", "merge_step", "final_relative_distance",
                       "bounded_steps", "reused_checkpoint"};
    training.columns = {"variant", "seed", "epoch", "loss", "train_mse", "learning_rate", "seconds"};
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& r : result.runs) {
        const std::string seed = std::to_string(r.seed);
        // Rows grouped by token, then step, so that gnuplot draws each trajectory as one connected line.
        for (int token = 0; token < 2; ++token)
            for (int step = 0; step < static_cast<int>(r.trajectory.size()); ++step) {
                const Point2& p = r.trajectory[static_cast<std::size_t>(step)][static_cast<std::size_t>(token)];
                const Point2 target = circle_arc_point(result.points, step, token);
                trajectories.add({r.variant, seed, std::to_string(step), std::to_string(token), format_number(p.x),
                                  format_number(p.y), format_number(target.x), format_number(target.y)});
            }
        const auto& m = r.rollout;
        summary.add({r.variant, seed, format_number(r.train_rmse), format_number(r.heldout_rmse),
                     format_number(result.step_length), r.epochs < 0 ? "" : std::to_string(r.epochs),
                     std::isnan(r.train_seconds) ? "" : format_number(r.train_seconds), format_number(m.mean_distance_to_arcs),
                     format_number(m.mean_radial_deviation), m.merge_step < 0 ? "" : std::to_string(m.merge_step),
                     format_number(m.final_relative_distance), std::to_string(m.bounded_steps), r.reused ? "yes" : "no"});
        for (const auto& e : r.history)
            training.add({r.variant, seed, std::to_string(e.epoch), format_number(e.loss), format_number(e.train_metric),
                          format_number(e.learning_rate), format_number(e.seconds)});
        runs.push_back({{"variant", r.variant},
                        {"seed", r.seed},
                        {"settings", r.settings.to_json()},
                        {"model", nlohmann::json::parse(r.model)},
                        {"parameters", r.parameters},
                        {"checkpoint", r.checkpoint},
                        {"reused_checkpoint", r.reused},
                        {"epochs", r.epochs < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.epochs)},
                        {"train_seconds", std::isnan(r.train_seconds) ? nlohmann::json(nullptr) : nlohmann::json(r.train_seconds)},
                        {"train_rmse", r.train_rmse},
                        {"heldout_rmse", r.heldout_rmse},
                        {"mean_distance_to_arcs", m.mean_distance_to_arcs},
                        {"mean_radial_deviation", m.mean_radial_deviation},
                        {"tokens_merged_at_step", m.merge_step < 0 ? nlohmann::json(nullptr) : nlohmann::json(m.merge_step)},
                        {"final_relative_token_distance", m.final_relative_distance},
                        {"bounded_steps", m.bounded_steps}});
    }
    write_csv_atomically(out / "circle_trajectories.csv", trajectories, provenance);
    write_csv_atomically(out / "circle_summary.csv", summary, provenance);
    write_csv_atomically(out / "training.csv", training, provenance);
    write_json_atomically(out / "task.json",
                          {{"task", "circle"},
                           {"steps", settings.steps},
                           {"points", result.points},
                           {"step_length", result.step_length},
                           {"seeds", settings.seeds},
                           {"variants", settings.variants},
                           {"runs", runs}},
                          provenance);
    write_findings(out, findings, provenance);

    std::cout << fmt::format("{:<14} {:>6} {:>10} {:>10} {:>7} {:>9} {:>7} {:>7}\n", "variant", "seed", "rmse", "held-out",
                             "epochs", "dist_arcs", "merge", "bounded");
    for (const auto& r : result.runs)
        std::cout << fmt::format("{:<14} {:>6} {:>10.3g} {:>10.3g} {:>7} {:>9.3g} {:>7} {:>7}\n", r.variant, r.seed,
                                 r.train_rmse, r.heldout_rmse, r.epochs < 0 ? std::string("reused") : std::to_string(r.epochs),
                                 r.rollout.mean_distance_to_arcs,
                                 r.rollout.merge_step < 0 ? std::string("never") : std::to_string(r.rollout.merge_step),
                                 r.rollout.bounded_steps);
    std::cout << fmt::format("step length {:.3g}\n", result.step_length);
    for (const auto& c : findings.checks) std::cout << fmt::format("[{}] {}: {}\n", verdict_name(c.verdict), c.claim, c.measured);

    // Figure: one panel per variant; the first seed drawn with points, the other seeds faint.
    const std::uint64_t first = settings.seeds.front();
    const CirclePanelText text = circle_panel_text(result, settings.variants);
    return {{"circle_trajectories.csv", "circle_summary.csv", "training.csv", "task.json", "findings.json", "verdicts.csv"},
            render_figure(out, circle_figure(settings.variants, text.titles, text.notes, first, settings.steps,
                                             settings.seeds.size() > 1),
                          csv_provenance_lines(provenance))};
}

// E4: train (or reuse) one model per seed, measure whole-model, majority and per-position majority accuracy, and the path
// ensembles.
TaskFiles run_classification_task(const TaskOptions& options, const Provenance& provenance, const std::filesystem::path& out) {
    TaskFiles files;
    files.outputs = {"paths_effectiveness.csv", "residual.csv", "training.csv", "task.json", "findings.json", "verdicts.csv",
                     "paths_effectiveness_summary.csv"};
    const TaskSettings& settings = options.settings;
    PathEffectivenessSettings experiment;
    experiment.task = settings;
    experiment.work_dir = out;
    experiment.checkpoints = checkpoint_dir(options, out);
    experiment.retrain = options.retrain;
    experiment.allow_nonfinite = options.common.allow_nonfinite;
    experiment.n_paths = options.n_paths;
    experiment.repeats = options.repeats;
    std::vector<bool> modes;
    if (options.sub_path != "yes") modes.push_back(false);
    if (options.sub_path != "no") modes.push_back(true);
    experiment.sub_path_modes = modes;
    experiment.seeds = options.seeds;
    PathEffectivenessResult result = run_path_effectiveness_experiment(experiment);
    const double whole = result.whole_model_accuracy;
    const double majority = result.majority_accuracy;
    const bool one_seed = result.seeds.size() == 1;
    CsvTable table;
    table.columns = {"task", "seed", "sub_path", "k", "n_paths", "repeat", "metric", "value"};
    for (const auto& r : result.rows)
        table.add({r.task, std::to_string(r.seed), r.sub_path ? "yes" : "no", std::to_string(r.length), std::to_string(r.n_paths),
                   std::to_string(r.repeat), "token_accuracy", format_number(r.accuracy)});
    // The reference lines of the figure, measured in this run (the figure draws their mean over the seeds).
    for (const auto& s : result.seeds) {
        table.add({settings.task, std::to_string(s.seed), "", "", "", "", "whole_model_accuracy", format_number(s.whole_model_accuracy)});
        table.add({settings.task, std::to_string(s.seed), "", "", "", "", "majority_accuracy", format_number(s.majority_accuracy)});
        table.add({settings.task, std::to_string(s.seed), "", "", "", "", "position_majority_accuracy",
                   format_number(s.position_majority_accuracy)});
    }
    write_csv_atomically(out / "paths_effectiveness.csv", table, provenance);

    CsvTable residual;
    residual.columns = {"task", "seed", "layer", "norm", "center", "mean", "std", "n"};
    for (const auto& s : result.seeds)
        for (const auto& r : s.residual) {
            check_finite(options.common, r.mean, "the relative residual",
                         fmt::format("{} model{}, layer {}", settings.task, one_seed ? "" : fmt::format(" seed {}", s.seed), r.layer));
            residual.add({settings.task, std::to_string(s.seed), std::to_string(r.layer), "composite", "mean", format_number(r.mean),
                          format_number(r.std), std::to_string(r.n)});
        }
    write_csv_atomically(out / "residual.csv", residual, provenance);
    write_training(out / "training.csv", settings.task, result.seeds, provenance);

    nlohmann::json by_length = nlohmann::json::array();
    for (const auto& cell : result.by_length)
        by_length.push_back({{"sub_path", cell.sub_path}, {"n_paths", cell.n_paths}, {"k", cell.length},
                             {"mean_accuracy", cell.accuracy.mean}});
    // One model per seed; its evaluation batch in eval_data.safetensors (one seed) or eval_data_seed<N>.safetensors.
    nlohmann::json seeds = nlohmann::json::array();
    bool reused_all = true;
    // An earlier run's evaluation batches that this one does not write go (three seeds, then one: eval_data_seed0..2
    // stood beside eval_data.safetensors).
    for (const auto& entry : std::filesystem::directory_iterator(out)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("eval_data", 0) == 0 && entry.path().extension() == ".safetensors") {
            std::error_code ignored;
            std::filesystem::remove(entry.path(), ignored);
        }
    }
    for (const auto& s : result.seeds) {
        const std::string eval_file = one_seed ? "eval_data.safetensors" : fmt::format("eval_data_seed{}.safetensors", s.seed);
        write_eval_data(out / eval_file, s.eval, provenance);
        files.outputs.push_back(eval_file);
        reused_all = reused_all && s.trained.reused;
        seeds.push_back({{"seed", s.seed},
                         {"checkpoint", s.trained.checkpoint},
                         {"reused_checkpoint", s.trained.reused},
                         {"epochs", s.trained.history_known ? nlohmann::json(s.trained.history.size()) : nlohmann::json(nullptr)},
                         {"whole_model_accuracy", s.whole_model_accuracy},
                         {"whole_model_train_accuracy", s.whole_model_train_accuracy},
                         {"majority_accuracy", s.majority_accuracy},
                         {"position_majority_accuracy", s.position_majority_accuracy},
                         {"eval_data", eval_file}});
    }
    TaskModel& model = result.seeds.front().trained.model;
    nlohmann::json settings_json = settings.to_json();
    if (!one_seed) settings_json.erase("seed");  // see "seeds"
    nlohmann::json summary = {{"task", settings.task},
                              {"settings", settings_json},
                              {"seeds", seeds},
                              // The seeds not reused were trained together: train_seconds is that one run's time.
                              {"train_seconds", reused_all ? nlohmann::json(nullptr) : nlohmann::json(result.train_seconds)},
                              {"steps_per_model", settings.epochs * ((settings.train_count + settings.batch_size - 1) / settings.batch_size)},
                              {"parameters", parameter_count(model)},
                              {"model", model->config.to_json()},
                              {"whole_model_accuracy", whole},
                              {"whole_model_train_accuracy", result.whole_model_train_accuracy},
                              {"majority_accuracy", majority},
                              {"position_majority_accuracy", result.position_majority_accuracy},
                              {"chance_accuracy", result.chance_accuracy},
                              {"eval_sequences", result.seeds.front().eval.size()},
                              {"path_accuracy", by_length}};
    if (one_seed) {  // the model's checkpoint at the top level too
        summary["checkpoint"] = result.seeds.front().trained.checkpoint;
        summary["reused_checkpoint"] = result.seeds.front().trained.reused;
    }
    write_json_atomically(out / "task.json", summary, provenance);
    write_findings(out, path_effectiveness_findings(result, experiment), provenance);

    std::cout << fmt::format("{}: whole-model token accuracy {:.4f}{}, majority {:.4f}, per-position majority {:.4f}, {} "
                             "parameters, {}\n",
                             settings.task, whole, one_seed ? "" : fmt::format(" (mean over {} seeds)", result.seeds.size()),
                             majority, result.position_majority_accuracy,
                             parameter_count(model),
                             reused_all ? "checkpoint reused" : fmt::format("trained in {:.1f} s", result.train_seconds));
    for (const auto& cell : result.by_length)
        std::cout << fmt::format("  sub_path={} n_paths={:>2} k={}: accuracy {:.4f}\n", cell.sub_path ? "yes" : "no",
                                 cell.n_paths, cell.length, cell.accuracy.mean);

    CsvTable summary_table;
    summary_table.columns = {"task", "sub_path", "n_paths", "k", "mean", "std", "n"};
    for (const auto& cell : result.by_length)
        summary_table.add({settings.task, cell.sub_path ? "yes" : "no", std::to_string(cell.n_paths),
                           std::to_string(cell.length), format_number(cell.accuracy.mean), format_number(cell.accuracy.std),
                           std::to_string(cell.accuracy.n)});
    write_csv_atomically(out / "paths_effectiveness_summary.csv", summary_table, provenance);
    // Figure: accuracy vs path length, mean ± std over seeds and repeats, with the measured whole-model, majority and
    // per-position majority lines (means over the seeds).
    std::vector<std::pair<std::string, int>> series;
    for (bool mode : modes)
        for (int n : options.n_paths) series.emplace_back(mode ? "yes" : "no", n);
    files.figures = render_figure(out, paths_effectiveness_figure(settings.task, series, static_cast<int>(result.seeds.size())),
                                  csv_provenance_lines(provenance));
    return files;
}

}  // namespace

std::function<void()> setup_task(CLI::App& command) {
    auto options = std::make_shared<TaskOptions>();
    // The task first: `rankscope task` alone said "--out is required" before naming the missing task (CLI11 reports
    // the first missing requirement in the order options were added).
    command.add_option("task", options->task, "circle, sort, hull or memorize")
        ->required()
        ->check(CLI::IsMember({"circle", "sort", "hull", "memorize"}));
    add_common_options(command, options->common, OutFolder::required());
    add_device_option(command, options->common);
    auto flags = std::make_shared<TaskSettingFlags>(command, std::vector<std::string>{"sort", "hull", "memorize", "circle"});
    command.add_option("--checkpoints", options->checkpoints, "Checkpoint folder (default OUT/checkpoints)")->check(FolderOrNew());
    command.add_flag("--retrain", options->retrain, "Train even when a checkpoint with the same settings exists");
    CLI::Option* paths_option = command.add_option("--paths", options->n_paths, "Paths per ensemble")
        ->delimiter(',')
        ->capture_default_str()
        ->transform(IntRange(1, 10000));
    CLI::Option* repeats_option =
        command.add_option("--repeats", options->repeats, "Ensembles drawn per (k, n)")->capture_default_str()->transform(IntRange(1, 1000));
    CLI::Option* sub_path_option = command.add_option("--sub-path", options->sub_path,
                       "Keep each head layer's own skip and LN (yes), drop them as the paper's runs did (no), or both")
        ->capture_default_str()
        ->check(CLI::IsMember({"no", "yes", "both"}));
    CLI::Option* variants_option = command.add_option("--variants", options->circle_variants, "Circle variants")
        ->delimiter(',')
        ->capture_default_str()
        ->check(OneOf(circle_variants(), "circle variant"));
    add_seed_count_option(command, options->seed_count,
                          "one model per seed, trained together as one stacked model; circle: per variant, default 3; "
                          "sort, hull, memorize: numbers pooled over the seeds, default 1",
                          64);
    CLI::Option* steps_option =
        command.add_option("--steps", options->steps, "Circle: rollout length in states, the start included (steps − 1 applications of the model)")
            ->capture_default_str()->transform(IntRange(1, 100000));
    return [options, flags, paths_option, repeats_option, sub_path_option, variants_option, steps_option] {
        // Flags of the other kind of task: given, they were accepted and did nothing (task sort --steps 10).
        for (const CLI::Option* option : {variants_option, steps_option})
            if (option->count() > 0 && options->task != "circle")
                throw Error("applies to the circle task only, not " + options->task, option->get_name());
        for (const CLI::Option* option : {paths_option, repeats_option, sub_path_option})
            if (option->count() > 0 && options->task == "circle")
                throw Error("applies to sort, hull and memorize (path ensembles), not circle", option->get_name());
        options->settings = flags->settings_for(options->task, options->common.seed);
        options->settings.device = options->common.device;
        const int seed_count = options->seed_count > 0 ? options->seed_count : options->task == "circle" ? 3 : 1;
        options->seeds = consecutive_seeds(options->common.seed, seed_count);
        const TaskSettings& s = options->settings;
        const Provenance provenance = start_run(options->common);
        const std::filesystem::path out = options->common.out;
        std::filesystem::create_directories(out);
        const TaskFiles files =
            s.task == "circle" ? run_circle(*options, provenance, out) : run_classification_task(*options, provenance, out);
        // The circle trains one model per variant: the manifest's settings are the shared ones, with the variants
        // named (they held the base settings' skip = false, mlp = false, read as every model's; task.json has each).
        nlohmann::json settings_json = s.to_json();
        if (s.task == "circle") {
            settings_json.erase("skip"), settings_json.erase("mlp");
            settings_json["variants"] = options->circle_variants;
        }
        write_manifest(out, provenance, {{"task", s.task}, {"settings", settings_json}, {"outputs", files.outputs},
                                         {"figures", files.figures}});
    };
}

}  // namespace rankscope::cli
