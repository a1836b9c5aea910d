// WordPiece tokenisation as Hugging Face's BertTokenizer (BasicTokenizer + WordpieceTokenizer) does it.
#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "loaders/added_tokens.hpp"
#include "loaders/post_processor.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tokenizer.hpp"
#include "rankscope/warnings.hpp"
#include "text_utf8.hpp"

namespace rankscope {
namespace {

// transformers' BasicTokenizer: strip_accents null follows do_lower_case.
utf8::BasicOptions basic_options(const WordPieceSettings& settings) {
    return {settings.lower_case, settings.strip_accents < 0 ? settings.lower_case : settings.strip_accents == 1,
            settings.split_chinese};
}

class WordPiece : public Tokenizer {
public:
    // From a tokenizer.json whose model is WordPiece (the `tokenizers` form of BertTokenizerFast; e.g. the
    // all-MiniLM-L6-v2 package, which ships no vocab.txt). Read: model.vocab (piece -> id), unk_token,
    // continuing_subword_prefix ("##" only), max_input_chars_per_word; normalizer BertNormalizer (lowercase;
    // strip_accents null = follow lowercase, as BERT); pre_tokenizer BertPreTokenizer; added_tokens, matched in the
    // text, with BertTokenizerFast's special tokens from `tokenizer_config` when it is given. Anything else is refused
    // in one line naming the field, so that no tokenizer is silently approximated.
    WordPiece(const std::string& path, const nlohmann::json& json, const WordPieceSettings* overrides,
              const nlohmann::json* tokenizer_config, const std::string& config_path)
        : path_(path) {
        const auto field = [&](const nlohmann::json& parent, const char* key, const std::string& where) -> const nlohmann::json& {
            if (!parent.is_object() || !parent.contains(key)) throw Error("tokenizer.json has no " + where + key, path);
            return parent.at(key);
        };
        const auto& model = field(json, "model", "");
        const auto& vocab = field(model, "vocab", "model.");
        if (!vocab.is_object()) throw Error("tokenizer.json: model.vocab must be an object of piece: id", path);
        int largest = -1;
        for (const auto& [piece, id] : vocab.items()) {
            if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= (1 << 24))
                throw Error("tokenizer.json: model.vocab id of '" + printable(piece) + "' is not an integer in [0, 2^24)", path);
            ids_[piece] = static_cast<int>(id.get<std::int64_t>());
            largest = std::max(largest, ids_[piece]);
        }
        if (model.contains("continuing_subword_prefix") &&
            !(model["continuing_subword_prefix"].is_string() && model["continuing_subword_prefix"] == "##"))
            throw Error("tokenizer.json: model.continuing_subword_prefix other than \"##\" is not supported", path);
        if (model.contains("unk_token") && !model["unk_token"].is_null()) {
            if (!model["unk_token"].is_string()) throw Error("tokenizer.json: model.unk_token must be a string", path);
            unknown_ = model["unk_token"].get<std::string>();
        }
        if (model.contains("max_input_chars_per_word")) {
            const auto& limit = model["max_input_chars_per_word"];
            if (!limit.is_number_integer() || limit.get<std::int64_t>() < 1 || limit.get<std::int64_t>() > 1'000'000)
                throw Error("tokenizer.json: model.max_input_chars_per_word must be an integer in [1, 1000000]", path);
            max_characters_ = static_cast<std::size_t>(limit.get<std::int64_t>());
        }
        const auto& normalizer = field(json, "normalizer", "");
        if (!normalizer.is_object() || normalizer.value("type", "") != "BertNormalizer")
            throw Error("tokenizer.json: a WordPiece normalizer other than BertNormalizer is not supported", path);
        const auto flag = [&](const char* key, bool fallback) {
            if (!normalizer.contains(key) || normalizer[key].is_null()) return fallback;
            if (!normalizer[key].is_boolean()) throw Error(std::string("tokenizer.json: normalizer.") + key + " must be true, false or null", path);
            return normalizer[key].get<bool>();
        };
        options_.lower_case = flag("lowercase", true);
        options_.strip_accents = flag("strip_accents", options_.lower_case);
        options_.split_chinese = flag("handle_chinese_chars", true);
        if (!flag("clean_text", true)) throw Error("tokenizer.json: normalizer.clean_text must be true", path);
        if (overrides) options_ = basic_options(*overrides);
        const auto& pre_tokenizer = field(json, "pre_tokenizer", "");
        if (!pre_tokenizer.is_object() || pre_tokenizer.value("type", "") != "BertPreTokenizer")
            throw Error("tokenizer.json: a WordPiece pre_tokenizer other than BertPreTokenizer is not supported", path);
        if (!ids_.count(unknown_))
            throw Error("tokenizer.json: model.vocab has no " + printable(unknown_) + " (model.unk_token)", path);
        size_ = largest + 1;
        std::vector<detail::AddedToken> added =
            detail::read_tokenizer_json_added_tokens(json.value("added_tokens", nlohmann::json::array()), 1 << 24, path);
        if (tokenizer_config) {
            const auto configured =
                detail::configured_special_tokens(detail::bert_special_tokens(), *tokenizer_config, config_path);
            std::vector<detail::AddedToken> specials = configured.tokens;  // the json's ids win
            specials.insert(specials.end(), added.begin(), added.end());
            added = specials;
        }
        match_added_tokens(added);
        read_post_processor(json.contains("post_processor") ? json["post_processor"] : nlohmann::json());
    }
    // `tokenizer_config`: tokenizer_config.json (config_path), whose special tokens replace BertTokenizer's defaults.
    WordPiece(const std::string& path, const WordPieceSettings& settings, const nlohmann::json* tokenizer_config,
              const std::string& config_path)
        : path_(path), options_(basic_options(settings)) {
        // One piece per line, id = line index (as Hugging Face's load_vocab); a regular file of bounded size.
        const std::string text = read_file_limited(path, kMaxJsonFileBytes, "vocabulary");
        bool has_upper = false;
        int next_id = 0;
        for (std::size_t start = 0; start < text.size();) {
            std::size_t end = text.find('\n', start);
            if (end == std::string::npos) end = text.size();
            std::string line = text.substr(start, end - start);
            start = end + 1;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            ids_[line] = next_id++;  // a repeated piece keeps its last id, as in Hugging Face
            // Capitals outside the bracketed specials ([CLS], [unused0]) mark a cased vocabulary.
            if (!(line.size() > 2 && line.front() == '[' && line.back() == ']'))
                for (char c : line) has_upper = has_upper || (c >= 'A' && c <= 'Z');
        }
        if (ids_.size() < 5) throw Error("vocabulary has " + std::to_string(ids_.size()) + " entries (at least 5 expected)", path);
        // BertTokenizer's special tokens ([CLS] x [SEP], [UNK]), or those tokenizer_config.json names instead.
        const auto configured = detail::configured_special_tokens(
            detail::bert_special_tokens(), tokenizer_config ? *tokenizer_config : nlohmann::json::object(), config_path);
        const auto vocabulary_id = [&](const char* role) {
            const std::string& content = configured.content(role, config_path);
            if (!ids_.count(content))
                throw Error("vocabulary has no " + printable(content) + " (" + role +
                                (tokenizer_config && tokenizer_config->contains(role) ? " of tokenizer_config.json" : "") + ")",
                            path);
            return ids_.at(content);
        };
        prefix_ = {vocabulary_id("cls_token")};
        suffix_ = {vocabulary_id("sep_token")};
        unknown_ = configured.content("unk_token", config_path);
        vocabulary_id("unk_token");
        size_ = next_id;
        match_added_tokens(configured.tokens);
        if (has_upper && settings.lower_case && !settings.lower_case_given)
            warn(path + ": the vocabulary has capitalised pieces, and no tokenizer_config.json sets do_lower_case: the "
                        "text is lower-cased, as transformers' BertTokenizer does by default (its capitalised pieces are "
                        "never used; a cased model needs \"do_lower_case\": false)");
    }
    std::vector<int> encode(const std::string& text) const override {
        std::vector<int> out;
        for (const detail::TextSegment& segment : added_.split(text)) {
            if (segment.id >= 0) out.push_back(segment.id);
            else encode_words(segment.text, out);
        }
        return out;
    }
    std::vector<int> prefix() const override { return prefix_; }
    std::vector<int> suffix() const override { return suffix_; }
    int vocab_size() const override { return size_; }
    std::string source() const override { return path_; }
    int unknown_id() const override { return ids_.at(unknown_); }
    std::vector<std::string> special_tokens_read_as_text() const override { return read_as_text_; }

private:
    // The special tokens found in the vocabulary are matched in the text; the others are listed as read as text.
    // An id beyond the vocabulary (tokenizer_config.json's added_tokens_decoder) widens it, as len(tokenizer) does.
    void match_added_tokens(const std::vector<detail::AddedToken>& tokens) {
        const auto matched = detail::resolve_ids(
            tokens, [&](const std::string& content) { return ids_.count(content) ? ids_.at(content) : -1; },
            &read_as_text_);
        for (const auto& token : matched) size_ = std::max(size_, token.id + 1);
        const utf8::BasicOptions options = options_;
        added_ = detail::AddedTokenSplitter(matched, [options](const std::string& text) {
            return utf8::basic_normalize(text, options);
        });
    }

