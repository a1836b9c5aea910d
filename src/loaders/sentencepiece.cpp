// SentencePiece tokenisation (libsentencepiece) as ALBERT's and XLNet's tokenizers use it, and text packing.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loaders/added_tokens.hpp"
#include "rankscope/build_info.hpp"  // RANKSCOPE_SOURCE_DIR
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/process.hpp"
#include "rankscope/models.hpp"  // ModelBatch, HfConfig
#include "rankscope/tokenizer.hpp"
#include "sentencepiece_training.hpp"
#include "text_utf8.hpp"

namespace rankscope {

std::string spm_helper_path() {
    if (const char* configured = std::getenv("RANKSCOPE_SPM")) return std::filesystem::absolute(configured).string();
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe").parent_path();
    for (const auto& candidate : {self / "rankscope-spm", self / ".." / "bin" / "rankscope-spm"})
        if (std::filesystem::exists(candidate)) return candidate.string();
    throw Error("the rankscope-spm helper is not beside the program (set RANKSCOPE_SPM)", self.string());
}

namespace {

// Runs the rankscope-spm helper with an argument vector (no shell) and returns its standard output; throws with the
// first line of its standard error on failure.
std::string run_helper(const std::vector<std::string>& arguments, const std::string& where) {
    std::vector<std::string> argv = {spm_helper_path()};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    ProcessOptions options;
    options.capture_stdout = true;
    options.capture_stderr = true;
    const ProcessResult result = run_process(argv, options);
    if (!result.ok()) {
        const std::string message = result.err.substr(0, result.err.find('\n'));
        throw Error("SentencePiece failed (" + result.describe() + ")" + (message.empty() ? "" : ": " + message), where);
    }
    return result.out;
}

// Three framings: ALBERT/BERT-style [CLS] x [SEP]; XLNet x <sep> <cls>; the Llama family's LlamaTokenizer
// (Llama 2, Mistral): <s> x, with </s> only when tokenizer_config.json's add_eos_token is true, and the text given to
// SentencePiece as it is (no whitespace collapsing or quote rewriting: those are ALBERT's and XLNet's preprocessing).
class SentencePiece : public Tokenizer {
public:
    // `llama_framing`: a Llama-family tokenizer.model (LlamaTokenizer's framing); otherwise the encoders' framing by
    // `model_type` (the built-in configurations' trained models use it for decoders too). `special_tokens`: the
    // tokenizer class's special tokens (with tokenizer_config.json's), matched in the text; null for a model trained
    // here, which frames with [CLS]/[SEP] (XLNet: <sep>/<cls>) and leaves the matching to SentencePiece (its
    // user-defined symbols).
    SentencePiece(const std::string& path, const std::string& model_type, bool lower_case, bool llama_framing,
                  bool add_bos, bool add_eos, bool keep_accents, const detail::ConfiguredSpecialTokens* special_tokens,
                  const std::string& config_path)
        : path_(path), xlnet_(model_type == "xlnet"), llama_(llama_framing), lower_case_(lower_case),
          add_bos_(add_bos), add_eos_(add_eos), keep_accents_(keep_accents) {
        // A regular file of at most 64 MiB before the helper reads it (it checks again itself).
        check_input_file(path, kMaxSentencePieceModelBytes, "SentencePiece model");
        const std::vector<std::string> roles = xlnet_   ? std::vector<std::string>{"sep_token", "cls_token"}
                                               : llama_ ? std::vector<std::string>{"bos_token", "eos_token"}
                                                        : std::vector<std::string>{"cls_token", "sep_token"};
        std::vector<std::string> framing;  // the framing tokens' pieces, then every special token's
        for (const auto& role : roles)
            framing.push_back(special_tokens         ? special_tokens->content(role, config_path)
                              : role == "sep_token"  ? (xlnet_ ? "<sep>" : "[SEP]")
                              : role == "cls_token"  ? (xlnet_ ? "<cls>" : "[CLS]")
                              : role == "bos_token"  ? "<s>"
                                                     : "</s>");
        std::vector<std::string> arguments = {"info", path, framing[0], framing[1]};
        if (special_tokens)
            for (const auto& token : special_tokens->tokens)  // (a NUL would cut the argument short: never a piece)
                if (token.content.find('\0') == std::string::npos) arguments.push_back(token.content);
        std::stringstream info(run_helper(arguments, path));
        info >> vocab_size_;
        std::unordered_map<std::string, int> piece_ids;
        for (std::size_t k = 2; k < arguments.size(); ++k) {
            int id = -1;
            info >> id;
            if (id >= 0) piece_ids[arguments[k]] = id;
        }
        for (std::size_t k = 0; k < 2; ++k) {
            if (!piece_ids.count(framing[k]))
                throw Error("SentencePiece model has no " + printable(framing[k]) + " piece" +
                                (special_tokens ? " (" + roles[k] + ")" : ""),
                            path);
            specials_.push_back(piece_ids.at(framing[k]));
        }
        info >> unknown_id_;
        if (!info || vocab_size_ <= 0) throw Error("not a SentencePiece model", path);
        if (special_tokens) {
            std::vector<std::string> unmatched;
            const auto matched = detail::resolve_ids(
                special_tokens->tokens,
                [&](const std::string& content) { return piece_ids.count(content) ? piece_ids.at(content) : -1; },
                &unmatched);
            for (const auto& token : matched) vocab_size_ = std::max(vocab_size_, token.id + 1);
            // The slow tokenizers match every added token as it is (no normalizer given: normalized ones too), in the
            // text lower-cased first (do_lower_case) but for the strings of all_special_tokens and of normalized
            // non-special tokens (lower_case_except).
            added_ = detail::AddedTokenSplitter(matched);
            if (lower_case_ && !llama_) case_kept_ = matched;
            read_as_text_ = unmatched;
        } else {
            // A model trained here: SentencePiece itself matches the user-defined symbols the helper trains with
            // (tools/rankscope-spm/main.cpp); the other special-token strings are characters.
            for (const std::string& special : Tokenizer::special_tokens_read_as_text())
                if (special != "[CLS]" && special != "[SEP]" && special != "[MASK]" && special != "<sep>" && special != "<cls>")
                    read_as_text_.push_back(special);
        }
    }
    std::vector<int> encode(const std::string& text) const override { return encode_batch({text}).front(); }
    std::vector<std::vector<int>> encode_batch(const std::vector<std::string>& texts) const override {
        // Special tokens are split out first; each piece of text between them is prepared and encoded on its own, as
        // transformers' slow tokenizers do (its fast ALBERT and XLNet tokenizers give a "▁" of its own to the space
        // before a special token and at the end of the text, and disagree with the slow ones there: followed here is
        // the slow form, whose preprocess_text is the original ALBERT and XLNet code's). Each piece is one line for the helper.
        std::string contents;
        std::vector<std::vector<int>> plans(texts.size());  // per text: a line's index (>= 0) or -1 - a special's id
        int lines = 0;
        for (std::size_t index = 0; index < texts.size(); ++index) {
            const std::string& text = texts[index];
            if (const std::size_t at = text.find_first_of("\r\n"); llama_ && at != std::string::npos)
                throw Error(fmt::format("sentence {} holds a {} at byte {} (\"{}...\"): the SentencePiece helper reads one "
                                        "sentence per line; remove it from the text",
                                        index + 1, text[at] == '\r' ? "carriage return" : "line break", at + 1,
                                        printable(text.substr(0, 40))),
                            path_);
            for (const detail::TextSegment& segment :
                 added_.split(case_kept_.empty() ? text : detail::lower_case_except(text, case_kept_))) {
                if (segment.id >= 0) {
                    plans[index].push_back(-1 - segment.id);
                    continue;
                }
                const std::string prepared = prepare(segment.text);
                if (prepared.empty()) continue;  // SentencePiece gives an empty text no ids
                contents += prepared + "\n";
                plans[index].push_back(lines++);
            }
        }
        // A fresh file of our own (mkstemp: O_EXCL, mode 0600), never a predictable name another user could plant.
        std::string name = (std::filesystem::temp_directory_path() / "rankscope-spm-XXXXXX").string();
        const int fd = ::mkstemp(name.data());
        if (fd < 0) throw Error("cannot create a temporary file for the SentencePiece helper", name);
        const std::filesystem::path input = name;
        for (std::size_t written = 0; written < contents.size();) {
            const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
            if (n <= 0) {
                ::close(fd);
                std::filesystem::remove(input);
                throw Error("cannot write the SentencePiece helper's input", name);
            }
            written += static_cast<std::size_t>(n);
        }
        ::close(fd);
        if (lines == 0) std::filesystem::remove(input);
        std::string output;
        if (lines > 0) {
            try {
                output = run_helper({"encode", path_, input.string()}, path_);
            } catch (...) {
                std::filesystem::remove(input);
                throw;
            }
            std::filesystem::remove(input);
        }
        std::vector<std::vector<int>> encoded_lines;
        std::stringstream output_lines(output);
        for (std::string line; std::getline(output_lines, line);) {
            std::stringstream numbers(line);
            std::vector<int> ids;
            for (int id; numbers >> id;) ids.push_back(id);
            encoded_lines.push_back(std::move(ids));
        }
        if (static_cast<int>(encoded_lines.size()) != lines)
            throw Error("SentencePiece helper returned a wrong number of lines", path_);
        std::vector<std::vector<int>> all(texts.size());
        for (std::size_t index = 0; index < texts.size(); ++index)
            for (const int step : plans[index]) {
                if (step < 0) all[index].push_back(-1 - step);
                else all[index].insert(all[index].end(), encoded_lines[step].begin(), encoded_lines[step].end());
            }
        return all;
    }
    std::vector<int> prefix() const override {
        if (llama_) return add_bos_ ? std::vector<int>{specials_[0]} : std::vector<int>{};
        return xlnet_ ? std::vector<int>{} : std::vector<int>{specials_[0]};
    }
    std::vector<int> suffix() const override {
        if (llama_) return add_eos_ ? std::vector<int>{specials_[1]} : std::vector<int>{};
        return xlnet_ ? std::vector<int>{specials_[0], specials_[1]} : std::vector<int>{specials_[1]};
    }
    std::vector<int> suffix_types() const override {
        if (llama_) return std::vector<int>(suffix().size(), 0);
        return xlnet_ ? std::vector<int>{0, 2} : std::vector<int>{0};
    }
    int vocab_size() const override { return vocab_size_; }
    std::string source() const override { return path_; }
    int unknown_id() const override { return unknown_id_; }
    std::vector<std::string> special_tokens_read_as_text() const override { return read_as_text_; }

private:
    // One piece of text as the helper's line. Llama: as it is (LlamaTokenizer gives SentencePiece the text; line breaks
    // are refused before). ALBERT and XLNet: as their preprocess_text does: collapse whitespace, `` and '' to ",
    // accents removed unless keep_accents (NFKD without combining characters), then lower-case (ALBERT's do_lower_case).
    std::string prepare(const std::string& text) const {
        if (llama_) return text;
        std::string prepared;
        for (const auto& word : utf8::basic_split_whitespace(text)) prepared += (prepared.empty() ? "" : " ") + word;
        for (const char* quote : {"``", "''"})
            for (std::size_t at; (at = prepared.find(quote)) != std::string::npos;) prepared.replace(at, 2, "\"");
        if (!keep_accents_) prepared = utf8::strip_combining_compatibility(prepared);
        return lower_case_ ? utf8::lower_only(prepared) : prepared;
    }

