#pragma once
// Special and added tokens, matched in the text before a tokenizer's own model sees it, as transformers' tokenizers
// (slow: tokens_trie.split; fast: AddedVocabulary) do: "Paris is the [MASK] of France." is [MASK]'s id between the
// text's pieces, not "[", "mask", "]". Shared by the WordPiece, SentencePiece and byte-level BPE readers. Torch-free.
//
//   text ─ split at added tokens (leftmost, longest first) ─┬─ text segments ─ the tokenizer (normalize, split, model)
//                                                           └─ token ids, as they are
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rankscope::detail {

// The largest token id read from a tokenizer's files (added tokens, post-processor ids): 2^24 - 1, a bound on the
// number read before it is checked against the vocabulary (shared by added_tokens.cpp and post_processor.cpp).
inline constexpr std::int64_t kMaxTokenId = (std::int64_t(1) << 24) - 1;

struct AddedToken {
    std::string content;
    int id = -1;                          // -1: the content's id in the tokenizer's vocabulary
    bool lstrip = false, rstrip = false;  // it takes the whitespace on its left / right with it (ALBERT's [MASK])
    // Matched only as a word of its own: not where a word character (the regex \w: letters, marks, digits,
    // connector punctuation) touches it, as the `tokenizers` AddedVocabulary decides (transformers' slow tokenizers
    // ask for a plain space instead, and differ where punctuation or other whitespace touches it).
    bool single_word = false;
    // Matched in the normalized text (lower-cased, accents stripped, as the tokenizer normalizes), its content
    // normalized the same way: a non-special token added with normalized true ("covid19" matches "COVID19" in an
    // uncased tokenizer). Tokens with normalized false (special tokens, unless they say otherwise) are matched in the
    // text as it is.
    bool normalized = false;
    bool special = false;
    // transformers' slow tokenizers lower-case the text (do_lower_case) before they match added tokens, all but the
    // strings of all_special_tokens (the roles' and additional_special_tokens') and of normalized non-special tokens:
    // this token's string is one of those (lower_case_except keeps it).
    bool case_kept_by_slow_tokenizers = false;
};

// A piece of the text: a segment for the tokenizer (id -1) or an added token's id.
struct TextSegment {
    std::string text;
    int id = -1;
};

class AddedTokenSplitter {
public:
    using Normalizer = std::function<std::string(const std::string&)>;
    AddedTokenSplitter() = default;
    // Tokens with an id (>= 0); a content given twice keeps the last. `normalize`: the tokenizer's normalization
    // (idempotent: the segments it gives are normalized again by the tokenizer); none: every token is matched as is.
    explicit AddedTokenSplitter(std::vector<AddedToken> tokens, Normalizer normalize = {});
    // The text in order: segments between the tokens (whitespace an lstrip/rstrip token takes removed; empty ones left
    // out) and the tokens' ids. No tokens: the whole text, one segment. A single_word token inside a word is text, and
    // the search goes on after it (as the `tokenizers` crate's leftmost-longest iteration does). Normalized tokens are
    // matched after: in each segment between the others, normalized (the segments they leave are normalized text).
    std::vector<TextSegment> split(const std::string& text) const;
    bool empty() const { return as_is_.tokens.empty() && normalized_.tokens.empty(); }

private:
    struct Matcher {
        std::vector<AddedToken> tokens;  // longest first: the longest match at the leftmost position wins
        std::array<bool, 256> first_bytes{};
        void add(const std::vector<AddedToken>& all);
        void split(const std::string& text, std::vector<TextSegment>& out) const;
    };
    Matcher as_is_, normalized_;
    Normalizer normalize_;
};

// The string of a token as a configuration gives it ("[MASK]" or {"content": "[MASK]", ...}); "" for anything else.
std::string token_content(const nlohmann::json& token);

// tokenizer.json's "added_tokens": [{"id", "content", "lstrip", "rstrip", "single_word", "normalized", ...}]; ids
// below `id_limit`. Errors name `path`.
std::vector<AddedToken> read_tokenizer_json_added_tokens(const nlohmann::json& added, int id_limit, const std::string& path);

// One special token of a transformers tokenizer class: its role in tokenizer_config.json ("cls_token") and default.
struct SpecialTokenDefault {
    const char* role;
    const char* content;
    bool lstrip = false;  // AlbertTokenizer's and XLNetTokenizer's mask token
};
// The classes' defaults (transformers 4.57): BertTokenizer (and DistilBERT's), AlbertTokenizer, XLNetTokenizer,
// LlamaTokenizer.
std::vector<SpecialTokenDefault> bert_special_tokens();
std::vector<SpecialTokenDefault> albert_special_tokens();
std::vector<SpecialTokenDefault> xlnet_special_tokens();
std::vector<SpecialTokenDefault> llama_special_tokens();

// The special tokens a tokenizer_config.json gives, over the class's defaults: each role's "*_token" (a string, an
// AddedToken object {"content", "lstrip", "rstrip", "single_word", "normalized", "special"}, or null for none; a string keeps the default's lstrip, as
// AlbertTokenizer wraps its mask token), "additional_special_tokens", and "added_tokens_decoder" ({"id": token}, whose
// ids and flags win).
struct ConfiguredSpecialTokens {
    std::vector<AddedToken> tokens;            // to match in the text
    std::map<std::string, std::string> roles;  // role -> content; a role set to null is absent
    // The content of `role` ("cls_token"); throws naming `path` and the role when the configuration has none.
    const std::string& content(const std::string& role, const std::string& path) const;
};
ConfiguredSpecialTokens configured_special_tokens(const std::vector<SpecialTokenDefault>& defaults,
                                                  const nlohmann::json& tokenizer_config, const std::string& path);

// tokenizer_config.json as transformers reads a folder saved before added_tokens_decoder existed (transformers < 4.34):
// when `config` has no added_tokens_decoder, special_tokens_map.json's roles replace the config's (its
// additional_special_tokens are appended), and added_tokens.json ({"token": id}; special when a role or an additional
// special token names it) and (when `tokenizer_json_too`) tokenizer.json's added_tokens become an added_tokens_decoder.
// Files absent: `config` as it is. Errors name the file.
nlohmann::json with_legacy_token_files(const nlohmann::json& config, const std::string& folder, bool tokenizer_json_too);

// The text lower-cased (Unicode simple mapping, as utf8::lower_only) except the strings of the tokens marked
// case_kept_by_slow_tokenizers (longest first at each position): transformers' slow tokenize() with do_lower_case.
std::string lower_case_except(const std::string& text, const std::vector<AddedToken>& tokens);

// The tokens with their ids: a given id, else `id_of(content)` (-1: not in the vocabulary, then left out and its
// content added to `unmatched`: read as plain characters).
std::vector<AddedToken> resolve_ids(const std::vector<AddedToken>& tokens,
                                    const std::function<int(const std::string&)>& id_of,
                                    std::vector<std::string>* unmatched);

}  // namespace rankscope::detail