    // BasicTokenizer's words of a text segment, each spelled by greedy longest match with "##" continuations.
    void encode_words(const std::string& text, std::vector<int>& out) const {
        for (const std::string& word : utf8::basic_split(text, options_)) {
            if (utf8::length(word) > max_characters_) {
                out.push_back(unknown_id());
                continue;
            }
            // Greedy longest match.
            std::vector<int> pieces;
            const auto characters = utf8::characters(word);
            std::size_t start = 0;
            bool bad = false;
            while (start < characters.size()) {
                std::size_t end = characters.size();
                int found = -1;
                while (start < end) {
                    std::string piece = start > 0 ? "##" : "";
                    for (std::size_t i = start; i < end; ++i) piece += characters[i];
                    const auto it = ids_.find(piece);
                    if (it != ids_.end()) {
                        found = it->second;
                        break;
                    }
                    --end;
                }
                if (found < 0) {
                    bad = true;
                    break;
                }
                pieces.push_back(found);
                start = end;
            }
            if (bad) out.push_back(unknown_id());
            else out.insert(out.end(), pieces.begin(), pieces.end());
        }
    }

    // A WordPiece tokenizer.json's special tokens around the text: none (null), BertProcessing's cls and sep, or
    // TemplateProcessing's single sequence ("[CLS] $A [SEP]"). Anything else is refused.
    void read_post_processor(const nlohmann::json& post) {
        if (post.is_null()) return;  // no special tokens, as transformers then adds none
        const std::string type = post.is_object() ? post.value("type", "") : "";
        if (type == "BertProcessing") {
            prefix_ = {detail::framing_pair_id(post, "cls", size_, path_)};
            suffix_ = {detail::framing_pair_id(post, "sep", size_, path_)};
            return;
        }
        if (type != "TemplateProcessing")
            throw Error("tokenizer.json: post_processor " + printable(type.empty() ? post.dump() : type, 60) +
                            " is not supported (BertProcessing, TemplateProcessing or null)",
                        path_);
        const detail::Framing framing = detail::template_framing(
            post, [&](const std::string& name) { return ids_.count(name) ? ids_.at(name) : -1; }, size_, path_);
        prefix_ = framing.prefix;
        suffix_ = framing.suffix;
    }

