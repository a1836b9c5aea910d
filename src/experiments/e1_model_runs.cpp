// One `rankscope model` run as a library unit: which model an argument names, its weights, the batch from text, the
// run over weights kinds, the finiteness checks and the tables written. The command line and the Python module both
// call these, so their tables are the same.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/progress.hpp"
#include "rankscope/tokenizer.hpp"
#include "rankscope/use_lite.hpp"
#include "rankscope/warnings.hpp"

namespace rankscope {

std::string model_display_name(const std::string& folder) {
    // Absolute and normal: "." and ".." name the folders they stand for.
    std::filesystem::path path = std::filesystem::absolute(folder).lexically_normal();
    if (path.filename().empty()) path = path.parent_path();  // a trailing separator
    return control_characters_as_spaces(path.filename().string());
}

ModelSource resolve_model_source(const std::string& argument) {
    ModelSource source;
    source.argument = argument;
    if (!is_builtin_hf_config(argument) && argument != "use-lite") {
        // A folder that cannot be looked at (a symbolic-link loop, a path component that is a file) is named itself;
        // the USE-lite probe below named "<folder>/model.json" with the library's "status:" prefix.
        std::error_code error;
        (void)std::filesystem::status(argument, error);
        if (error && error != std::errc::no_such_file_or_directory)
            throw Error("cannot open the model folder: " + error.message(), argument);
        // A name that is no folder: say what --model takes (it said "cannot open config file: No such file or
        // directory (bert-large-cased/config.json)").
        if (error == std::errc::no_such_file_or_directory)
            throw Error(fmt::format("no such model folder, and not a built-in configuration ({}) or use-lite: point it "
                                    "at a downloaded Hugging Face folder",
                                    fmt::join(builtin_hf_config_names(), ", ")),
                        argument);
        // A file named as the model: said (it read as "cannot open config file: Not a directory (FILE/config.json)").
        if (!std::filesystem::is_directory(argument, error))
            throw Error("a file, not a model folder: name the folder that holds config.json and the weights", argument);
        // A `rankscope pretrain` run folder holds a config.json but no weights or tokenizer beside it: it failed on
        // "no tokenizer" with a hint at --inputs, where the user meant one of its checkpoints.
        const std::filesystem::path folder(argument);
        if (std::filesystem::is_directory(folder / "checkpoints", error) && std::filesystem::exists(folder / "settings.json", error) &&
            !std::filesystem::exists(folder / "model.safetensors", error))
            throw Error(fmt::format("a pretraining run's folder, not a model: its checkpoints are {0}/final (the last) and "
                                    "{0}/checkpoints/step-NNNNNN (`rankscope dynamics --checkpoints {0}` reads them all)",
                                    argument),
                        argument);
    }
    if (!is_builtin_hf_config(argument) && is_use_lite(argument)) {
        source.kind = ModelSource::UseLite;
        source.name = "use-lite";
        source.directory = find_use_lite(argument);
        source.config = load_use_lite(source.directory)->config();
    } else if (names_builtin_hf_config(argument)) {
        source.kind = ModelSource::BuiltIn;
        source.name = argument;
        source.config = builtin_hf_config(argument);
    } else {
        source.kind = ModelSource::HuggingFace;
        source.name = model_display_name(argument);
        source.directory = argument;
        source.config = read_hf_config((std::filesystem::path(argument) / "config.json").string());
    }
    return source;
}

std::vector<std::string> weight_kinds(const ModelSource& source, const std::string& weights) {
    if (weights != "auto" && weights != "both" && weights != "init" && weights != "pretrained")
        throw Error("unknown weights '" + weights + "' (expected auto, pretrained, init or both)", "--weights");
    // auto: every kind the model has (a built-in configuration failed on the default "both" before).
    if (source.kind == ModelSource::BuiltIn && weights == "auto") return {"init"};
    if (source.kind == ModelSource::BuiltIn && weights != "init")
        throw Error("the built-in configuration '" + source.argument + "' has no pretrained weights, only a random init "
                    "(init); a downloaded Hugging Face folder has both",
                    "--weights");
    if (weights == "both" || weights == "auto") return {"init", "pretrained"};
    return {weights};
}

Streaming parse_streaming(const std::string& text) {
    if (text == "auto") return Streaming::Auto;
    if (text == "on") return Streaming::On;
    if (text == "off") return Streaming::Off;
    throw Error("unknown stream setting '" + text + "' (expected auto, on or off)", "--stream");
}

namespace {

// MemAvailable of /proc/meminfo in bytes (-1 when unreadable).
std::int64_t available_memory_bytes() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::int64_t kilobytes = 0;
    std::string unit;
    while (meminfo >> key >> kilobytes >> unit)
        if (key == "MemAvailable:") return kilobytes * 1024;
    return -1;
}

// A decoder's Hugging Face folder: the one source whose layers can be read one at a time.
bool can_stream(const ModelSource& source) { return source.kind == ModelSource::HuggingFace && is_decoder(source.config); }

// Whether `source`'s weights are read layer by layer (never for init weights; On is checked for them too, so a wrong
// --stream on fails before any work, but the checkpoint is not opened).
bool stream_layers(const ModelSource& source, Streaming stream, bool pretrained) {
    if (stream == Streaming::Off) return false;
    if (stream == Streaming::On) {
        check_streaming(source, stream);
        return pretrained;
    }
    if (!can_stream(source) || !pretrained) return false;
    const std::string warning =
        automatic_streaming_warning(source.argument, hf_model_float32_bytes(source.directory), available_memory_bytes());
    if (warning.empty()) return false;
    warn(warning);
    return true;
}

}  // namespace

