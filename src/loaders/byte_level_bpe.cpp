// Byte-level BPE from a Hugging Face tokenizer.json (GPT-2, RoBERTa, Llama 3, Qwen2): the encoding half of the `tokenizers`
// library's BPE model, for the configurations these checkpoints use. Training is not here (not needed: the
// checkpoints ship their merges).
//
//   text ─ normalizer (none, or NFC) ─ added tokens split out literally (longest first) ─ pre-tokenizer:
//     ByteLevel(use_regex = true): GPT-2's split pattern, or Sequence[Split(Regex, Isolated), ByteLevel(use_regex =
//     false)] (Llama 3, Qwen2: their own pattern) ─ each piece's UTF-8 bytes mapped to printable characters
//     (GPT-2's bytes_to_unicode) ─ BPE: repeatedly merge the adjacent pair with the lowest merge rank (ignore_merges:
//     a piece that is itself in the vocabulary is taken whole, as Llama 3 asks) ─ ids.
//   Post-processor: TemplateProcessing's single-sequence special tokens become prefix()/suffix() (Llama 3's
//   <|begin_of_text|>), RobertaProcessing's cls and sep too (<s> x </s>); ByteLevel adds nothing.
// Anything else (byte_fallback, dropout, Metaspace/Llama 2 style, continuing_subword_prefix, other normalizers) is
// refused in one line naming tokenizer.json and the field. Regular expressions: PCRE2 (UTF and Unicode properties,
// a match limit so no pattern can hang on hostile text).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "loaders/added_tokens.hpp"
#include "loaders/post_processor.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"
#include "rankscope/tokenizer.hpp"
#include "text_utf8.hpp"
#include "unicode.hpp"

namespace rankscope {
namespace {

// GPT-2's split pattern (ByteLevel with use_regex = true).
const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr int kMaxVocabulary = 10'000'000;
constexpr std::size_t kMaxCachedPieceBytes = 256;
constexpr std::uint64_t kPatternScanBudget = 256;  // bytes of windows searched per byte of text (see encode_text)
constexpr std::size_t kFirstWindowBytes = 64;

// GPT-2's bytes_to_unicode: the printable bytes stand for themselves; the others (controls, space, 127–160, 173)
// are mapped, in byte order, to U+0100, U+0101, ... Returned as each byte's UTF-8 string.
const std::vector<std::string>& byte_symbols() {
    static const std::vector<std::string> symbols = [] {
        std::vector<std::string> out(256);
        utf8proc_int32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            utf8proc_uint8_t bytes[4];
            const auto length = utf8proc_encode_char(printable ? b : static_cast<utf8proc_int32_t>(next++), bytes);
            out[static_cast<std::size_t>(b)].assign(reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(length));
        }
        return out;
    }();
    return symbols;
}

struct Regex {
    pcre2_code* code = nullptr;
    ~Regex() { pcre2_code_free(code); }
};

class ByteLevelBpe : public Tokenizer {
public:
    ByteLevelBpe(const std::string& path, const ReplacedFraming* framing) : path_(path) {
        const nlohmann::json json = read_json_file(path, "tokenizer.json");
        if (!json.is_object()) throw Error("tokenizer.json must hold a JSON object", path);
        read_model(field(json, "model"));
        read_normalizer(json.value("normalizer", nlohmann::json()));
        read_pre_tokenizer(field(json, "pre_tokenizer"));
        read_added_tokens(json.value("added_tokens", nlohmann::json::array()));
        if (!framing) {
            read_post_processor(json.value("post_processor", nlohmann::json()));
            return;
        }
        // The tokenizer class replaces the post_processor (GPTNeoXTokenizerFast): its tokens by content.
        auto id_of = [&](const std::string& content) {
            if (added_ids_.count(content)) return added_ids_.at(content);
            if (ids_.count(content)) return ids_.at(content);
            throw Error("the special token '" + printable(content, 40) +
                            "' that tokenizer_config.json puts around each sample is not in the vocabulary",
                        path_);
        };
        for (const auto& content : framing->prefix) prefix_.push_back(id_of(content));
        for (const auto& content : framing->suffix) suffix_.push_back(id_of(content));
    }