    std::string path_;
    bool xlnet_, llama_, lower_case_, add_bos_, add_eos_, keep_accents_;
    int vocab_size_ = 0;
    int unknown_id_ = -1;  // <unk>: the id SentencePiece gives a character the model has no piece for
    std::vector<int> specials_;
    detail::AddedTokenSplitter added_;  // empty for a model trained here
    std::vector<detail::AddedToken> case_kept_;  // do_lower_case: the tokens whose strings are not lower-cased
    std::vector<std::string> read_as_text_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path, const std::string& model_type,
                                              bool lower_case, bool keep_accents, const nlohmann::json* tokenizer_config,
                                              const std::string& config_path) {
    const auto special_tokens = detail::configured_special_tokens(
        model_type == "xlnet" ? detail::xlnet_special_tokens() : detail::albert_special_tokens(),
        tokenizer_config ? *tokenizer_config : nlohmann::json::object(), config_path);
    return std::make_unique<SentencePiece>(model_path, model_type, lower_case, false, true, false, keep_accents,
                                           &special_tokens, config_path);
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& directory, const HfConfig& config) try {
    const std::filesystem::path folder = directory;
    int lower_case = -1;
    bool add_bos = true, add_eos = false;  // LlamaTokenizer's defaults
    bool keep_accents = false;             // AlbertTokenizer's and XLNetTokenizer's default
    bool add_prefix_space = false, prefix_space_given = false;
    const auto tokenizer_config = folder / "tokenizer_config.json";
    nlohmann::json json = nlohmann::json::object();  // read once: the settings below and WordPiece's
    // A boolean setting of tokenizer_config.json into `value` when given (absent or null: left as it is).
    auto flag = [&](const char* key, bool& value) {
        if (!json.is_object() || !json.contains(key) || json[key].is_null()) return false;
        if (!json[key].is_boolean()) throw Error(std::string(key) + " must be true or false", tokenizer_config.string());
        value = json[key].get<bool>();
        return true;
    };
    if (std::filesystem::exists(tokenizer_config)) {
        json = read_json_file(tokenizer_config.string(), "tokenizer_config.json");
        if (!json.is_object()) throw Error("tokenizer_config.json must hold a JSON object", tokenizer_config.string());
        bool lower = false;
        if (flag("do_lower_case", lower)) lower_case = lower ? 1 : 0;
        if (is_llama_family(config.model_type)) {  // read (and checked) only where they are used
            flag("add_bos_token", add_bos);
            flag("add_eos_token", add_eos);
        }
        flag("keep_accents", keep_accents);
        prefix_space_given = flag("add_prefix_space", add_prefix_space);
    }
    const std::string config_path = tokenizer_config.string();
    // The special and added tokens of a folder saved by transformers before 4.34 are in special_tokens_map.json,
    // added_tokens.json and tokenizer.json; transformers reads them when tokenizer_config.json has no
    // added_tokens_decoder, and so does this (a tokenizer.json that is itself the tokenizer has its own).
    const auto with_legacy_files = [&](bool tokenizer_json_too) {
        return detail::with_legacy_token_files(json, directory, tokenizer_json_too);
    };
    // The Llama family's SentencePiece file (Llama 2, Mistral) is tokenizer.model; their tokenizer.json beside it is
    // the same tokenizer in the byte_fallback/Metaspace form, which the byte-level BPE reader refuses.
    if (is_llama_family(config.model_type) && std::filesystem::exists(folder / "tokenizer.model")) {
        // LlamaTokenizerFast with add_prefix_space false drops SentencePiece's dummy "▁" before the text: not done here.
        if (prefix_space_given && !add_prefix_space)
            throw Error("add_prefix_space false (no \"▁\" before the text) is not supported for tokenizer.model",
                        config_path);
        const auto special_tokens =
            detail::configured_special_tokens(detail::llama_special_tokens(), with_legacy_files(true), config_path);
        return std::make_unique<SentencePiece>((folder / "tokenizer.model").string(), config.model_type, false, true,
                                               add_bos, add_eos, false, &special_tokens, config_path);
    }
    if (std::filesystem::exists(folder / "spiece.model")) {
        const nlohmann::json merged = with_legacy_files(true);
        return load_sentencepiece((folder / "spiece.model").string(), config.model_type,
                                  lower_case < 0 ? config.model_type == "albert" : lower_case == 1, keep_accents, &merged,
                                  config_path);
    }
    // BertTokenizer's settings (do_lower_case true by default, strip_accents, tokenize_chinese_chars); its fast form
    // applies them over a tokenizer.json's normalizer too, unless the folder asks for the bare PreTrainedTokenizerFast.
    std::string tokenizer_class;
    const WordPieceSettings wordpiece = read_wordpiece_settings(json, config_path, &tokenizer_class);
    if (std::filesystem::exists(folder / "vocab.txt")) {
        const nlohmann::json merged = with_legacy_files(true);
        return load_wordpiece((folder / "vocab.txt").string(), wordpiece, &merged, config_path);
    }
    if (std::filesystem::exists(folder / "tokenizer.json")) {
        // GPT2TokenizerFast and RobertaTokenizerFast put tokenizer_config.json's add_prefix_space over the json's.
        if (prefix_space_given && add_prefix_space)
            throw Error("add_prefix_space true (a space before the text) is not supported", config_path);
        const bool bert_class = tokenizer_class != "PreTrainedTokenizerFast";
        const nlohmann::json merged = with_legacy_files(false);
        // GPTNeoXTokenizerFast (the class a gpt_neox folder without tokenizer_class gets from AutoTokenizer) replaces
        // the json's post_processor: bos_token first with add_bos_token, eos_token last with add_eos_token (both
        // false by default; both tokens "<|endoftext|>" by default).
        const bool neox_class = tokenizer_class == "GPTNeoXTokenizer" || tokenizer_class == "GPTNeoXTokenizerFast" ||
                                (tokenizer_class.empty() && config.model_type == "gpt_neox");
        ReplacedFraming neox_framing;
        if (neox_class) {
            // The roles as transformers reads them: tokenizer_config.json's, or an older folder's
            // special_tokens_map.json's.
            auto role = [&](const char* key) {
                if (!merged.contains(key)) return std::string("<|endoftext|>");
                const std::string content = detail::token_content(merged[key]);
                if (content.empty()) throw Error(std::string(key) + " is null or empty, and a sample needs it", config_path);
                return content;
            };
            bool add_bos_token = false, add_eos_token = false;
            flag("add_bos_token", add_bos_token);
            flag("add_eos_token", add_eos_token);
            if (add_bos_token) neox_framing.prefix.push_back(role("bos_token"));
            if (add_eos_token) neox_framing.suffix.push_back(role("eos_token"));
        }
        return load_tokenizer_json((folder / "tokenizer.json").string(), bert_class ? &wordpiece : nullptr,
                                   bert_class ? &merged : nullptr, config_path, neox_class ? &neox_framing : nullptr);
    }
    const bool merges = std::filesystem::exists(folder / "vocab.json") || std::filesystem::exists(folder / "merges.txt");
    throw Error("no tokenizer: none of spiece.model, vocab.txt, tokenizer.json" +
                    std::string(is_llama_family(config.model_type) ? ", tokenizer.model" : "") +
                    (merges ? " (vocab.json and merges.txt alone are not read: tokenizer.json is)" : "") +
                    "; `rankscope model --inputs` takes token ids instead",
                directory);
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, directory + "/tokenizer_config.json");
}

namespace detail {

void train_sentencepiece_model(const std::vector<std::string>& lines, const std::filesystem::path& folder, int vocab_size,
                               const std::string& algorithm) {
    std::filesystem::create_directories(folder);
    const auto corpus = folder / "corpus.txt";
    {
        std::ofstream out(corpus);
        for (const auto& line : lines) out << line << "\n";
        if (!out) throw Error("cannot write the tokenizer corpus", corpus.string());
    }
    // Run in the folder with relative names: SentencePiece reads --input as a comma-separated list, so a comma in the
    // folder's path would split it.
    ProcessOptions options;
    options.working_directory = folder;
    options.stdout_file = folder / "train.log";
    options.stderr_file = folder / "train.log";
    const ProcessResult result = run_process(
        {spm_helper_path(), "train", "corpus.txt", "spiece", std::to_string(vocab_size), algorithm}, options);
    if (!result.ok()) {
        // The reason is SentencePiece's last line ("Internal: ...cc(660) [check] Vocabulary size too high (200). Please
        // set it to a value <= 62."): said here, not only in the log.
        std::string reason;
        {
            std::ifstream log(folder / "train.log");
            for (std::string line; std::getline(log, line);)
                if (line.find_first_not_of(" \t\r") != std::string::npos) reason = line;
        }
        if (const auto check = reason.rfind("] "); check != std::string::npos) reason = reason.substr(check + 2);
        if (reason.size() > 300) reason = reason.substr(0, 300) + "...";
        throw Error("training a SentencePiece " + algorithm + " model on the text failed (" + result.describe() + ")" +
                        (reason.empty() ? "" : ": " + reason),
                    (folder / "train.log").string());
    }
}

}  // namespace detail

std::unique_ptr<Tokenizer> train_sentencepiece(const std::vector<std::string>& sentences, const std::string& directory,
                                               int vocab_size, const std::string& model_type) {
    detail::train_sentencepiece_model(sentences, directory, vocab_size, "unigram");
    // No transformers class behind it: no special tokens matched (its user-defined symbols are SentencePiece's own).
    return std::make_unique<SentencePiece>((std::filesystem::path(directory) / "spiece.model").string(), model_type,
                                           false, false, true, false, false, nullptr, "");
}

// default_rte_path, read_sentences: src/loaders/text_file.cpp (torch-free, bounded, fuzzed).

ModelBatch pack_text(const Tokenizer& tokenizer, const std::vector<std::string>& sentences, int samples, int tokens,
                     const std::string& text_path) {
    const auto prefix = tokenizer.prefix(), suffix = tokenizer.suffix(), suffix_types = tokenizer.suffix_types();
    const int content = tokens - static_cast<int>(prefix.size() + suffix.size());
    if (samples < 1) throw Error(fmt::format("cannot pack {} samples", samples), "--samples");
    if (content < 1)
        throw Error(fmt::format("{} tokens per sample leave no room for text beside the tokenizer's {} special tokens (at "
                                "least {})",
                                tokens, prefix.size() + suffix.size(), prefix.size() + suffix.size() + 1),
                    "--tokens");
    std::vector<std::int64_t> ids, types;
    std::vector<int> stream;
    std::size_t next = 0;
    // Encode only as many sentences as the samples need (in blocks, so the SentencePiece helper starts rarely).
    std::vector<std::vector<int>> encoded;
    for (int s = 0; s < samples; ++s) {
        while (static_cast<int>(stream.size()) < content && next < sentences.size()) {
            if (next >= encoded.size()) {
                const std::size_t end = std::min(sentences.size(), encoded.size() + 512);
                auto block = tokenizer.encode_batch({sentences.begin() + static_cast<long>(encoded.size()),
                                                     sentences.begin() + static_cast<long>(end)});
                for (auto& ids : block) encoded.push_back(std::move(ids));
            }
            const auto& ids = encoded[next++];
            stream.insert(stream.end(), ids.begin(), ids.end());
        }
        if (static_cast<int>(stream.size()) < content)
            throw Error(fmt::format("text too short: it fills {} sample{} of {} tokens, {} were asked for", s, s == 1 ? "" : "s",
                                    tokens, samples),
                        text_path);
        ids.insert(ids.end(), prefix.begin(), prefix.end());
        ids.insert(ids.end(), stream.begin(), stream.begin() + content);
        ids.insert(ids.end(), suffix.begin(), suffix.end());
        types.insert(types.end(), prefix.size() + static_cast<std::size_t>(content), 0);
        types.insert(types.end(), suffix_types.begin(), suffix_types.end());
        stream.erase(stream.begin(), stream.begin() + content);
    }
    ModelBatch batch;
    batch.input_ids = torch::tensor(ids, torch::kLong).view({samples, tokens});
    batch.token_type_ids = torch::tensor(types, torch::kLong).view({samples, tokens});
    batch.attention_mask = torch::ones({samples, tokens}, torch::kLong);
    if (batch.input_ids.max().item<std::int64_t>() >= tokenizer.vocab_size())
        throw Error("tokenizer produced an id outside its vocabulary", tokenizer.source());
    return batch;
}

}  // namespace rankscope
