// rankscope circle-regimes — E3 in four training regimes (plain MSE and denoising, each without and with the input
// LayerNorm): merge and arc-following rates per variant over many seeds, and the trajectories side by side.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "rankscope/e3_regimes.hpp"
#include "rankscope/error.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/tasks.hpp"

namespace rankscope::cli {
namespace {

struct CircleRegimesOptions {
    CommonOptions common;
    std::vector<std::string> variants = circle_variants();
    int seeds = 8;                     // --seed, --seed + 1, ...
    int steps = 300;
    int epochs = default_task_settings("circle").epochs;  // the circle recipe's budget
    double noise = 0.005;
    // PyTorch's nn.Linear draw: it trains 124 of 128 models to the one-step precondition where rankscope's N(0, 1/fan_in)
    // trains 77 (docs/beyond.md, "E3: why implementations disagree").
    std::string init = "uniform";
    double target_mse = -1;            // < 0: the circle recipe's
    std::string checkpoints;
    bool retrain = false;
};

void run_circle_regimes_command(const CircleRegimesOptions& options) {
    const Provenance provenance = start_run(options.common);
    const std::filesystem::path out = options.common.out;
    std::filesystem::create_directories(out);
    CircleSettings base;
    base.variants = options.variants;
    base.seeds = consecutive_seeds(options.common.seed, options.seeds);
    base.steps = options.steps;
    base.training = default_task_settings("circle");
    base.training.seed = options.common.seed;
    base.training.device = options.common.device;
    base.training.epochs = options.epochs;
    if (options.target_mse >= 0) base.training.target_mse = options.target_mse;
    base.training.init = options.init;
    base.checkpoints = options.checkpoints.empty() ? out / "checkpoints" : std::filesystem::path(options.checkpoints);
    base.retrain = options.retrain;
    base.allow_nonfinite = options.common.allow_nonfinite;
    const auto regimes = default_circle_regimes(options.noise);
    const auto results = run_circle_regimes(base, regimes);

    CsvTable trajectories;
    trajectories.columns = {"regime", "variant", "seed", "step", "token", "x", "y", "target_x", "target_y"};
    std::vector<std::string> regime_names;
    std::vector<std::vector<std::string>> notes;
    nlohmann::json regimes_json = nlohmann::json::array();
    for (const auto& r : results) {
        regime_names.push_back(r.regime.name);
        regimes_json.push_back({{"regime", r.regime.name}, {"input_noise", r.regime.input_noise},
                                {"embedding_layer_norm", r.regime.embedding_layer_norm}});
        for (const auto& variant : base.variants) {
            const CircleRates rates = circle_rates(r.result, variant, r.settings);
            notes.push_back({fmt::format("merged {}/{}", rates.merged, rates.seeds), fmt::format("on arcs {}/{}", rates.on_arcs, rates.seeds),
                             fmt::format("on circle {}/{}", rates.on_circle, rates.seeds)});
            for (const auto& line : circle_escape_notes(r.result, variant)) notes.back().push_back(line);  // runaways, beyond the axes
        }
        for (const auto& run : r.result.runs)
            for (int token = 0; token < 2; ++token)  // grouped by token, then step: one connected line per trajectory
                for (int step = 0; step < static_cast<int>(run.trajectory.size()); ++step) {
                    const Point2& p = run.trajectory[static_cast<std::size_t>(step)][static_cast<std::size_t>(token)];
                    const Point2 target = circle_arc_point(r.result.points, step, token);
                    trajectories.add({r.regime.name, run.variant, std::to_string(run.seed), std::to_string(step), std::to_string(token),
                                      format_number(p.x), format_number(p.y), format_number(target.x), format_number(target.y)});
                }
    }
    nlohmann::json training_json = base.training.to_json();  // input noise and input LayerNorm: per regime, below
    training_json.erase("input_noise");
    training_json.erase("embedding_layer_norm");
    const Table table = circle_regimes_table(results);
    const Findings findings = circle_regimes_findings(results);
    write_csv_atomically(out / "circle_regimes.csv", table.to_csv(), provenance);
    write_csv_atomically(out / "circle_regimes_trajectories.csv", trajectories, provenance);
    write_findings(out, findings, provenance);
    const auto figures = render_figure(out, circle_regimes_figure(regime_names, base.variants, notes, base.seeds.front(), base.steps),
                                       csv_provenance_lines(provenance));
    write_manifest(out, provenance,
                   {{"subcommand", "circle-regimes"},
                    {"training", training_json},
                    {"regimes", regimes_json},
                    {"seeds", base.seeds},
                    {"outputs", {"circle_regimes.csv", "circle_regimes_trajectories.csv", "findings.json", "verdicts.csv"}},
                    {"figures", figures}});

    fmt::print("{:<34} {:<14} {:>8} {:>8} {:>12}\n", "regime", "variant", "merged", "on arcs", "worst rmse");
    const auto& merged = table.column("merged").integers;
    const auto& on_arcs = table.column("on_arcs").integers;
    const auto& seeds = table.column("seeds").integers;
    for (std::size_t i = 0; i < table.rows(); ++i)
        fmt::print("{:<34} {:<14} {:>5}/{:<2} {:>5}/{:<2} {:>12.3g}\n", table.column("regime").texts[i],
                   table.column("variant").texts[i], merged[i], seeds[i], on_arcs[i], seeds[i],
                   table.column("worst_train_rmse").reals[i]);
    for (const auto& c : findings.checks) fmt::print("[{}] {}\n", verdict_name(c.verdict), c.claim);
}

}  // namespace

std::function<void()> setup_circle_regimes(CLI::App& command) {
    auto options = std::make_shared<CircleRegimesOptions>();
    add_common_options(command, options->common, OutFolder::required());
    add_device_option(command, options->common);
    command.add_option("--variants", options->variants, "Circle variants")
        ->delimiter(',')
        ->capture_default_str()
        ->check(OneOf(circle_variants(), "circle variant"));
    add_seed_count_option(command, options->seeds, "one model per variant, regime and seed", 64)->capture_default_str();
    command.add_option("--steps", options->steps, "Rollout length in states, the start included (steps − 1 applications of the model)")
        ->capture_default_str()->transform(IntRange(1, 100000));
    command.add_option("--epochs", options->epochs, "Epoch budget per model (default the circle recipe's; training stops earlier at --target-mse)")
        ->capture_default_str()
        ->transform(IntRange(1, 100000));
    command.add_option("--noise", options->noise, "Input noise sigma of the denoising regimes (the plain regimes have none)")
        ->capture_default_str()
        ->check(RealRange(0, 1, true));
    command.add_option("--init", options->init,
                       "Weight draw: uniform (PyTorch nn.Linear's default, U(-1/sqrt(fan_in), 1/sqrt(fan_in))) or normal "
                       "(rankscope's N(0, 1/fan_in), the circle task's default)")
        ->capture_default_str()
        ->check(CLI::IsMember({"normal", "uniform"}));
    command.add_option("--target-mse", options->target_mse,
                       fmt::format("Stop training at this one-step training MSE (default the circle recipe's {:g}; 0 = run "
                                   "all epochs)", default_task_settings("circle").target_mse))
        ->check(RealRange(0, 1));
    command.add_option("--checkpoints", options->checkpoints, "Checkpoint folder (default OUT/checkpoints)")->check(FolderOrNew());
    command.add_flag("--retrain", options->retrain, "Train even when a checkpoint with the same settings exists");
    return [options] { run_circle_regimes_command(*options); };
}

}  // namespace rankscope::cli