    std::vector<int> encode(const std::string& text) const override {
        // Invalid UTF-8 is the text's fault, not tokenizer.json's (read_sentences names the file and line first).
        if (const std::size_t bad = utf8::first_invalid(text); bad != std::string::npos)
            throw Error(fmt::format("the text to tokenize is not valid UTF-8 (byte {})", bad + 1), "text");
        std::vector<int> ids;
        // Added tokens are matched literally first (longest first at each position; lstrip / rstrip take the
        // whitespace beside them, as RoBERTa's <mask>; those with normalized true in the NFC text); the text between
        // is normalized and goes through the pre-tokenizer and BPE.
        for (const detail::TextSegment& segment : added_.split(text)) {
            if (segment.id >= 0) ids.push_back(segment.id);
            else encode_text(nfc_ ? unicode::nfc(segment.text, "text") : segment.text, ids);
        }
        return ids;
    }
    std::vector<int> prefix() const override { return prefix_; }
    std::vector<int> suffix() const override { return suffix_; }
    int vocab_size() const override { return vocab_size_; }
    std::string source() const override { return path_; }
    std::vector<std::string> special_tokens_read_as_text() const override { return {}; }

private:
    const nlohmann::json& field(const nlohmann::json& object, const char* name) const {
        if (!object.is_object() || !object.contains(name)) throw Error(std::string("no '") + name + "' field", path_);
        return object.at(name);
    }
    [[noreturn]] void unsupported(const std::string& what) const {
        throw Error(what + " is not supported (tokenizer.json is read as byte-level BPE, GPT-2, RoBERTa, Llama 3 and Qwen2 "
                           "style, or WordPiece, BERT style); `rankscope model --inputs` takes token ids instead",
                    path_);
    }

