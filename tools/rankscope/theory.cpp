// rankscope theory — random SAN variants collapsing layer by layer, beside the theorems' bounds (SPEC.md §3).
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>

#include <torch/torch.h>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/io.hpp"
#include "rankscope/theory.hpp"

namespace rankscope::cli {
namespace {

struct TheoryOptions {
    CommonOptions common;
    SanConfig network;
    int heads = 4;
    int seeds = 5;
    std::string input;  // a matrix file for X instead of random input
};

const char* kBoundDefinition =
    "per layer: r_l <= c_l r_(l-1)^3, c_l = 4*gamma*beta*H*lambda/sqrt(d_qk); r = ||X - 1x*^T||_(1,inf) at the exact "
    "centre x*; gamma = sqrt(d_qk)*||P - 1p^T|| / (4*||R W_QK R^T||) with p the attention row of a query at x* "
    "(softmax sensitivity at this layer's attention entries); beta = ||W_QK||*||W_V W_O|| (composite norm of head-wise "
    "maxima); lambda = MLP Lipschitz bound (activation constant * ||W_in||*||W_out||) times 1/sigma for affine LN";

void run_theory_command(TheoryOptions options) {
    Provenance provenance = start_run(options.common);
    const std::filesystem::path out = options.common.out.empty() ? "out/theory" : options.common.out;
    at::Tensor given;
    if (!options.input.empty()) {
        const HostArray array = read_matrix_file(options.input);
        if (array.shape.size() != 2) throw Error("--input must be one n x d matrix", options.input);
        const auto values = to_double_vector(array.view());
        for (double v : values)
            if (!std::isfinite(v)) throw Error("--input has NaN or Inf entries", options.input);
        given = torch::tensor(values, torch::kDouble).view({array.shape[0], array.shape[1]});
        // The same limits as --tokens and --d-model.
        check_size("--input rows (tokens)", static_cast<double>(array.shape[0]), 512, options.input);
        check_size("--input columns (d_model)", static_cast<double>(array.shape[1]), 512, options.input);
        if (array.shape[0] < 2) throw Error("--input needs at least 2 rows (tokens)", options.input);
        options.network.tokens = static_cast<int>(array.shape[0]);
        options.network.d_model = static_cast<int>(array.shape[1]);
    }
    // Each job keeps one network's attention maps alive: heads x tokens^2 x layers float64 values.
    check_size("heads x tokens^2 x layers", double(options.heads) * options.network.tokens * options.network.tokens *
                                                 options.network.layers,
               double(1 << 26), "--heads, --tokens, --layers");
    options.network.validate();
    const auto variants = theory_variants(options.network, options.heads);

    TheorySettings settings;
    settings.network = options.network;
    settings.heads = options.heads;
    settings.seeds = options.seeds;
    settings.seed = options.common.seed;
    if (!options.input.empty()) settings.input_label = options.input;
    const TheoryResult result = run_theory_experiment(settings, given.defined() ? &given : nullptr);
    // A diverged network (e.g. a huge --init-scale) gives NaN/Inf residuals: an error, not a table of NaN rows.
    for (const auto& r : result.rows) {
        const std::string where = fmt::format("variant {}, seed {}, layer {}", r.variant, r.seed, r.layer);
        check_finite(options.common, r.residual, "the residual", where);
        check_finite(options.common, r.relative_residual, "the relative residual", where);
    }
    std::filesystem::create_directories(out);

    CsvTable table;
    table.columns = {"variant", "heads", "seed", "layer", "residual", "relative_residual", "gamma", "beta", "lambda",
                     "c", "bound_step", "bound_cumulative", "bound_theorem", "at_round_off"};
    for (const auto& r : result.rows)
        table.add({r.variant, std::to_string(r.heads), std::to_string(r.seed), std::to_string(r.layer),
                   format_number(r.residual), format_number(r.relative_residual), format_number(r.gamma),
                   format_number(r.beta), format_number(r.lambda), format_number(r.c), format_number(r.bound_step),
                   format_number(r.bound_cumulative), format_number(r.bound_theorem), r.at_round_off ? "1" : "0"});
    write_csv_atomically(out / "theory.csv", table, provenance);

    CsvTable summary;
    // Bounds are averaged over the seeds whose residual is above round-off (nan when none is).
    summary.columns = {"variant", "layer", "relative_residual_mean", "residual_mean", "bound_step_mean",
                       "bound_cumulative_mean"};
    for (const auto& s : result.layers)
        summary.add({s.variant, std::to_string(s.layer), format_number(s.relative_residual_mean), format_number(s.residual_mean),
                     format_number(s.bound_step_mean), format_number(s.bound_cumulative_mean)});
    write_csv_atomically(out / "theory_summary.csv", summary, provenance);
    auto json_number = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
    nlohmann::json variants_json = nlohmann::json::array();
    for (const auto& v : result.variants)
        variants_json.push_back({{"variant", v.variant},
                                 {"heads", v.heads},
                                 {"fitted_slope_log_neg_log_r", json_number(v.fitted_slope)},
                                 {"fitted_base", json_number(v.fitted_base)},
                                 {"fitted_exponent", json_number(v.fitted_exponent)},
                                 {"final_relative_residual", v.final_relative_residual},
                                 {"bound_over_measured_log10_mean", json_number(v.bound_over_measured_log10_mean)}});
    const int violations = result.bound_violations;
    nlohmann::json document = {{"bound_definition", kBoundDefinition},
                               {"configuration",
                                {{"layers", options.network.layers}, {"d_model", options.network.d_model},
                                 {"tokens", options.network.tokens}, {"heads_multi", options.heads},
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
    render_figure(out, theory_bounds_figure(bounded_names), csv_provenance_lines(provenance));
    const auto figures = render_figure(out, theory_figure(variant_names), csv_provenance_lines(provenance));
    write_findings(out, theory_findings(result, settings), provenance);
    write_manifest(out, provenance, {{"outputs", {"theory.csv", "theory_summary.csv", "theory.json", "findings.json", "verdicts.csv"}}, {"figures", figures}});

    auto number_or_dash = [](const nlohmann::json& value) {
        return value.is_null() ? std::string("-") : fmt::format("{:.2f}", value.get<double>());
    };
    fmt::print("{:<20} {:>5} {:>14} {:>18} {:>14} {:>16}\n", "variant", "heads", "r_L (relative)",
               "slope log(-log r)", "step exponent", "log10 bound/meas");
    for (const auto& v : variants_json)
        fmt::print("{:<20} {:>5} {:>14.3e} {:>18} {:>14} {:>16}\n", v["variant"].get<std::string>(), v["heads"].get<int>(),
                   v["final_relative_residual"].get<double>(), number_or_dash(v["fitted_slope_log_neg_log_r"]),
                   number_or_dash(v["fitted_exponent"]),
                   v["bound_over_measured_log10_mean"].is_null()
                       ? "-"
                       : fmt::format("{:.2f}", v["bound_over_measured_log10_mean"].get<double>()));
    fmt::print("log 3 = 1.10 is the theorems' doubly exponential slope; a step exponent of 3 is their cubic step.\n"
               "bound violations: {} (rows with a bound, above round-off)\nwrote {}/theory.csv, theory_summary.csv, theory.json, "
               "manifest.json{}\n",
               violations, out.string(), figures.empty() ? "" : ", theory.{svg,png,pdf}, theory_bounds.{svg,png,pdf}");
}

}  // namespace

std::function<void()> setup_theory(CLI::App& command) {
    auto options = std::make_shared<TheoryOptions>();
    options->network.layers = 12;
    command.add_option("--layers", options->network.layers, "Depth L")->capture_default_str()->transform(IntRange(1, 100));
    command.add_option("--heads", options->heads, "Heads of the multi-head variants (single-head ones always run)")
        ->capture_default_str()
        ->transform(IntRange(1, 64));
    command.add_option("--d-model", options->network.d_model, "Model width d")->capture_default_str()->transform(IntRange(1, 512));
    command.add_option("--tokens", options->network.tokens, "Tokens n of the random input")
        ->capture_default_str()
        ->transform(IntRange(2, 512));
    command.add_option("--d-qk", options->network.d_qk, "Query/key width per head (0 = d_model/heads)")
        ->capture_default_str()
        ->transform(IntRange(0, 512));
    command.add_flag("--biases", options->network.biases, "Random biases in every projection");
    command.add_option("--init-scale", options->network.init_scale, "Weights ~ N(0, scale^2/fan_in)")
        ->capture_default_str()
        ->check(RealRange(0, 100, true));
    command.add_option("--seeds", options->seeds, "Seeds per variant (seed, seed+1, ...)")
        ->capture_default_str()
        ->transform(IntRange(1, 1000));
    command.add_option("--input", options->input,
                       "Input X (n x d matrix: .npy, .csv, .safetensors:name) instead of random; sets --tokens and --d-model")
        ->check(ReadableFile(true));
    add_common_options(command, options->common, false);
    return [options] { run_theory_command(*options); };
}

}  // namespace rankscope::cli
