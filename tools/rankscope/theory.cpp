// rankscope theory — random SAN variants collapsing layer by layer, beside the theorems' bounds (SPEC.md §3).
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/io.hpp"
#include "rankscope/progress.hpp"
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

    // One job per (variant, seed), run in parallel (GLPK is re-entrant; each job builds its own network).
    const std::size_t jobs = variants.size() * static_cast<std::size_t>(options.seeds);
    std::vector<std::vector<TheoryRow>> results(jobs);
    {
        Progress progress("theory", static_cast<long>(jobs));
        std::mutex progress_mutex;
        at::parallel_for(0, static_cast<std::int64_t>(jobs), 1, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t job = begin; job < end; ++job) {
                const auto& variant = variants[static_cast<std::size_t>(job) / static_cast<std::size_t>(options.seeds)];
                const auto seed = options.common.seed + static_cast<std::uint64_t>(job % options.seeds);
                results[static_cast<std::size_t>(job)] = run_theory(variant, seed, given.defined() ? &given : nullptr);
                std::lock_guard<std::mutex> lock(progress_mutex);
                progress.advance();
            }
        });
    }
    std::vector<TheoryRow> rows;
    std::map<std::string, std::vector<TheoryRow>> by_variant;
    for (const auto& job_rows : results) {
        for (const auto& row : job_rows) by_variant[row.variant].push_back(row);
        rows.insert(rows.end(), job_rows.begin(), job_rows.end());
    }
    // A diverged network (e.g. a huge --init-scale) gives NaN/Inf residuals: an error, not a table of NaN rows.
    for (const auto& r : rows) {
        const std::string where = fmt::format("variant {}, seed {}, layer {}", r.variant, r.seed, r.layer);
        check_finite(options.common, r.residual, "the residual", where);
        check_finite(options.common, r.relative_residual, "the relative residual", where);
    }
    std::filesystem::create_directories(out);

    CsvTable table;
    table.columns = {"variant", "heads", "seed", "layer", "residual", "relative_residual", "gamma", "beta", "lambda",
                     "c", "bound_step", "bound_cumulative", "bound_theorem", "at_round_off"};
    int violations = 0;
    for (const auto& r : rows) {
        table.add({r.variant, std::to_string(r.heads), std::to_string(r.seed), std::to_string(r.layer),
                   format_number(r.residual), format_number(r.relative_residual), format_number(r.gamma),
                   format_number(r.beta), format_number(r.lambda), format_number(r.c), format_number(r.bound_step),
                   format_number(r.bound_cumulative), format_number(r.bound_theorem), r.at_round_off ? "1" : "0"});
        if (!r.at_round_off && !std::isnan(r.bound_step) && r.residual > r.bound_step * (1 + 1e-9)) ++violations;
    }
    write_csv_atomically(out / "theory.csv", table, provenance);

    // Summary per variant: mean over seeds per layer, fitted rate, tightness.
    CsvTable summary;
    // Bounds are averaged over the seeds whose residual is above round-off (nan when none is).
    summary.columns = {"variant", "layer", "relative_residual_mean", "residual_mean", "bound_step_mean",
                       "bound_cumulative_mean"};
    nlohmann::json variants_json = nlohmann::json::array();
    for (const auto& variant : variants) {
        const auto& v_rows = by_variant[variant.name];
        // sums: relative, residual, bound_step, bound_cumulative, rows, rows with a bound above round-off
        std::map<int, std::array<double, 6>> per_layer;
        double tightness_sum = 0;
        int tightness_count = 0;
        for (const auto& r : v_rows) {
            auto& s = per_layer[r.layer];
            s[0] += r.relative_residual;
            s[1] += r.residual;
            s[4] += 1;
            if (!std::isnan(r.bound_step) && !r.at_round_off) {
                s[2] += r.bound_step;
                s[3] += r.bound_cumulative;
                s[5] += 1;
            }
            if (!std::isnan(r.bound_step) && !r.at_round_off) {
                tightness_sum += std::log10(r.bound_step / r.residual);
                ++tightness_count;
            }
        }
        for (const auto& [layer, s] : per_layer)
            summary.add({variant.name, std::to_string(layer), format_number(s[0] / s[4]), format_number(s[1] / s[4]),
                         s[5] > 0 ? format_number(s[2] / s[5]) : "nan", s[5] > 0 ? format_number(s[3] / s[5]) : "nan"});
        const double slope = fitted_collapse_rate(v_rows);
        const double exponent = fitted_collapse_exponent(v_rows);
        variants_json.push_back({{"variant", variant.name},
                                 {"heads", variant.config.heads},
                                 {"fitted_slope_log_neg_log_r", std::isnan(slope) ? nlohmann::json(nullptr) : nlohmann::json(slope)},
                                 {"fitted_base", std::isnan(slope) ? nlohmann::json(nullptr) : nlohmann::json(std::exp(slope))},
                                 {"fitted_exponent", std::isnan(exponent) ? nlohmann::json(nullptr) : nlohmann::json(exponent)},
                                 {"final_relative_residual", per_layer.rbegin()->second[0] / per_layer.rbegin()->second[4]},
                                 {"bound_over_measured_log10_mean",
                                  tightness_count ? nlohmann::json(tightness_sum / tightness_count) : nlohmann::json(nullptr)}});
    }
    write_csv_atomically(out / "theory_summary.csv", summary, provenance);
    nlohmann::json document = {{"bound_definition", kBoundDefinition},
                               {"configuration",
                                {{"layers", options.network.layers}, {"d_model", options.network.d_model},
                                 {"tokens", options.network.tokens}, {"heads_multi", options.heads},
                                 {"seeds", options.seeds}, {"init_scale", options.network.init_scale},
                                 {"input", options.input.empty() ? "random N(0,1) per seed" : options.input},
                                 {"dtype", "float64"}}},
                               {"bound_violations", violations},
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
    write_manifest(out, provenance, {{"outputs", {"theory.csv", "theory_summary.csv", "theory.json"}}, {"figures", figures}});

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
