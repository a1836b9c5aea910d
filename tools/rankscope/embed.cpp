// rankscope embed — sentence embeddings of USE lite and their cosine similarities (the check that the loader
// reproduces the model's known behaviour, SPEC.md §6).
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>

#include "common.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/use_lite.hpp"

namespace rankscope::cli {
namespace {

struct EmbedOptions {
    CommonOptions common;
    std::string model = "use-lite";
    std::vector<std::string> sentences;
};

void run_embed(const EmbedOptions& options) {
    const Provenance provenance = start_run(options.common);
    for (std::size_t i = 0; i < options.sentences.size(); ++i)
        if (options.sentences[i].find_first_not_of(" \t\r\n") == std::string::npos)
            throw Error("empty text: every sentence needs a word", fmt::format("sentence {}", i + 1));
    const std::string directory = find_use_lite(options.model);
    auto model = load_use_lite(directory);
    auto tokenizer = load_use_lite_tokenizer(directory);
    const at::Tensor embeddings = sentence_embeddings(*model, *tokenizer, options.sentences).to(torch::kDouble);
    // A folder of overflowing weights gives NaN/Inf vectors (and cosines): an error naming the sentence, as every
    // command's, unless --allow-nonfinite (a NaN or Inf entry makes the sum of absolute values NaN or +Inf).
    for (std::int64_t i = 0; i < embeddings.size(0); ++i)
        check_finite(options.common, embeddings[i].abs().sum().item<double>(), "an embedding",
                     fmt::format("sentence {}, {}", i + 1, directory));
    const at::Tensor cosine = embedding_cosines(embeddings);
    const auto n = static_cast<std::int64_t>(options.sentences.size());
    // embed.json (with --out) and --format json: the sentences, their token ids (all of them; the model reads the
    // first 128), the cosines and the embeddings, with the provenance of the run.
    nlohmann::json document = {{"sentences", options.sentences},
                               {"token_ids", tokenizer->encode_batch(options.sentences)},
                               {"cosine", nlohmann::json::array()},
                               {"embeddings", nlohmann::json::array()}};
    for (std::int64_t i = 0; i < n; ++i) {
        std::vector<double> row;
        for (std::int64_t j = 0; j < n; ++j) row.push_back(cosine[i][j].item<double>());
        document["cosine"].push_back(row);
        const at::Tensor e = embeddings[i].contiguous();
        document["embeddings"].push_back(std::vector<double>(e.data_ptr<double>(), e.data_ptr<double>() + e.numel()));
    }
    if (!options.common.out.empty()) {
        const std::filesystem::path out = options.common.out;
        std::filesystem::create_directories(out);
        CsvTable pairs;
        pairs.columns = {"i", "j", "sentence_i", "sentence_j", "cosine"};
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = i + 1; j < n; ++j)
                pairs.add({std::to_string(i), std::to_string(j), options.sentences[i], options.sentences[j],
                           format_number(cosine[i][j].item<double>())});
        write_csv_atomically(out / "similarity.csv", pairs, provenance);
        CsvTable vectors;
        vectors.columns = {"i", "sentence"};
        for (std::int64_t k = 0; k < embeddings.size(1); ++k) vectors.columns.push_back(fmt::format("e{}", k));
        for (std::int64_t i = 0; i < n; ++i) {
            std::vector<std::string> row = {std::to_string(i), options.sentences[static_cast<std::size_t>(i)]};
            for (std::int64_t k = 0; k < embeddings.size(1); ++k) row.push_back(format_number(embeddings[i][k].item<double>()));
            vectors.add(row);
        }
        write_csv_atomically(out / "embeddings.csv", vectors, provenance);
        write_json_atomically(out / "embed.json", document, provenance);
        write_manifest(out, provenance,
                       {{"inputs", {directory}}, {"outputs", {"similarity.csv", "embeddings.csv", "embed.json"}}});
    }
    if (options.common.format == "json") {
        document["provenance"] = provenance_json(provenance);
        fmt::print("{}\n", json_text(document, 2));
        return;
    }
    if (n == 1)  // no pair to print: say what was done and where the vector is
        fmt::print("1 sentence embedded ({} dimensions); the table shows cosines of pairs: give two or more. The vector: "
                   "{}\n",
                   embeddings.size(1),
                   options.common.out.empty() ? std::string("--format json or --out")
                                              : (std::filesystem::path(options.common.out) / "embeddings.csv").string());
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = i + 1; j < n; ++j)
            fmt::print("{:.4f}  {} | {}\n", cosine[i][j].item<double>(), printable(options.sentences[i], std::string::npos),
                       printable(options.sentences[j], std::string::npos));  // control characters as \xNN
    if (!options.common.out.empty())
        fmt::print("wrote {}/similarity.csv, embeddings.csv, embed.json, manifest.json\n", options.common.out);
}

}  // namespace

std::function<void()> setup_embed(CLI::App& command) {
    auto options = std::make_shared<EmbedOptions>();
    command.add_option("sentences", options->sentences, "Sentences to embed")->required();
    command.add_option("--model", options->model, "use-lite, or the npm package's folder (or its dist/)")->capture_default_str();
    add_common_options(command, options->common, OutFolder::optional(), {"json"});
    remove_common_options(command, {"--seed"});  // a pretrained model's forward: nothing drawn (accepted and ignored)
    return [options] { run_embed(*options); };
}

}  // namespace rankscope::cli
