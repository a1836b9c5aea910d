// rankscope trainability — beyond the paper: rank collapse and the query/key gradients at initialisation (Noci et al.
// 2022), post-LN and pre-LN, plain residuals and branches scaled by 1/√L, over depths.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/trainability.hpp"

namespace rankscope::cli {
namespace {

struct TrainabilityOptions {
    CommonOptions common;
    TrainabilitySettings settings;
    std::vector<std::string> layer_norms = {"post", "pre"};
    std::vector<std::string> scalings = {"plain", "inverse-sqrt-depth"};
};

void run_trainability(TrainabilityOptions options) {
    const Provenance provenance = start_run(options.common);
    TrainabilitySettings& settings = options.settings;
    settings.seed = options.common.seed;
    settings.layer_norms.clear();
    for (const auto& name : options.layer_norms) settings.layer_norms.push_back(parse_layer_norm(name));
    settings.scalings.clear();
    for (const auto& name : options.scalings) settings.scalings.push_back(parse_residual_scaling(name));
    settings.validate();
    const TrainabilityResult result = run_trainability_experiment(settings);
    for (const auto& run : result.runs)
        for (const auto& layer : run.probe.layers)
            check_finite(options.common, layer.grad_query + layer.grad_key + layer.grad_value + layer.input_cosine,
                         "a gradient norm or cosine", fmt::format("depth {}, seed {}, layer {}", run.depth, run.seed, layer.layer));

    const Findings findings = trainability_findings(result, settings);
    const Table summary = trainability_summary_table(result);
    if (!options.common.out.empty()) {
        const std::filesystem::path out = options.common.out;
        std::filesystem::create_directories(out);
        write_csv_atomically(out / "trainability.csv", trainability_layers_table(result).to_csv(), provenance);
        write_csv_atomically(out / "trainability_runs.csv", trainability_runs_table(result).to_csv(), provenance);
        write_csv_atomically(out / "trainability_summary.csv", summary.to_csv(), provenance);
        write_findings(out, findings, provenance);
        std::vector<TrainabilitySeries> series;
        for (auto layer_norm : settings.layer_norms)
            for (auto scaling : settings.scalings)
                series.push_back({to_string(layer_norm), to_string(scaling),
                                  fmt::format("{}-LN, {}", to_string(layer_norm),
                                              scaling == ResidualScaling::Plain ? "alpha = 1" : "alpha = 1/sqrt(L)")});
        const int deepest = *std::max_element(settings.depths.begin(), settings.depths.end());
        const auto figures = render_figure(out, trainability_figure(series, deepest), csv_provenance_lines(provenance));
        write_manifest(out, provenance,
                       {{"subcommand", "trainability"},
                        {"outputs", {"trainability.csv", "trainability_runs.csv", "trainability_summary.csv",
                                     "findings.json", "verdicts.csv"}},
                        {"figures", figures}});
    }
    if (print_csv_or_json(options.common, summary, findings)) return;
    fmt::print("{:<6} {:<20} {:>5} {:>12} {:>14}\n", "LN", "scaling", "L", "last cosine", "median q/v grad");
    const auto& columns = summary.columns();
    for (std::size_t r = 0; r < summary.rows(); ++r)
        fmt::print("{:<6} {:<20} {:>5} {:>12.4f} {:>14.3e}\n", columns[0].texts[r], columns[1].texts[r],
                   columns[2].integers[r], summary.column("last_cosine_mean").reals[r],
                   summary.column("median_query_over_value_mean").reals[r]);
    for (const auto& c : findings.checks) fmt::print("[{}] {}: {}\n", verdict_name(c.verdict), c.claim, c.measured);
}

}  // namespace

std::function<void()> setup_trainability(CLI::App& command) {
    auto options = std::make_shared<TrainabilityOptions>();
    TrainabilitySettings& s = options->settings;
    command.add_option("--depths", s.depths, "Depths L to compare")->delimiter(',')->capture_default_str()->transform(IntRange(1, 256));
    command.add_option("--layer-norms", options->layer_norms, "LayerNorm placements")
        ->delimiter(',')
        ->capture_default_str()
        ->check(OneOf({"post", "pre"}, "LayerNorm placement"));
    command.add_option("--scalings", options->scalings, "Residual branch scalings: plain (alpha = 1), inverse-sqrt-depth (1/sqrt(L))")
        ->delimiter(',')
        ->capture_default_str()
        ->check(OneOf({"plain", "inverse-sqrt-depth"}, "residual scaling"));
    command.add_option("--d-model", s.d_model, "Model width d")->capture_default_str()->transform(IntRange(1, 1024));
    command.add_option("--heads", s.heads, "Attention heads")->capture_default_str()->transform(IntRange(1, 64));
    command.add_option("--tokens", s.tokens, "Tokens n of the random input")->capture_default_str()->transform(IntRange(2, 1024));
    command.add_option("--samples", s.samples, "Input samples per seed")->capture_default_str()->transform(IntRange(1, 1024));
    add_seed_count_option(command, s.seeds, "per configuration", 1000)->capture_default_str();
    add_common_options(command, options->common, OutFolder::optional(), {"csv", "json"});
    return [options] {
        const auto& s = options->settings;
        const double depth = *std::max_element(s.depths.begin(), s.depths.end());
        check_size("samples x tokens x d_model x depth", static_cast<double>(s.samples) * s.tokens * s.d_model * depth, 1 << 26,
                   "--samples, --tokens, --d-model, --depths");
        check_size("samples x heads x tokens^2 x depth", static_cast<double>(s.samples) * s.heads * s.tokens * s.tokens * depth,
                   1 << 26, "--samples, --heads, --tokens, --depths");
        run_trainability(*options);
    };
}

}  // namespace rankscope::cli
