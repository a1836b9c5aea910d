// rankscope failure-modes — beyond the paper: rank collapse vs entropy collapse at initialisation over the query/key
// weight scale and depth (Zhai et al. 2023; Giorlandino & Goldt 2025): a phase diagram with its checks.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/failure_modes.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"

namespace rankscope::cli {
namespace {

struct FailureModesOptions {
    CommonOptions common;
    FailureModesSettings settings;
};

void run_failure_modes(FailureModesOptions options) {
    const Provenance provenance = start_run(options.common);
    FailureModesSettings& settings = options.settings;
    settings.seed = options.common.seed;
    settings.validate();
    const FailureModesResult result = run_failure_modes_experiment(settings);
    for (const auto& r : result.rows)
        check_finite(options.common, r.normalized_entropy + r.relative_residual + r.mean_cosine, "an entropy, residual or cosine",
                     fmt::format("{}, s = {}, seed {}, layer {}", r.variant, r.query_key_scale, r.seed, r.layer));
    const Findings findings = failure_modes_findings(result, settings);
    const Table summary = failure_modes_summary_table(result, settings);
    if (!options.common.out.empty()) {
        const std::filesystem::path out = options.common.out;
        std::filesystem::create_directories(out);
        write_csv_atomically(out / "failure_modes.csv", failure_modes_table(result).to_csv(), provenance);
        write_csv_atomically(out / "failure_modes_summary.csv", summary.to_csv(), provenance);
        write_findings(out, findings, provenance);
        const auto figures = render_figure(out,
                                           failure_modes_figure(settings.variants, settings.query_key_scales, settings.layers,
                                                                entropy_freezing_scale(settings.tokens)),
                                           csv_provenance_lines(provenance));
        write_manifest(out, provenance,
                       {{"subcommand", "failure-modes"},
                        {"outputs", {"failure_modes.csv", "failure_modes_summary.csv", "findings.json", "verdicts.csv"}},
                        {"figures", figures}});
    }
    if (print_csv_or_json(options.common, summary, findings)) return;
    // The first and the last layer of every (variant, scale).
    fmt::print("{:<12} {:>8} {:>6} {:>10} {:>12}  {}\n", "variant", "s", "layer", "entropy", "residual", "regime");
    const auto& variant = summary.column("variant").texts;
    const auto& scale = summary.column("query_key_scale").reals;
    const auto& layer = summary.column("layer").integers;
    const auto& entropy = summary.column("normalized_entropy_mean").reals;
    const auto& residual = summary.column("relative_residual_mean").reals;
    const auto& regime = summary.column("regime").texts;
    for (std::size_t r = 0; r < summary.rows(); ++r)
        if (layer[r] == 1 || layer[r] == settings.layers)
            fmt::print("{:<12} {:>8g} {:>6} {:>10.4f} {:>12.3e}  {}\n", variant[r], scale[r], layer[r], entropy[r], residual[r], regime[r]);
    for (const auto& c : findings.checks) fmt::print("[{}] {}: {}\n", verdict_name(c.verdict), c.claim, c.measured);
}

}  // namespace

std::function<void()> setup_failure_modes(CLI::App& command) {
    auto options = std::make_shared<FailureModesOptions>();
    FailureModesSettings& s = options->settings;
    command.add_option("--query-key-scales", s.query_key_scales, "Scales s of W_Q and W_K (~ N(0, s^2/d))")
        ->delimiter(',')
        ->capture_default_str()
        ->check(RealRange(0, 100, true));
    command.add_option("--variants", s.variants, "SAN (pure attention) and/or transformer (attention + MLP, skips, post-LN)")
        ->delimiter(',')
        ->capture_default_str()
        ->check(OneOf({"SAN", "transformer"}, "variant"));
    command.add_option("--layers", s.layers, "Depth L (every layer is measured)")->capture_default_str()->transform(IntRange(1, 256));
    command.add_option("--d-model", s.d_model, "Model width d")->capture_default_str()->transform(IntRange(1, 1024));
    command.add_option("--heads", s.heads, "Attention heads")->capture_default_str()->transform(IntRange(1, 64));
    command.add_option("--tokens", s.tokens, "Tokens n of the random input")->capture_default_str()->transform(IntRange(2, 1024));
    command.add_option("--samples", s.samples, "Input samples per seed")->capture_default_str()->transform(IntRange(1, 1024));
    add_seed_count_option(command, s.seeds, "per scale and variant", 1000)->capture_default_str();
    command.add_option("--entropy-threshold", s.entropy_collapse_below, "Entropy collapse: attention entropy below this share of ln n")
        ->capture_default_str()
        ->check(RealRange(0, 1, true));
    command.add_option("--rank-threshold", s.rank_collapse_below, "Rank collapse: relative residual below this")
        ->capture_default_str()
        ->check(RealRange(0, 1, true));
    add_common_options(command, options->common, OutFolder::optional(), {"csv", "json"});
    return [options] {
        const auto& s = options->settings;
        check_size("samples x tokens x d_model x layers",
                   static_cast<double>(s.samples) * s.tokens * s.d_model * s.layers, 1 << 26, "--samples, --tokens, --d-model, --layers");
        check_size("samples x heads x tokens^2 x layers", static_cast<double>(s.samples) * s.heads * s.tokens * s.tokens * s.layers,
                   1 << 26, "--samples, --heads, --tokens, --layers");
        run_failure_modes(*options);
    };
}

}  // namespace rankscope::cli