void check_streaming(const ModelSource& source, Streaming stream) {
    if (stream != Streaming::On || can_stream(source)) return;
    throw Error("streaming reads a decoder checkpoint's layers one at a time (gpt2, gpt_neox, llama, mistral, qwen2 folders); " +
                    source.name + " is " +
                    (source.kind == ModelSource::HuggingFace ? "a " + source.config.model_type + " model"
                                                             : std::string("not a Hugging Face folder")),
                "--stream on");
}

std::string automatic_streaming_warning(const std::string& model, std::int64_t needed, std::int64_t available) {
    if (available < 0 || needed <= available / 4 * 3) return {};
    return fmt::format("{}: its weights take {:.1f} GB in float32, more than 3/4 of the {:.1f} GB available: reading them "
                       "one layer at a time (stream off to load them whole)",
                       model, needed / 1e9, available / 1e9);
}

std::unique_ptr<EncoderModel> make_model(const ModelSource& source, const std::string& weights, std::uint64_t seed,
                                         Streaming stream) {
    if (weights != "init" && weights != "pretrained")
        throw Error("unknown weights '" + weights + "' (expected pretrained or init)", "weights");
    weight_kinds(source, weights);  // a built-in configuration has no pretrained weights
    const bool init = weights == "init";
    const bool streamed = stream_layers(source, stream, !init);
    switch (source.kind) {
        case ModelSource::UseLite: return init ? make_use_lite_init(source.directory, seed) : load_use_lite(source.directory);
        case ModelSource::BuiltIn: return make_hf_model(source.config, seed);
        case ModelSource::HuggingFace: break;
    }
    if (init) return make_hf_model(source.config, seed);
    return streamed ? load_hf_model_streamed(source.directory) : load_hf_model(source.directory);
}

namespace {

// Text the tokenizer cannot spell: a vocabulary that does not fit it (a test fixture's 64 words, another model's
// vocab.txt, English pieces for Greek text) turns most words into [UNK] or <unk>, and every sample then measures that
// one embedding, not the text (the bert-tiny fixture's samples were identical, with a std of 0, and nothing said so).
// Half is enough: SentencePiece spells a word it cannot as "▁" then <unk>, so Greek through English pieces is 50%.
void warn_if_mostly_unknown(const Tokenizer& tokenizer, const ModelBatch& batch, const std::string& text_path) {
    const int unknown = tokenizer.unknown_id();
    if (unknown < 0) return;
    const at::Tensor real = batch.attention_mask.ne(0);
    const std::int64_t special =
        batch.input_ids.size(0) * static_cast<std::int64_t>(tokenizer.prefix().size() + tokenizer.suffix().size());
    const std::int64_t content = real.sum().item<std::int64_t>() - special;
    const std::int64_t unknowns = (batch.input_ids.eq(unknown) & real).sum().item<std::int64_t>();
    warn_if_mostly_unknown(tokenizer, unknowns, content, text_path);
}

}  // namespace