    void read_model(const nlohmann::json& model) {
        if (!model.is_object() || model.value("type", "") != "BPE")
            unsupported("model.type " + (model.is_object() ? model.value("type", std::string("(none)")) : std::string("(none)")));
        if (model.value("byte_fallback", false))
            unsupported("model.byte_fallback = true (Llama 2 / SentencePiece style: rankscope reads such a tokenizer from "
                        "the tokenizer.model of a llama or mistral folder, and there is none here)");
        if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0) unsupported("BPE dropout");
        for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
            if (model.contains(affix) && model[affix].is_string() && !model[affix].get<std::string>().empty())
                unsupported(std::string("model.") + affix);
        ignore_merges_ = model.value("ignore_merges", false);
        const auto& vocab = field(model, "vocab");
        if (!vocab.is_object() || vocab.empty()) throw Error("model.vocab must be a non-empty object", path_);
        for (const auto& [piece, id] : vocab.items()) {
            const int value = static_cast<int>(
                json_integer(id, 0, kMaxVocabulary - 1, "model.vocab: the id of '" + printable(piece) + "'", path_));
            ids_[piece] = value;
            vocab_size_ = std::max(vocab_size_, value + 1);
        }
        const auto& merges = field(model, "merges");
        if (!merges.is_array()) throw Error("model.merges must be an array", path_);
        for (std::size_t rank = 0; rank < merges.size(); ++rank) {
            const auto& merge = merges[rank];
            std::string left, right;
            if (merge.is_string()) {  // "a b" (older files)
                const std::string text = merge.get<std::string>();
                const std::size_t space = text.find(' ');
                if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
                    throw Error(fmt::format("model.merges[{}] is not two symbols separated by one space", rank), path_);
                left = text.substr(0, space), right = text.substr(space + 1);
            } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
                left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
            } else {
                throw Error(fmt::format("model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", rank), path_);
            }
            if (!ids_.count(left + right))
                throw Error(fmt::format("model.merges[{}]: the merged symbol '{}' is not in the vocabulary", rank,
                                        printable(left + right)), path_);
            ranks_.emplace(pair_key(left, right), static_cast<int>(rank));  // a repeated pair keeps its first rank
        }
    }

    void read_normalizer(const nlohmann::json& normalizer) {
        if (normalizer.is_null()) return;
        if (normalizer.is_object() && normalizer.value("type", "") == "NFC") {
            nfc_ = true;
            return;
        }
        unsupported("normalizer " + normalizer.dump().substr(0, 80));
    }

    void read_pre_tokenizer(const nlohmann::json& pre) {
        auto byte_level = [&](const nlohmann::json& p, bool with_split) {
            if (p.value("add_prefix_space", false)) unsupported("ByteLevel add_prefix_space = true");
            const bool use_regex = p.value("use_regex", true);
            if (with_split == use_regex) unsupported(with_split ? "Split followed by ByteLevel(use_regex = true)"
                                                                : "ByteLevel(use_regex = false) without a Split");
        };
        std::string pattern;
        if (pre.is_object() && pre.value("type", "") == "ByteLevel") {
            byte_level(pre, false);
            pattern = kGpt2Pattern;
        } else if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
                   pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 2) {
            const auto& split = pre["pretokenizers"][0];
            if (!split.is_object() || split.value("type", "") != "Split" || split.value("behavior", "") != "Isolated" ||
                split.value("invert", false) || !split.contains("pattern") || !split["pattern"].is_object() ||
                !split["pattern"].contains("Regex") || !split["pattern"]["Regex"].is_string())
                unsupported("pre_tokenizer.pretokenizers[0] (expected Split with a Regex pattern, behavior Isolated)");
            const auto& second = pre["pretokenizers"][1];
            if (!second.is_object() || second.value("type", "") != "ByteLevel")
                unsupported("pre_tokenizer.pretokenizers[1] (expected ByteLevel)");
            byte_level(second, true);
            pattern = split["pattern"]["Regex"].get<std::string>();
        } else {
            unsupported("pre_tokenizer " + pre.dump().substr(0, 80));
        }
        int code = 0;
        PCRE2_SIZE offset = 0;
        regex_ = std::make_shared<Regex>();
        regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
        if (!regex_->code) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(code, message, sizeof message);
            throw Error(fmt::format("the pre-tokenizer's pattern does not compile at offset {}: {}", offset,
                                    reinterpret_cast<const char*>(message)), path_);
        }
    }

    void read_added_tokens(const nlohmann::json& added) {
        const auto tokens = detail::read_tokenizer_json_added_tokens(added, kMaxVocabulary, path_);
        for (const auto& token : tokens) {
            added_ids_[token.content] = token.id;
            vocab_size_ = std::max(vocab_size_, token.id + 1);
        }
        detail::AddedTokenSplitter::Normalizer normalize;
        if (nfc_) normalize = [](const std::string& text) { return unicode::nfc(text, "text"); };
        added_ = detail::AddedTokenSplitter(tokens, normalize);
    }

    void read_post_processor(const nlohmann::json& post) {
        if (post.is_null()) return;
        if (!post.is_object()) unsupported("post_processor");
        const std::string type = post.value("type", "");
        if (type == "ByteLevel") return;
        // RoBERTa's: cls ["<s>", 0] before the text, sep ["</s>", 2] after it (trim_offsets / add_prefix_space move
        // offsets only).
        if (type == "RobertaProcessing") {
            prefix_.push_back(detail::framing_pair_id(post, "cls", vocab_size_, path_));
            suffix_.push_back(detail::framing_pair_id(post, "sep", vocab_size_, path_));
            return;
        }
        if (type == "Sequence" && post.contains("processors") && post["processors"].is_array()) {
            for (const auto& processor : post["processors"]) read_post_processor(processor);
            return;
        }
        if (type != "TemplateProcessing") unsupported("post_processor " + type);
        const detail::Framing framing = detail::template_framing(
            post, [&](const std::string& name) { return added_ids_.count(name) ? added_ids_.at(name) : -1; }, vocab_size_,
            path_);
        prefix_.insert(prefix_.end(), framing.prefix.begin(), framing.prefix.end());
        suffix_.insert(suffix_.end(), framing.suffix.begin(), framing.suffix.end());
    }

    static std::string pair_key(const std::string& left, const std::string& right) { return left + '\0' + right; }

    // Pre-tokenizes `text` and appends the ids of its pieces.
    //
    // Bounded total work, whatever the pattern. Each match is searched in a window of the text that starts small and
    // doubles only while PCRE2 reports that the match needs more of the text (PCRE2_PARTIAL_HARD: it stops as soon
    // as a path reaches the window's end, so a complete match inside the window is the one the whole text gives).
    // The windows' bytes are counted against kPatternScanBudget × the text's length, and each call's match limit is
    // proportional to its window: a pattern that looks far ahead at every position (quadratic in the text, e.g.
    // a(?=a*$) over 64 kB of a) is refused in one line instead of running for minutes. The checkpoints' patterns
    // look at most one character past a piece and stay far below the budget.
    void encode_text(const std::string& text, std::vector<int>& ids) const {
        if (text.empty()) return;  // valid UTF-8: encode() checked it
        std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
            pcre2_match_data_create_from_pattern(regex_->code, nullptr), &pcre2_match_data_free);
        std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
            pcre2_match_context_create(nullptr), &pcre2_match_context_free);
        const std::uint64_t budget = kPatternScanBudget * text.size() + (1u << 20);
        std::uint64_t scanned = 0;
        auto character_end = [&](std::size_t end) {  // never cut a UTF-8 sequence (PCRE2_NO_UTF_CHECK needs whole ones)
            while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
            return end;
        };
        std::size_t at = 0;
        while (at < text.size()) {
            std::size_t window = kFirstWindowBytes;
            int found = 0;
            for (;;) {
                const std::size_t end = character_end(std::min(text.size(), at + window));
                const bool whole = end == text.size();
                scanned += end - at;
                if (scanned > budget)
                    throw Error(fmt::format("the pre-tokenizer's pattern scans more than {} bytes for a text of {} bytes "
                                            "(it looks far ahead at every position)",
                                            budget, text.size()),
                                path_);
                pcre2_set_match_limit(context.get(), static_cast<std::uint32_t>(std::min<std::uint64_t>(
                                                         10'000'000, 10'000 + 64ull * (end - at))));
                found = pcre2_match(regex_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), end, at,
                                    PCRE2_NO_UTF_CHECK | (whole ? 0 : PCRE2_PARTIAL_HARD), match.get(), context.get());
                // A partial match, or no match in a window that is not the whole rest (a match may start after it).
                if (whole || (found != PCRE2_ERROR_PARTIAL && found != PCRE2_ERROR_NOMATCH)) break;
                window *= 2;
            }
            if (found == PCRE2_ERROR_NOMATCH) {
                encode_piece(text.substr(at), ids);  // the rest matched nothing: one piece (Isolated keeps gaps)
                return;
            }
            if (found == PCRE2_ERROR_MATCHLIMIT)
                throw Error("the pre-tokenizer's pattern backtracks too much on this text (PCRE2's match limit)", path_);
            if (found < 0) {  // PCRE2's own words (for (?R): "nested recursion at the same subject position"), not its number
                PCRE2_UCHAR message[256];
                pcre2_get_error_message(found, message, sizeof message);
                throw Error(fmt::format("the pre-tokenizer's pattern failed on the text: {}", reinterpret_cast<const char*>(message)),
                            path_);
            }
            const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
            if (span[0] > at) encode_piece(text.substr(at, span[0] - at), ids);  // a gap before the match
            if (span[1] == span[0]) {  // an empty match: step one character on (never happens with these patterns)
                const std::size_t next = character_end(span[0] + 1);
                encode_piece(text.substr(span[0], next - span[0]), ids);
                at = next;
                continue;
            }
            encode_piece(text.substr(span[0], span[1] - span[0]), ids);
            at = span[1];
        }
    }

    // A piece is merged whole, however long (as the `tokenizers` library does); short pieces are cached.
    void encode_piece(const std::string& piece, std::vector<int>& ids) const {
        const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
        if (cacheable) {
            std::lock_guard<std::mutex> lock(cache_mutex_);
            const auto hit = cache_.find(piece);
            if (hit != cache_.end()) {
                ids.insert(ids.end(), hit->second.begin(), hit->second.end());
                return;
            }
        }
        std::vector<int> out = bpe(piece);
        ids.insert(ids.end(), out.begin(), out.end());
        if (!cacheable) return;
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cache_.size() < 200'000) cache_.emplace(piece, std::move(out));
    }

    // One pre-tokenized piece: its bytes as symbols, then merges by rank, lowest first; equal ranks left to right.
    // This is the `tokenizers` library's Word::merge_all (the reference for tokenizer.json), ordering included: the
    // candidate pairs sit in a priority queue keyed by (rank, position), symbols in a linked list, and a popped
    // candidate whose pair has changed is skipped. O(n log n); rescanning the piece after every merge was quadratic
    // (a 64 kB piece took minutes). It can differ from GPT-2's original bpe() (which merges every occurrence of the
    // best pair in one pass) only when a merge creates a pair of lower rank than the one being merged, which a
    // merges list that makes one token twice allows; transformers' fast tokenizers are merge_all too.
    std::vector<int> bpe(const std::string& piece) const {
        const int n = static_cast<int>(piece.size());
        std::vector<std::string> symbols(static_cast<std::size_t>(n));
        std::vector<int> previous(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
        std::string whole;
        for (int i = 0; i < n; ++i) {
            symbols[i] = byte_symbols()[static_cast<unsigned char>(piece[static_cast<std::size_t>(i)])];
            previous[i] = i - 1;
            next[i] = i + 1 < n ? i + 1 : -1;
            whole += symbols[i];
        }
        if (ignore_merges_) {
            const auto it = ids_.find(whole);
            if (it != ids_.end()) return {it->second};
        }
        using Candidate = std::tuple<int, int, int>;  // (rank, left symbol, right symbol)
        std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
        auto rank_of = [&](int left, int right) {
            const auto it = ranks_.find(pair_key(symbols[left], symbols[right]));
            return it == ranks_.end() ? -1 : it->second;
        };
        auto consider = [&](int left, int right) {
            if (left < 0 || right < 0) return;
            if (const int rank = rank_of(left, right); rank >= 0) queue.emplace(rank, left, right);
        };
        for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
        std::vector<char> alive(static_cast<std::size_t>(n), 1);
        while (!queue.empty()) {
            const auto [rank, left, right] = queue.top();
            queue.pop();
            // Stale: a side was merged away, the pair is no longer adjacent, or a side grew since it was queued.
            if (!alive[left] || !alive[right] || next[left] != right || rank_of(left, right) != rank) continue;
            symbols[left] += symbols[right];
            symbols[right].clear();
            alive[right] = 0;
            next[left] = next[right];
            if (next[right] >= 0) previous[next[right]] = left;
            consider(previous[left], left);
            consider(left, next[left]);
        }
        std::vector<int> out;
        for (int i = n > 0 ? 0 : -1; i >= 0; i = next[i]) {
            const auto it = ids_.find(symbols[i]);
            if (it == ids_.end())
                throw Error("the symbol '" + printable(symbols[i]) + "' is not in the vocabulary (every byte needs one)", path_);
            out.push_back(it->second);
        }
        return out;
    }

    std::string path_;
    std::unordered_map<std::string, int> ids_, added_ids_;
    std::unordered_map<std::string, int> ranks_;
    detail::AddedTokenSplitter added_;
    std::vector<int> prefix_, suffix_;
    std::shared_ptr<Regex> regex_;
    bool nfc_ = false, ignore_merges_ = false;
    int vocab_size_ = 0;
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_byte_level_bpe(const std::string& tokenizer_json_path, const ReplacedFraming* framing) try {
    return std::make_unique<ByteLevelBpe>(tokenizer_json_path, framing);
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, tokenizer_json_path);
}

}  // namespace rankscope
