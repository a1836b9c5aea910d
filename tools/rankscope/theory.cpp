// rankscope theory — random SAN variants collapsing layer by layer, beside the theorems' bounds (SPEC.md §3).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <tuple>

#include <torch/torch.h>

#include "common.hpp"
#include "rankscope/device.hpp"
#include "rankscope/error.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/io.hpp"
#include "rankscope/measures.hpp"  // kMaxExactCenterEntries
#include "rankscope/theory.hpp"

namespace rankscope::cli {
namespace {

struct TheoryOptions {
    CommonOptions common;
    SanConfig network;
    int heads = 4;
    int seeds = 5;
    std::string input;  // a matrix file for X instead of random input
    bool tokens_given = false, d_model_given = false;  // on the command line: --input must agree with them
};

void run_theory_command(TheoryOptions options) {
    Provenance provenance = start_run(options.common);
    const std::filesystem::path out = options.common.out;
    TheorySettings settings;
    settings.network = options.network;
    settings.heads = options.heads;
    settings.seeds = options.seeds;
    settings.seed = options.common.seed;
    settings.device = parse_device(options.common.device);
    at::Tensor given;
    if (!options.input.empty()) {
        given = theory_input(read_matrix_file(options.input).view(), options.input, settings);
        // The file sets n and d; a flag that says otherwise is a mistake to name (a sweep recorded cell_d_model = 4
        // for a run at the file's 16), not to override.
        for (const auto& [flag, given_on_command_line, asked, used, what] :
             {std::tuple{"--tokens", options.tokens_given, options.network.tokens, settings.network.tokens, "rows"},
              std::tuple{"--d-model", options.d_model_given, options.network.d_model, settings.network.d_model, "columns"}})
            if (given_on_command_line && asked != used)
                throw Error(fmt::format("{} {} disagrees with the input's {} {} (leave {} out: the file sets it)", flag,
                                        asked, used, what, flag),
                            options.input);
    }
    check_theory_settings(settings);
    const auto variants = theory_variants(settings.network, settings.heads);
    const TheoryResult result = run_theory_experiment(settings, given.defined() ? &given : nullptr);
    check_theory_finite(result, options.common.allow_nonfinite);
    std::filesystem::create_directories(out);

    write_csv_atomically(out / "theory.csv", theory_table(result).to_csv(), provenance);
    write_csv_atomically(out / "theory_summary.csv", theory_summary_table(result).to_csv(), provenance);
    // theory.json's variants are theory_variants_table's rows (what the Python module returns as `variants`).
    const nlohmann::json variants_json = table_records(theory_variants_table(result));
    const int violations = result.bound_violations;
    nlohmann::json document = {{"bound_definition", theory_bound_definition()},
                               {"configuration",
                                {{"layers", settings.network.layers}, {"d_model", settings.network.d_model},
                                 {"tokens", settings.network.tokens}, {"heads_multi", options.heads},
                                 {"seeds", options.seeds}, {"init_scale", options.network.init_scale},
                                 {"input", settings.input_label},
                                 {"dtype", "float64"}}},
                               {"bound_violations", violations},
                               {"bound_rows_checked", result.bound_rows_checked},
                               {"variants", variants_json}};
    write_json_atomically(out / "theory.json", document, provenance);

    // Figures, drawn from theory_summary.csv. theory: relative residual per layer (log scale), one panel per head
    // count, one colour per architecture variant. theory_bounds: for the variants with a bound, the measured
    // exact-centre residual (solid) beside the per-layer bound c_l r_(l-1)^3 (dashed).
    std::vector<std::string> variant_names, bounded_names;
    for (const auto& variant : variants) {
        variant_names.push_back(variant.name);
        if (variant.has_bound()) bounded_names.push_back(variant.name);
    }
    std::vector<std::string> figures = render_figure(out, theory_figure(variant_names), csv_provenance_lines(provenance));
    for (const auto& file : render_figure(out, theory_bounds_figure(bounded_names), csv_provenance_lines(provenance)))
        figures.push_back(file);
    write_findings(out, theory_findings(result, settings), provenance);
    write_manifest(out, provenance, {{"outputs", {"theory.csv", "theory_summary.csv", "theory.json", "findings.json", "verdicts.csv"}}, {"figures", figures}});

    auto number_or_dash = [](const nlohmann::json& value) {
        return std::isnan(value.get<double>()) ? std::string("-") : fmt::format("{:.2f}", value.get<double>());
    };
    fmt::print("{:<20} {:>5} {:>14} {:>18} {:>14} {:>16}\n", "variant", "heads", "r_L (relative)",
               "slope log(-log r)", "step exponent", "log10 bound/meas");
    for (const auto& v : variants_json)
        fmt::print("{:<20} {:>5} {:>14.3e} {:>18} {:>14} {:>16}\n", v["variant"].get<std::string>(), v["heads"].get<int>(),
                   v["final_relative_residual"].get<double>(), number_or_dash(v["fitted_slope_log_neg_log_r"]),
                   number_or_dash(v["fitted_exponent"]), number_or_dash(v["bound_over_measured_log10_mean"]));
    fmt::print("log 3 = 1.10 is the theorems' doubly exponential slope; the step exponent (each seed fitted on its own, median over "
               "seeds) is 3 for their cubic step.\n"
               "bound violations: {} of {} rows with a bound, above round-off\nwrote {}/theory.csv, theory_summary.csv, "
               "theory.json, findings.json, verdicts.csv, manifest.json{}\n",
               violations, result.bound_rows_checked, out.string(), figures.empty() ? "" : fmt::format(", {} (each with its gnuplot script .gp)", fmt::join(figures, ", ")));
}

}  // namespace

std::function<void()> setup_theory(CLI::App& command) {
    auto options = std::make_shared<TheoryOptions>();
    options->network.layers = 12;
    command.add_option("--layers", options->network.layers, "Depth L")->capture_default_str()->transform(IntRange(1, 100));
    command.add_option("--heads", options->heads, "Heads of the multi-head variants (single-head ones always run)")
        ->capture_default_str()
        ->transform(IntRange(1, 64));
    // Every layer's residual is measured at its exact composite centre, a linear program (check_theory_settings).
    const std::string entries_limit = fmt::format("; tokens x d_model at most {}, for the exact centres", kMaxExactCenterEntries);
    CLI::Option* d_model = command.add_option("--d-model", options->network.d_model, "Model width d" + entries_limit)
                               ->capture_default_str()
                               ->transform(IntRange(1, 512));
    CLI::Option* tokens = command.add_option("--tokens", options->network.tokens, "Tokens n of the random input" + entries_limit)
                              ->capture_default_str()
                              ->transform(IntRange(2, 512));
    command.add_option("--d-qk", options->network.d_qk, "Query/key width per head (0 = d_model/heads)")
        ->capture_default_str()
        ->transform(IntRange(0, 512));
    command.add_option("--d-v", options->network.d_v, "Value width per head (0 = d_model/heads)")
        ->capture_default_str()
        ->transform(IntRange(0, 512));
    command.add_flag("--biases", options->network.biases, "Random biases in every projection");
    command.add_option("--init-scale", options->network.init_scale, "Weights ~ N(0, scale^2/fan_in)")
        ->capture_default_str()
        ->check(RealRange(0, 100, true));
    add_seed_count_option(command, options->seeds, "per variant", 1000)->capture_default_str();
    command.add_option("--input", options->input,
                       "Input X (n x d matrix: .npy, .csv, .safetensors:name) instead of random; its shape sets n and d (--tokens, --d-model if given must agree)")
        ->check(ReadableFile(true));
    add_common_options(command, options->common, OutFolder::defaults_to("out/theory"));
    add_device_option(command, options->common);
    return [options, tokens, d_model] {
        options->tokens_given = tokens->count() > 0;
        options->d_model_given = d_model->count() > 0;
        run_theory_command(*options);
    };
}

}  // namespace rankscope::cli