void warn_if_mostly_unknown(const Tokenizer& tokenizer, std::int64_t unknowns, std::int64_t content,
                            const std::string& text_path) {
    if (content <= 0 || 2 * unknowns < content) return;
    warn(fmt::format("{} of the {} text tokens ({:.0f}%) are the unknown token of {}: the samples measure its "
                     "embedding, not the text of {} (a vocabulary that does not fit the text?)",
                     unknowns, content, 100.0 * static_cast<double>(unknowns) / static_cast<double>(content),
                     printable(tokenizer.source(), 1000), printable(text_path, 1000)));
}

void warn_if_special_token_text(const Tokenizer& tokenizer, const std::vector<std::string>& sentences,
                                const std::string& text_path) {
    const std::vector<std::string> read_as_text = tokenizer.special_tokens_read_as_text();
    for (std::size_t i = 0; i < sentences.size(); ++i)
        for (const std::string& special : read_as_text)
            if (sentences[i].find(special) != std::string::npos) {
                warn(fmt::format("sentence {} of {} holds \"{}\": {} reads it as plain characters, not as a special "
                                 "token (it has no such token in its vocabulary)",
                                 i + 1, printable(text_path, 1000), printable(special), printable(tokenizer.source(), 1000)));
                return;  // once
            }
}

ModelBatch text_batch(const ModelSource& source, const std::string& text_path, int samples, int tokens,
                      const std::string& tokenizer_directory) {
    const std::vector<std::string> sentences = read_sentences(text_path);
    const HfConfig& config = source.config;
    std::unique_ptr<Tokenizer> tokenizer;
    switch (source.kind) {
        case ModelSource::UseLite: tokenizer = load_use_lite_tokenizer(source.directory); break;
        case ModelSource::BuiltIn:
            tokenizer = train_sentencepiece(sentences, tokenizer_directory, 4000, config.model_type);
            break;
        case ModelSource::HuggingFace: tokenizer = load_tokenizer(source.directory, config); break;
    }
    if (tokens > config.max_tokens() && config.model_type != "xlnet")
        throw Error(fmt::format("{} tokens per sample are more than the model allows ({}, max_position_embeddings{} in {})",
                                tokens, config.max_tokens(), config.position_offset_note(), config.path),
                    "--tokens");
    ModelBatch batch = pack_text(*tokenizer, sentences, samples, tokens, text_path);
    if (batch.input_ids.max().item<std::int64_t>() >= config.vocab_size)
        throw Error("the tokenizer's ids exceed the model's vocab_size", tokenizer->source());
    warn_if_mostly_unknown(*tokenizer, batch, text_path);
    warn_if_special_token_text(*tokenizer, sentences, text_path);
    return batch;
}

