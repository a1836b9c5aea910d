// rankscope paths check|count|sample — the path decomposition (Theorem 2.1) and path statistics.
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <regex>

#include "common.hpp"
#include "rankscope/e6_path_counts.hpp"
#include "rankscope/error.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/io.hpp"
#include "rankscope/models.hpp"
#include "rankscope/paths.hpp"
#include "rankscope/progress.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/tensor_file.hpp"

namespace rankscope::cli {
namespace {

struct PathsOptions {
    CommonOptions common;
    SanConfig network;
    bool skip = false;
    std::vector<double> alpha;
    int draws = 100;
    int batch = 4;
    std::string patterns_file;
};

void print_json_or(const CommonOptions& common, const nlohmann::json& document, const std::function<void()>& table) {
    if (common.format == "json") std::cout << json_text(document, 2) << "\n";
    else table();
}

void run_check(PathsOptions options) {
    Provenance provenance = start_run(options.common);
    options.network.block.attention_skip = options.skip;
    torch::manual_seed(options.common.seed);
    San network(options.network);
    network->to(torch::kDouble);
    const int batch = 2;
    const at::Tensor x = random_input(options.network, batch, torch::kDouble);
    const PathCheck check = check_path_decomposition(network, x);
    nlohmann::json document = {{"layers", options.network.layers}, {"heads", options.network.heads},
                               {"d_model", options.network.d_model}, {"tokens", options.network.tokens},
                               {"batch", batch},                     {"dtype", "float64"},
                               {"skip", options.skip},             {"biases", options.network.biases},
                               {"paths", static_cast<std::int64_t>(check.paths)},  // at most 1e6: enumerated
                               {"max_abs_error", check.max_abs_error},
                               {"max_abs_output", check.max_abs_output}};
    if (!options.common.out.empty()) {
        std::filesystem::create_directories(options.common.out);
        write_json_atomically(std::filesystem::path(options.common.out) / "paths_check.json", document, provenance);
        write_manifest(options.common.out, provenance, {{"outputs", {"paths_check.json"}}});
    }
    print_json_or(options.common, document, [&] {
        fmt::print("{} paths (L={}, H={}, skip={}): max |sum over paths - forward| = {:.3e} (output scale {:.3e})\n",
                   check.paths, options.network.layers, options.network.heads, options.skip ? "yes" : "no",
                   check.max_abs_error, check.max_abs_output);
        if (!options.common.out.empty())
            fmt::print("wrote {}/paths_check.json, manifest.json\n", options.common.out);
    });
}

void run_count(const PathsOptions& options) {
    Provenance provenance = start_run(options.common);
    const bool with_alpha = options.network.layers > 0 && options.network.heads > 0 && !options.alpha.empty();
    const std::vector<ArchitecturePaths> tables =
        options.network.layers > 0
            ? std::vector<ArchitecturePaths>{custom_path_counts(options.network.layers, options.network.heads,
                                                                with_alpha ? options.alpha : std::vector<double>{})}
            : path_count_tables(known_architectures());
    const CsvTable table = path_counts_table(tables, with_alpha).to_csv();
    nlohmann::json document = nlohmann::json::array();
    for (const auto& t : tables) {
        nlohmann::json entry = {{"architecture", t.architecture.name}, {"layers", t.architecture.layers},
                                {"heads", t.architecture.heads}, {"mean_length", t.mean_length}};
        if (with_alpha) entry["alpha_mean_length"] = mean_path_length(t.rows, true);
        // The distribution itself, as the CSV has it (the JSON held the mean lengths only): counts below 2^53 as
        // integers (exact), larger ones as numbers.
        nlohmann::json lengths = nlohmann::json::array();
        for (const auto& r : t.rows) {
            nlohmann::json row = {{"length", r.length}, {"share", r.share}};
            row["count"] = r.count < 9007199254740992.0 ? nlohmann::json(static_cast<std::uint64_t>(r.count)) : nlohmann::json(r.count);
            if (with_alpha) row["alpha_share"] = r.alpha_share;
            lengths.push_back(row);
        }
        entry["lengths"] = lengths;
        document.push_back(entry);
    }
    if (!options.common.out.empty()) {
        const std::filesystem::path out = options.common.out;
        std::filesystem::create_directories(out);
        write_csv_atomically(out / "path_counts.csv", table, provenance);
        write_json_atomically(out / "path_counts.json", {{"architectures", document}}, provenance);
        // Several architectures: x = k/L and y = share × L, so that models of different depth compare (path_counts_figure).
        std::vector<std::string> architectures;
        for (const auto& entry : document) architectures.push_back(entry["architecture"].get<std::string>());
        const auto figures = render_figure(out, path_counts_figure(architectures, !options.alpha.empty()),
                                           csv_provenance_lines(provenance));
        std::vector<std::string> outputs = {"path_counts.csv", "path_counts.json"};
        if (options.network.layers == 0) {  // the built-in table: judged against the paper
            write_findings(out, path_count_findings(path_count_tables(known_architectures())), provenance);
            outputs.insert(outputs.end(), {"findings.json", "verdicts.csv"});
        } else {
            remove_findings(out);
        }
        write_manifest(out, provenance, {{"outputs", outputs}, {"figures", figures}});
    }
    if (options.common.format == "csv") std::cout << csv_provenance_lines(provenance) << table.to_string();
    else
        print_json_or(options.common, document, [&] {
            fmt::print("{:<12} {:>6} {:>6} {:>12} {:>14}\n", "architecture", "L", "H", "mean length", "alpha-weighted");
            for (const auto& e : document)
                fmt::print("{:<12} {:>6} {:>6} {:>12.3f} {:>14}\n", e["architecture"].get<std::string>(),
                           e["layers"].get<int>(), e["heads"].get<int>(), e["mean_length"].get<double>(),
                           e.contains("alpha_mean_length") ? fmt::format("{:.3f}", e["alpha_mean_length"].get<double>()) : "-");
            if (!options.common.out.empty())
                fmt::print("wrote {}/path_counts.csv, path_counts.json, {}manifest.json and figures\n", options.common.out,
                           options.network.layers == 0 ? "findings.json, verdicts.csv, " : "");
        });
}

// A `model --dump` (or any file with the same names): every layer's [B, H, n, n] pattern, of one shape, and the
// attention_mask [B, n] when the file holds one, so that padded tokens are left out of the products as `model` does.
struct StoredPatterns {
    std::vector<at::Tensor> patterns;  // float32 or float64 (float16 and bfloat16 are widened to float32, exactly)
    at::Tensor attention_mask;         // undefined: every token is real
    FloatFloor floor = FloatFloor::float32;  // the coarsest stored dtype's epsilon, marked in the figure
};

// The figure's floor of a stored dtype, coarsest first: a file mixing dtypes is as precise as its coarsest layer.
FloatFloor stored_floor(DType dtype) {
    switch (dtype) {
        case DType::BF16: return FloatFloor::bfloat16;
        case DType::F16: return FloatFloor::float16;
        case DType::F32: return FloatFloor::float32;
        default: return FloatFloor::float64;
    }
}

StoredPatterns load_patterns(const std::string& path) {
    SafetensorsFile file(path);
    StoredPatterns stored;
    for (int l = 0;; ++l) {
        const std::string name = block_hook(l, "attn.hook_pattern");
        if (!file.contains(name)) break;
        // float32 or float64 as `model --dump` writes them; float16 or bfloat16 as a half-precision model's hooks do.
        const DType dtype = file.view(name).dtype;
        if (dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::F32 && dtype != DType::F64)
            throw Error("expected float16, bfloat16, float32 or float64 attention patterns, found " + dtype_name(dtype),
                        path + ":" + name);
        if (l == 0 || stored_floor(dtype) < stored.floor) stored.floor = stored_floor(dtype);
        stored.patterns.push_back(read_tensor(file, name));
    }
    // Every pattern tensor of the file is one of the layers read: blocks.2 without blocks.1 was read as one layer, and
    // blocks.00 beside blocks.0 was left out, without a word.
    const std::regex pattern_name(R"(blocks\.([0-9]+)\.attn\.hook_pattern)");
    for (const auto& name : file.names()) {
        std::smatch match;
        if (!std::regex_match(name, match, pattern_name)) continue;
        const std::string index = match[1];
        if (index.size() > 1 && index[0] == '0')
            throw Error("a layer index with a leading zero (layers are blocks.0, blocks.1, ...)", path + ":" + name);
        if (index.size() > 9 || std::stoi(index) >= static_cast<int>(stored.patterns.size()))
            throw Error(fmt::format("no {} before it: layers must run from blocks.0 without a gap",
                                    block_hook(static_cast<int>(stored.patterns.size()), "attn.hook_pattern")),
                        path + ":" + name);
    }
    // After the names: blocks.1..4 without blocks.0 is named there ("no blocks.0... before it"), not as "no tensors".
    if (stored.patterns.empty()) throw Error("no blocks.{l}.attn.hook_pattern tensors", path);
    const auto where_of = [&](std::size_t l) { return path + ":" + block_hook(static_cast<int>(l), "attn.hook_pattern"); };
    check_pattern_shapes(stored.patterns, where_of);
    const auto& first = stored.patterns[0];
    stored.attention_mask = read_attention_mask(file, {first.size(0), first.size(2)});
    // Checked in the stored dtype (a row sums to 1 within its rounding), then widened: the products run in float64.
    check_attention_patterns(stored.patterns, stored.attention_mask, where_of, path + ":attention_mask");
    for (auto& p : stored.patterns)
        if (p.scalar_type() == at::kHalf || p.scalar_type() == at::kBFloat16) p = p.to(at::kFloat);
    return stored;
}

void run_sample(PathsOptions options) {
    Provenance provenance = start_run(options.common);
    std::vector<at::Tensor> patterns;
    at::Tensor attention_mask;
    FloatFloor floor = FloatFloor::float64;  // the random SAN runs in float64
    std::string source = options.patterns_file;
    if (!options.patterns_file.empty()) {
        auto stored = load_patterns(options.patterns_file);
        patterns = std::move(stored.patterns);
        attention_mask = std::move(stored.attention_mask);
        floor = stored.floor;
    } else {
        // The recorded attention maps: batch x layers x heads x tokens^2 float64 values.
        check_size("4 x layers x heads x tokens^2", 4.0 * options.network.layers * options.network.heads *
                                                          options.network.tokens * options.network.tokens,
                   double(1 << 26), "--layers, --heads, --tokens");
        options.network.validate();
        torch::manual_seed(options.common.seed);
        options.network.block.attention_skip = options.skip;
        San network(options.network);
        network->to(torch::kDouble);
        Recorder recorder;
        torch::NoGradGuard no_grad;
        network->forward(random_input(options.network, options.batch, torch::kDouble), &recorder);
        for (int l = 0; l < options.network.layers; ++l) patterns.push_back(recorder.get(block_hook(l, "attn.hook_pattern")));
        source = "random SAN";
    }
    const auto samples = sample_path_products(patterns, options.draws, options.common.seed, attention_mask);
    for (const auto& s : samples)
        check_finite(options.common, s.relative_residual, "a path product's relative residual",
                     fmt::format("{}, path length {}, draw {}, layers {}", source, s.length, s.draw, join_indices(s.layers)));
    const CsvTable table = path_samples_table(samples).to_csv();
    const std::filesystem::path out = options.common.out;
    std::filesystem::create_directories(out);
    write_csv_atomically(out / "paths.csv", table, provenance);
    const auto figures = render_figure(out,
                                       paths_figure("Attention products along random paths",
                                                    {"relative_residual", "relative_residual_frobenius"}, {},
                                                    floor),
                                       csv_provenance_lines(provenance));
    write_manifest(out, provenance, {{"inputs", {source}}, {"outputs", {"paths.csv"}}, {"figures", figures}});
    // Medians over the draws (and samples): the composite residual (the paper's; above 1 possible) and the Frobenius
    // one (the distance to the nearest rank-1 matrix, in [0, 1]).
    fmt::print("{:>6} {:>18} {:>18}\n", "length", "median composite", "median Frobenius");
    for (int k = 1; k <= static_cast<int>(patterns.size()); ++k) {
        std::vector<double> composite, frobenius;
        for (const auto& s : samples)
            if (s.length == k) composite.push_back(s.relative_residual), frobenius.push_back(s.relative_residual_frobenius);
        fmt::print("{:>6} {:>18.3e} {:>18.3e}\n", k, median(composite), median(frobenius));
    }
    fmt::print("wrote {}/paths.csv\n", out.string());
}

void add_network_options(CLI::App& command, PathsOptions& options, int max_layers, int max_heads) {
    command.add_option("--layers", options.network.layers, "Depth L")->capture_default_str()->transform(IntRange(1, max_layers));
    command.add_option("--heads", options.network.heads, "Heads H")->capture_default_str()->transform(IntRange(1, max_heads));
    command.add_option("--d-model", options.network.d_model, "Model width")->capture_default_str()->transform(IntRange(1, 512));
    command.add_option("--d-qk", options.network.d_qk, "Query/key width per head (0 = d_model/heads)")
        ->capture_default_str()
        ->transform(IntRange(0, 512));
    command.add_option("--d-v", options.network.d_v, "Value width per head (0 = d_model/heads)")
        ->capture_default_str()
        ->transform(IntRange(0, 512));
    // At least 2, as theory's and a --patterns file's samples: one token is a 1 x 1 product, residual 0 whatever the
    // network (paths sample --tokens 1 reported 0 at every length).
    command.add_option("--tokens", options.network.tokens, "Tokens n")->capture_default_str()->transform(IntRange(2, 512));
    command.add_flag("--skip", options.skip, "Attention skip connections (H+1 choices per layer)");
}

}  // namespace

std::function<void()> setup_paths(CLI::App& command) {
    auto options = std::make_shared<PathsOptions>();
    auto action = std::make_shared<std::function<void()>>();
    command.require_subcommand(1);

    CLI::App* check = command.add_subcommand("check", "Enumerate every path and compare the sum with the forward output");
    options->network.layers = 3;
    options->network.heads = 2;
    options->network.d_model = 12;
    options->network.tokens = 8;
    add_network_options(*check, *options, 12, 16);
    check->add_flag("--biases", options->network.biases, "Random biases in every projection");
    add_common_options(*check, options->common, OutFolder::optional(), {"json"});
    // The decomposition's error is of float64 sums of a random network's paths: never NaN/Inf at the sizes allowed (the
    // flag was accepted and ignored).
    remove_common_options(*check, {"--allow-nonfinite"});
    check->callback([options, action] { *action = [options] { run_check(*options); }; });

    CLI::App* count = command.add_subcommand("count", "Number and share of paths of each length (built-in table without --layers)");
    auto* count_layers = count->add_option("--layers", options->network.layers, "Depth L (omit for the E6 table)")
                             ->transform(IntRange(1, 100));
    count->add_option("--heads", options->network.heads, "Heads H")->transform(IntRange(1, 128));
    count->add_option("--alpha", options->alpha, "Skip ratio per layer, a_1,...,a_L (one per layer, each in [0, 1])")
        ->delimiter(',')
        ->check(RealRange(0, 1));
    add_common_options(*count, options->common, OutFolder::optional(), {"csv", "json"});
    // A closed form: no random draw and no non-finite result (--seed and --allow-nonfinite were accepted and ignored).
    // --threads stays: a sweep gives it to every cell.
    remove_common_options(*count, {"--seed", "--allow-nonfinite"});
    count->callback([options, action, count_layers, count] {
        if (count_layers->count() == 0) {
            for (const char* flag : {"--heads", "--alpha"})
                if (count->count(flag))
                    throw CLI::ValidationError(flag, std::string(flag) + " needs --layers; without it, the built-in E6 table");
            options->network.layers = 0;
        } else if (count->count("--heads") == 0) {  // it read H = 2, the default of check and sample
            throw CLI::ValidationError("--layers", "--layers needs --heads, the heads per layer H");
        } else if (!options->alpha.empty() && options->alpha.size() != static_cast<std::size_t>(options->network.layers)) {
            throw CLI::ValidationError("--alpha", fmt::format("{} values for {} layers (one per layer)",
                                                              options->alpha.size(), options->network.layers));
        }
        *action = [options] { run_count(*options); };
    });

    CLI::App* sample = command.add_subcommand("sample", "Products of attention matrices along random paths (E2)");
    add_network_options(*sample, *options, 64, 64);
    sample->add_option("--draws", options->draws, "Draws per path length")->capture_default_str()->transform(IntRange(1, 100000));
    sample->add_option("--patterns", options->patterns_file,
                       "Recorded run (.safetensors with blocks.{l}.attn.hook_pattern, and attention_mask [B, n] if the batch "
                       "was padded: padded tokens are left out, as in `model`) instead of a random SAN")
        ->check(ReadableFile());
    add_common_options(*sample, options->common, OutFolder::defaults_to("out/paths"));
    // Products of stochastic maps (a random SAN's, or a --patterns file's, whose NaN/Inf are refused as input) are
    // finite: the flag was accepted and ignored.
    remove_common_options(*sample, {"--allow-nonfinite"});
    sample->callback([options, action, sample] {
        // A recorded run has its own depth, heads and tokens: a flag for the random SAN would be silently ignored.
        if (!options->patterns_file.empty())
            for (const char* flag : {"--layers", "--heads", "--d-model", "--d-qk", "--d-v", "--tokens", "--skip"})
                if (sample->count(flag))
                    throw CLI::ValidationError(flag, std::string(flag) +
                                                         " describes the random SAN, not a --patterns file, which has its own");
        *action = [options] { run_sample(*options); };
    });

    return [action] { (*action)(); };
}

}  // namespace rankscope::cli
