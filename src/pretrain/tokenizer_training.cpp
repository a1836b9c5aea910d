// The tokenizers of the pretrained models, trained on the corpus with SentencePiece's trainer (in the rankscope-spm
// helper, as every SentencePiece call: tokenizer.hpp):
//   ALBERT: a unigram spiece.model on the lower-cased text (as albert-base-v2's; AlbertTokenizer lower-cases).
//   BERT:   a WordPiece vocab.txt made from a BPE model trained on the text split as BertTokenizer splits it (clean,
//           lower-case, strip accents, punctuation apart): a piece that starts a word ("▁ing" → "ing") keeps its
//           text, a piece inside a word gets "##" ("ing" → "##ing"), every character is present in both forms, so
//           WordPiece's greedy longest match never needs [UNK] on text of the corpus's alphabet. Hugging Face's own
//           WordPiece trainer is BPE with the same "##" convention.
#include <filesystem>
#include <set>

#include "loaders/sentencepiece_training.hpp"
#include "loaders/text_utf8.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/pretrain.hpp"
#include "rankscope/tokenizer.hpp"

namespace rankscope {
namespace {

constexpr std::size_t kMaxTrainingUnits = 200000;  // every k-th unit beyond this (the trainer's time grows with it)

std::vector<std::string> every_kth(const std::vector<std::string>& units) {
    if (units.size() <= kMaxTrainingUnits) return units;
    std::vector<std::string> out;
    const double stride = double(units.size()) / kMaxTrainingUnits;
    for (std::size_t i = 0; i < kMaxTrainingUnits; ++i) out.push_back(units[static_cast<std::size_t>(i * stride)]);
    return out;
}

}  // namespace

std::vector<std::string> wordpiece_vocabulary_from_bpe(const std::vector<std::string>& bpe_pieces) {
    std::vector<std::string> vocabulary = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    std::set<std::string> seen(vocabulary.begin(), vocabulary.end());
    std::set<std::string> characters;
    const std::string word_start = "\xE2\x96\x81";  // ▁
    auto add = [&](const std::string& piece) {
        if (!piece.empty() && seen.insert(piece).second) vocabulary.push_back(piece);
    };
    for (const std::string& piece : bpe_pieces) {
        if (piece.empty() || piece == "<unk>" || piece == "<pad>" || piece == "<s>" || piece == "</s>" ||
            piece == "<sep>" || piece == "<cls>" || (piece.front() == '[' && piece.back() == ']'))
            continue;
        const bool starts_word = piece.rfind(word_start, 0) == 0;
        const std::string text = starts_word ? piece.substr(word_start.size()) : piece;
        if (text.empty()) continue;
        for (const auto& character : utf8::characters(text)) characters.insert(character);
        add(starts_word ? text : "##" + text);
    }
    for (const auto& character : characters) {
        add(character);
        add("##" + character);
    }
    return vocabulary;
}

std::vector<std::string> train_pretraining_tokenizer(const std::string& arch, const std::vector<std::string>& units,
                                                     const std::filesystem::path& directory, int vocab,
                                                     int max_length) {
    std::filesystem::create_directories(directory);
    std::vector<std::string> prepared;
    for (const auto& unit : every_kth(units)) {
        if (arch == "albert") {
            prepared.push_back(utf8::lower(unit));
        } else {
            std::string line;
            for (const auto& word : utf8::basic_split(unit, utf8::BasicOptions{})) line += (line.empty() ? "" : " ") + word;
            prepared.push_back(line);
        }
    }
    detail::train_sentencepiece_model(prepared, directory, vocab, arch == "albert" ? "unigram" : "bpe");
    nlohmann::json config;
    if (arch == "albert") {
        config = {{"tokenizer_class", "AlbertTokenizer"}, {"do_lower_case", true}, {"keep_accents", false},
                  {"remove_space", true}, {"model_max_length", max_length}};
    } else {
        const std::string text = read_file_limited((directory / "spiece.vocab").string(), kMaxTextFileBytes, "vocabulary");
        std::vector<std::string> pieces;
        for (std::size_t start = 0; start < text.size();) {
            std::size_t end = text.find('\n', start);
            if (end == std::string::npos) end = text.size();
            const std::string line = text.substr(start, end - start);
            pieces.push_back(line.substr(0, line.find('\t')));
            start = end + 1;
        }
        std::string vocabulary;
        for (const auto& piece : wordpiece_vocabulary_from_bpe(pieces)) vocabulary += piece + "\n";
        write_file_atomically((directory / "vocab.txt").string(), vocabulary);
        config = {{"tokenizer_class", "BertTokenizer"}, {"do_lower_case", true}, {"strip_accents", nullptr},
                  {"tokenize_chinese_chars", true}, {"model_max_length", max_length}};
        std::filesystem::rename(directory / "spiece.model", directory / "bpe.model");
        std::filesystem::rename(directory / "spiece.vocab", directory / "bpe.vocab");
    }
    write_file_atomically((directory / "tokenizer_config.json").string(), config.dump(2) + "\n");
    std::filesystem::remove(directory / "corpus.txt");
    return arch == "albert" ? std::vector<std::string>{"spiece.model", "tokenizer_config.json"}
                            : std::vector<std::string>{"vocab.txt", "tokenizer_config.json"};
}

}  // namespace rankscope