RealModelResult run_real_model_experiment(const ModelSource& source, const ModelBatch& batch,
                                          const std::vector<std::string>& weights, const RealModelSettings& settings,
                                          Recorder* dump, const InterruptPoll& interrupt) {
    RealModelResult result;
    result.model = source.name;
    result.model_type = source.model_type();
    result.layers = source.config.layers;
    result.heads = source.config.heads;
    result.parallel_block = source.config.parallel_residual;
    for (int l = 0; l < result.layers; ++l) result.attention_windows.push_back(source.config.window_at(l));
    result.samples = batch.input_ids.size(0);
    result.tokens = batch.input_ids.size(1);
    if (batch.attention_mask.defined()) {
        const at::Tensor real = batch.attention_mask.sum(1).to(at::kCPU, at::kLong).contiguous();
        result.real_tokens.assign(real.data_ptr<std::int64_t>(), real.data_ptr<std::int64_t>() + real.numel());
    }
    result.settings = settings;
    if (source.kind != ModelSource::UseLite) result.settings.iterate_steps = 0;  // USE lite only
    Progress progress("model " + source.name, static_cast<long>(weights.size()));
    for (const auto& kind : weights) {
        interrupt.poll();
        // On the CPU, from the seed or the folder (streamed: only the embeddings and final norm so far).
        const std::unique_ptr<EncoderModel> model = make_model(source, kind, settings.seed, settings.stream);
        model->to(settings.device);
        const bool dump_this = dump && kind == weights.back();
        result.runs.push_back(
            run_real_model(*model, batch, source.name, kind, result.settings, dump_this ? dump : nullptr, interrupt));
        result.runs.back().streamed = model->streamed();
        progress.advance();
    }
    return result;
}

void check_weights_runs_finite(const std::string& model, const std::vector<WeightsRun>& runs, bool allow_nonfinite) {
    for (const auto& run : runs)
        for (const auto& r : run.residual)
            check_finite_result(r.mean, "the relative residual",
                                fmt::format("{} {}, variant {}, layer {}", r.model, r.weights, r.variant, r.layer),
                                allow_nonfinite);
    for (const auto& run : runs)
        for (const auto& s : run.paths)
            check_finite_result(s.relative_residual, "a path product's relative residual",
                                fmt::format("{} {}, path length {}, layers {}", model, run.weights, s.length,
                                            join_indices(s.layers)),
                                allow_nonfinite);
}

void check_real_model_finite(const RealModelResult& result, bool allow_nonfinite) {
    check_weights_runs_finite(result.model, result.runs, allow_nonfinite);
}

Table residual_table(const RealModelResult& result) {
    Table table({{"model", Table::Text}, {"weights", Table::Text}, {"variant", Table::Text}, {"layer", Table::Integer},
                 {"norm", Table::Text}, {"center", Table::Text}, {"mean", Table::Real}, {"std", Table::Real},
                 {"min", Table::Real}, {"max", Table::Real}, {"n", Table::Integer}});
    for (const auto& run : result.runs)
        for (const auto& r : run.residual)
            table.add({r.model, r.weights, r.variant, r.layer, "composite", "mean", r.mean, r.std, r.min, r.max, r.n});
    return table;
}

Table path_products_table(const RealModelResult& result) {
    Table table({{"model", Table::Text}, {"weights", Table::Text}, {"length", Table::Integer}, {"draw", Table::Integer},
                 {"sample", Table::Integer}, {"layers", Table::Text}, {"heads", Table::Text},
                 {"relative_residual", Table::Real}, {"relative_residual_frobenius", Table::Real}});
    for (const auto& run : result.runs)
        for (const auto& s : run.paths)
            table.add({result.model, run.weights, s.length, s.draw, s.sample, join_indices(s.layers), join_indices(s.heads),
                       s.relative_residual, s.relative_residual_frobenius});
    return table;
}

Table skip_ratio_table(const RealModelResult& result) {
    Table table({{"model", Table::Text}, {"weights", Table::Text}, {"layer", Table::Integer}, {"skip_ratio", Table::Real}});
    for (const auto& run : result.runs)
        for (std::size_t l = 0; l < run.skip_ratio.size(); ++l)
            table.add({result.model, run.weights, static_cast<std::int64_t>(l), run.skip_ratio[l]});
    return table;
}

Table iterate_table(const RealModelResult& result) {
    Table table({{"model", Table::Text}, {"weights", Table::Text}, {"variant", Table::Text}, {"step", Table::Integer},
                 {"mean", Table::Real}, {"std", Table::Real}, {"min", Table::Real}, {"max", Table::Real},
                 {"n", Table::Integer}});
    for (const auto& run : result.runs)
        for (const auto& r : run.iterate)
            table.add({result.model, run.weights, r.variant, r.step, r.mean, r.std, r.min, r.max, r.n});
    return table;
}

}  // namespace rankscope
