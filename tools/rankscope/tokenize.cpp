// rankscope tokenize — the token ids rankscope gives a text with a model folder's own tokenizer (vocab.txt,
// spiece.model, or a byte-level BPE tokenizer.json), sentence by sentence, with the special tokens that frame a sample.
// What `model --text` packs into samples, shown before any model runs; `--format json` for programs.
#include <fmt/ranges.h>
#include <fmt/format.h>

#include <filesystem>

#include "common.hpp"
#include "rankscope/e1.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tokenizer.hpp"
#include "rankscope/use_lite.hpp"

namespace rankscope::cli {
namespace {

struct TokenizeOptions {
    CommonOptions common;
    std::string model;
    std::string text;
};

void run_tokenize(const TokenizeOptions& options) {
    const Provenance provenance = start_run(options.common);
    const ModelSource source = resolve_model_source(options.model);
    std::unique_ptr<Tokenizer> tokenizer;
    switch (source.kind) {
        case ModelSource::UseLite: tokenizer = load_use_lite_tokenizer(source.directory); break;
        case ModelSource::HuggingFace: tokenizer = load_tokenizer(source.directory, source.config); break;
        case ModelSource::BuiltIn:
            throw Error("a built-in configuration has no tokenizer of its own (model --text trains one on the text)",
                        options.model);
    }
    const std::vector<std::string> sentences = read_sentences(options.text);
    const auto ids = tokenizer->encode_batch(sentences);
    std::int64_t content = 0, unknowns = 0;
    for (const auto& sentence : ids)
        for (int id : sentence) content += 1, unknowns += id == tokenizer->unknown_id() ? 1 : 0;
    warn_if_mostly_unknown(*tokenizer, unknowns, content, options.text);  // (no unknown id: 0 unknowns)
    warn_if_special_token_text(*tokenizer, sentences, options.text);
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (int id : ids[i])
            if (id < 0 || id >= source.config.vocab_size)
                throw Error(fmt::format("sentence {}: token id {} is outside the model's vocabulary of {}", i + 1, id,
                                        source.config.vocab_size), tokenizer->source());
    nlohmann::json document = {{"tokenizer", tokenizer->source()}, {"prefix", tokenizer->prefix()},
                               {"suffix", tokenizer->suffix()}, {"vocab_size", tokenizer->vocab_size()},
                               {"sentences", nlohmann::json::array()}};
    for (std::size_t i = 0; i < ids.size(); ++i) document["sentences"].push_back({{"text", sentences[i]}, {"token_ids", ids[i]}});
    if (!options.common.out.empty()) {
        const std::filesystem::path out = options.common.out;
        std::filesystem::create_directories(out);
        write_json_atomically(out / "tokens.json", document, provenance);
        write_manifest(out, provenance, {{"inputs", {options.model, options.text}}, {"outputs", {"tokens.json"}}});
    }
    if (options.common.format == "json") {
        fmt::print("{}\n", json_text(document));
        return;
    }
    // The table is for a terminal: a sentence's control characters (a newline, ESC) are shown as \xNN (the JSON keeps
    // them exactly).
    const auto shown = [](const std::string& text) { return printable(text, std::string::npos); };
    fmt::print("tokenizer {}: prefix [{}], suffix [{}], vocabulary {}\n", shown(tokenizer->source()),
               fmt::join(tokenizer->prefix(), " "), fmt::join(tokenizer->suffix(), " "), tokenizer->vocab_size());
    for (std::size_t i = 0; i < ids.size(); ++i) fmt::print("{}\t{}\n", fmt::join(ids[i], " "), shown(sentences[i]));
    if (!options.common.out.empty()) fmt::print("wrote {}/tokens.json, manifest.json\n", options.common.out);
}

}  // namespace

std::function<void()> setup_tokenize(CLI::App& command) {
    auto options = std::make_shared<TokenizeOptions>();
    command.add_option("--model", options->model, "A Hugging Face folder (config.json and its tokenizer files) or use-lite")
        ->required();
    command.add_option("--text", options->text, "UTF-8 text (.tsv with sentence1/sentence2 columns, or one sentence per line)")
        ->required()
        ->check(ReadableFile());
    add_common_options(command, options->common, OutFolder::optional(), {"json"});
    remove_common_options(command, {"--seed", "--allow-nonfinite"});  // token ids: nothing drawn, no real number
    return [options] { run_tokenize(*options); };
}

}  // namespace rankscope::cli