    std::string path_;
    std::vector<int> prefix_, suffix_;
    std::unordered_map<std::string, int> ids_;
    std::string unknown_ = "[UNK]";
    detail::AddedTokenSplitter added_;
    std::vector<std::string> read_as_text_;
    utf8::BasicOptions options_;
    std::size_t max_characters_ = 100;  // BertTokenizer's max_input_chars_per_word
    int size_ = 0;
};

}  // namespace

WordPieceSettings read_wordpiece_settings(const nlohmann::json& json, const std::string& path,
                                          std::string* tokenizer_class) try {
    WordPieceSettings settings;
    if (!json.is_object()) return settings;
    const auto flag = [&](const char* key) -> int {  // -1: absent or null
        if (!json.contains(key) || json[key].is_null()) return -1;
        if (!json[key].is_boolean()) throw Error(std::string(key) + " must be true or false", path);
        return json[key].get<bool>() ? 1 : 0;
    };
    if (const int lower = flag("do_lower_case"); lower >= 0) settings.lower_case = lower == 1, settings.lower_case_given = true;
    settings.strip_accents = flag("strip_accents");
    if (const int chinese = flag("tokenize_chinese_chars"); chinese >= 0) settings.split_chinese = chinese == 1;
    if (tokenizer_class && json.contains("tokenizer_class") && json["tokenizer_class"].is_string())
        *tokenizer_class = json["tokenizer_class"].get<std::string>();
    return settings;
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, path);
}

std::unique_ptr<Tokenizer> load_wordpiece(const std::string& vocab_path, const WordPieceSettings& settings,
                                          const nlohmann::json* tokenizer_config, const std::string& config_path) {
    return std::make_unique<WordPiece>(vocab_path, settings, tokenizer_config, config_path);
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& tokenizer_json_path,
                                               const WordPieceSettings* wordpiece_settings,
                                               const nlohmann::json* tokenizer_config, const std::string& config_path,
                                               const ReplacedFraming* framing) try {
    const nlohmann::json json = read_json_file(tokenizer_json_path, "tokenizer.json");
    if (json.is_object() && json.contains("model") && json["model"].is_object() && json["model"].value("type", "") == "WordPiece")
        return std::make_unique<WordPiece>(tokenizer_json_path, json, wordpiece_settings, tokenizer_config, config_path);
    return load_byte_level_bpe(tokenizer_json_path, framing);
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, tokenizer_json_path);
}

}  // namespace rankscope
