// rankscope dynamics — rank collapse through pretraining: E1 (four surgeries), E2 and attention statistics of every
// checkpoint of a `rankscope pretrain` run, with heat maps (layer × step) and small multiples of the E1 curves.
#include <fmt/format.h>

#include <filesystem>

#include "common.hpp"
#include "rankscope/dynamics.hpp"
#include "rankscope/error.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/progress.hpp"

namespace rankscope::cli {
namespace {

struct DynamicsOptions {
    CommonOptions common;
    std::string checkpoints;
    DynamicsSettings settings;
};

void run_dynamics_command(DynamicsOptions& options) {
    const Provenance provenance = start_run(options.common);
    options.settings.model.seed = options.common.seed;
    options.settings.model.allow_nonfinite = options.common.allow_nonfinite;
    const auto checkpoints = find_checkpoints(options.checkpoints);
    Progress bar("dynamics", static_cast<long>(checkpoints.size()));
    const DynamicsResult result = run_dynamics(checkpoints, options.settings, [&](std::size_t, std::size_t) { bar.advance(); });
    check_weights_runs_finite(result.model, result.runs, options.common.allow_nonfinite);  // before any file is written
    const std::filesystem::path out = options.common.out;
    std::filesystem::create_directories(out);
    write_csv_atomically(out / "dynamics_residual.csv", dynamics_residual_table(result).to_csv(), provenance);
    write_csv_atomically(out / "dynamics_paths.csv", dynamics_paths_table(result).to_csv(), provenance);
    write_csv_atomically(out / "dynamics_attention.csv", dynamics_attention_table(result).to_csv(), provenance);
    const Findings findings = dynamics_findings(result);
    write_findings(out, findings, provenance);
    const auto& variants = options.settings.model.variants;
    std::vector<std::string> outputs = {"dynamics_residual.csv", "dynamics_paths.csv", "dynamics_attention.csv",
                                        "findings.json", "verdicts.csv"};
    std::vector<std::string> figures;  // (listed under "figures", as every command's: a re-run takes their .gp too)
    for (const Figure& figure : {dynamics_heatmap_figure(result.model, variants, result.steps, result.layers),
                                 dynamics_curves_figure(result.model, variants, select_steps(result.steps, 6)),
                                 dynamics_attention_figure(result.model, result.steps, result.layers)})
        for (const auto& file : render_figure(out, figure, csv_provenance_lines(provenance))) figures.push_back(file);
    write_manifest(out, provenance, {{"inputs", {options.checkpoints, result.text}}, {"outputs", outputs}, {"figures", figures}});
    fmt::print("dynamics {}: {} checkpoints (steps {}–{}), {} × {} tokens of {}\n{}\n", result.model, result.steps.size(),
               result.steps.front(), result.steps.back(), result.samples, result.tokens, result.text, findings.reading);
}

}  // namespace

std::function<void()> setup_dynamics(CLI::App& command) {
    auto options = std::make_shared<DynamicsOptions>();
    command.add_option("--checkpoints", options->checkpoints, "A `rankscope pretrain` folder, or a folder of step-N or stepN checkpoint folders (Hugging Face folders of one "
                       "architecture, e.g. Pythia's step0 ... step143000 revisions)")
        ->required();
    command.add_option("--text", options->settings.text, "Text for the batch (default: the run's corpus/heldout.txt, else GLUE RTE train with a warning)")->check(ReadableFile());
    command.add_option("--samples", options->settings.samples, "Samples in the batch")->check(IntRange(1, 4096))->capture_default_str();
    command.add_option("--tokens", options->settings.tokens, "Tokens per sample (0 = min(128, the model's positions))")
        ->check(IntRange(0, 4096))->capture_default_str();
    command.add_option("--draws", options->settings.model.draws, "E2 paths drawn per length")->check(IntRange(0, 100000))->capture_default_str();
    add_common_options(command, options->common, OutFolder::required());
    return [options] { run_dynamics_command(*options); };
}

}  // namespace rankscope::cli
