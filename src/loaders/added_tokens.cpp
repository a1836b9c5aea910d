// Special and added tokens matched in the text: see added_tokens.hpp.
#include "loaders/added_tokens.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <filesystem>

#include "loaders/text_utf8.hpp"
#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope::detail {

namespace {

// Unicode's White_Space property (Rust's char::is_whitespace, which the `tokenizers` lstrip/rstrip use; Python's
// str.strip, in the slow tokenizers, adds U+001C–U+001F: beside an lstrip/rstrip token the two differ there).
bool is_white_space(std::int32_t c) {
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
           c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point at byte `at` and its length in bytes (an invalid byte counts as one non-space byte).
std::pair<std::int32_t, std::size_t> code_point_at(const std::string& text, std::size_t at) {
    utf8proc_int32_t code = -1;
    const utf8proc_ssize_t size = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data()) + at,
                                                   static_cast<utf8proc_ssize_t>(text.size() - at), &code);
    return {size > 0 ? code : -1, size > 0 ? static_cast<std::size_t>(size) : 1};
}

// Where the whitespace at the end of text[begin, end) starts.
std::size_t trailing_space_start(const std::string& text, std::size_t begin, std::size_t end) {
    std::size_t after_last_word = begin;
    for (std::size_t at = begin; at < end;) {
        const auto [code, size] = code_point_at(text, at);
        at += size;
        if (!is_white_space(code)) after_last_word = at;
    }
    return after_last_word;
}

// The regex crate's \w (Unicode): Alphabetic, marks, decimal digits, connector punctuation and the joiners. Alphabetic
// is the letters (L*, Nl) and Other_Alphabetic, whose characters outside the marks are the circled and squared Latin
// letters (U+24B6–U+24E9, U+1F130–U+1F149, U+1F150–U+1F169, U+1F170–U+1F189); other numbers (No: ², ½, ①) are not.
bool is_word_character(std::int32_t c) {
    if (c < 0) return false;
    if (c == 0x200c || c == 0x200d || (c >= 0x24b6 && c <= 0x24e9) || (c >= 0x1f130 && c <= 0x1f149) ||
        (c >= 0x1f150 && c <= 0x1f169) || (c >= 0x1f170 && c <= 0x1f189))
        return true;
    switch (utf8proc_category(c)) {
        case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
            return true;
        default: return false;
    }
}

// Whether the character ending at byte `end` (or starting at byte `at`) is a word character.
bool word_character_before(const std::string& text, std::size_t end) {
    std::size_t begin = end;
    while (begin > 0 && (static_cast<unsigned char>(text[begin - 1]) & 0xc0) == 0x80) --begin;
    if (begin == 0) return false;
    --begin;
    return is_word_character(code_point_at(text, begin).first);
}
bool word_character_at(const std::string& text, std::size_t at) {
    return at < text.size() && is_word_character(code_point_at(text, at).first);
}

// Where the whitespace at `at` ends.
std::size_t leading_space_end(const std::string& text, std::size_t at) {
    while (at < text.size()) {
        const auto [code, size] = code_point_at(text, at);
        if (!is_white_space(code)) break;
        at += size;
    }
    return at;
}

bool flag(const nlohmann::json& token, const char* key, bool fallback, const std::string& where, const std::string& path) {
    if (!token.contains(key) || token[key].is_null()) return fallback;
    if (!token[key].is_boolean()) throw Error(where + "." + key + " must be true or false", path);
    return token[key].get<bool>();
}

// An AddedToken object's flags, as transformers and the `tokenizers` crate write them: lstrip, rstrip, single_word,
// special (`special` when absent) and normalized (not special when absent).
void read_flags(const nlohmann::json& value, bool special, const std::string& where, const std::string& path,
                AddedToken& token) {
    token.lstrip = flag(value, "lstrip", false, where, path);
    token.rstrip = flag(value, "rstrip", false, where, path);
    token.single_word = flag(value, "single_word", false, where, path);
    token.special = flag(value, "special", special, where, path);
    token.normalized = flag(value, "normalized", !token.special, where, path);
}

// A token as tokenizer_config.json writes it: "[MASK]" or {"content": "[MASK]", "lstrip": true, ...}. A string keeps
// `fallback`'s flags.
AddedToken config_token(const nlohmann::json& value, const AddedToken& fallback, bool special, const std::string& where,
                        const std::string& path) {
    AddedToken token = fallback;
    token.special = special;
    if (value.is_string()) {
        token.content = value.get<std::string>();
    } else if (value.is_object() && value.contains("content") && value["content"].is_string()) {
        token.content = value["content"].get<std::string>();
        read_flags(value, special, where, path, token);  // (a role's token and an additional one are special)
    } else {
        throw Error(where + " must be a string, {\"content\": ...} or null", path);
    }
    if (token.content.empty()) throw Error(where + " is empty", path);
    return token;
}

void keep_last(std::vector<AddedToken>& tokens, const AddedToken& token) {
    tokens.erase(std::remove_if(tokens.begin(), tokens.end(), [&](const AddedToken& t) { return t.content == token.content; }),
                 tokens.end());
    tokens.push_back(token);
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<AddedToken> tokens, Normalizer normalize)
    : normalize_(std::move(normalize)) {
    std::vector<AddedToken> unique, as_is, normalized;
    for (const auto& token : tokens)
        if (token.id >= 0 && !token.content.empty()) keep_last(unique, token);
    for (AddedToken token : unique) {
        if (!(token.normalized && normalize_)) {
            as_is.push_back(token);
            continue;
        }
        token.content = normalize_(token.content);
        if (!token.content.empty()) normalized.push_back(token);
    }
    as_is_.add(as_is);
    normalized_.add(normalized);
}

void AddedTokenSplitter::Matcher::add(const std::vector<AddedToken>& all) {
    tokens = all;
    std::stable_sort(tokens.begin(), tokens.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    for (const auto& token : tokens) first_bytes[static_cast<unsigned char>(token.content[0])] = true;
}

void AddedTokenSplitter::Matcher::split(const std::string& text, std::vector<TextSegment>& out) const {
    const auto add_text = [&](std::size_t begin, std::size_t end) {
        if (end > begin) out.push_back({text.substr(begin, end - begin), -1});
    };
    std::size_t start = 0, at = 0;  // start: where the pending text segment begins
    while (at < text.size()) {
        const AddedToken* match = nullptr;
        if (first_bytes[static_cast<unsigned char>(text[at])])
            for (const auto& token : tokens)
                if (text.compare(at, token.content.size(), token.content) == 0) {
                    match = &token;
                    break;
                }
        if (!match) {
            ++at;
            continue;
        }
        if (match->single_word && (word_character_before(text, at) || word_character_at(text, at + match->content.size()))) {
            at += match->content.size();  // text; the search goes on after it
            continue;
        }
        add_text(start, match->lstrip ? trailing_space_start(text, start, at) : at);
        out.push_back({"", match->id});
        at += match->content.size();
        if (match->rstrip) at = leading_space_end(text, at);
        start = at;
    }
    add_text(start, text.size());
}

std::vector<TextSegment> AddedTokenSplitter::split(const std::string& text) const {
    std::vector<TextSegment> segments;
    as_is_.split(text, segments);
    if (normalized_.tokens.empty()) return segments;
    std::vector<TextSegment> out;
    for (const auto& segment : segments) {
        if (segment.id >= 0) out.push_back(segment);
        else normalized_.split(normalize_(segment.text), out);
    }
    return out;
}

std::vector<AddedToken> read_tokenizer_json_added_tokens(const nlohmann::json& added, int id_limit, const std::string& path) {
    if (!added.is_array()) throw Error("added_tokens must be an array", path);
    std::vector<AddedToken> tokens;
    for (const auto& token : added) {
        if (!token.is_object() || !token.contains("id") || !token.contains("content") || !token["content"].is_string())
            throw Error("added_tokens: each needs an integer id and a string content", path);
        AddedToken read;
        read.id = static_cast<int>(json_integer(token["id"], 0, std::min<std::int64_t>(id_limit - 1, kMaxTokenId),
                                                "added_tokens: an id", path));
        read.content = token["content"].get<std::string>();
        if (read.content.empty()) throw Error("added_tokens: an empty content", path);
        read_flags(token, false, "added_tokens", path, read);
        tokens.push_back(read);
    }
    return tokens;
}

std::vector<SpecialTokenDefault> bert_special_tokens() {
    return {{"unk_token", "[UNK]"}, {"sep_token", "[SEP]"}, {"pad_token", "[PAD]"}, {"cls_token", "[CLS]"},
            {"mask_token", "[MASK]"}};
}
std::vector<SpecialTokenDefault> albert_special_tokens() {
    return {{"bos_token", "[CLS]"}, {"eos_token", "[SEP]"}, {"unk_token", "<unk>"}, {"sep_token", "[SEP]"},
            {"pad_token", "<pad>"}, {"cls_token", "[CLS]"}, {"mask_token", "[MASK]", true}};
}
std::vector<SpecialTokenDefault> xlnet_special_tokens() {
    // additional_special_tokens defaults to <eop>, <eod> (roles of their own here: the config's list replaces them).
    return {{"bos_token", "<s>"},     {"eos_token", "</s>"},     {"unk_token", "<unk>"},
            {"sep_token", "<sep>"},   {"pad_token", "<pad>"},    {"cls_token", "<cls>"},
            {"mask_token", "<mask>", true}, {"additional_special_tokens", "<eop>"}, {"additional_special_tokens", "<eod>"}};
}
std::vector<SpecialTokenDefault> llama_special_tokens() {
    return {{"unk_token", "<unk>"}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
}

const std::string& ConfiguredSpecialTokens::content(const std::string& role, const std::string& path) const {
    const auto found = roles.find(role);
    if (found == roles.end()) throw Error("tokenizer_config.json sets no " + role + " (null), and the framing needs it", path);
    return found->second;
}

ConfiguredSpecialTokens configured_special_tokens(const std::vector<SpecialTokenDefault>& defaults,
                                                  const nlohmann::json& config, const std::string& path) {
    ConfiguredSpecialTokens out;
    // all_special_tokens: the roles' strings and the additional special tokens (not a special token named only by
    // added_tokens_decoder); with the normalized non-special tokens, the strings the slow tokenizers do not lower-case.
    std::vector<std::string> named;
    const bool has_config = config.is_object();
    const bool additional_given = has_config && config.contains("additional_special_tokens") &&
                                  !config["additional_special_tokens"].is_null();
    for (const auto& entry : defaults) {
        const std::string role = entry.role;
        AddedToken token{entry.content, -1, entry.lstrip, false};
        token.special = true;
        if (role == "additional_special_tokens") {
            if (!additional_given) {
                keep_last(out.tokens, token);
                named.push_back(token.content);
            }
            continue;
        }
        if (has_config && config.contains(role)) {
            if (config[role].is_null()) continue;  // the class has none
            token = config_token(config[role], token, true, "tokenizer_config.json " + role, path);
        }
        out.roles[role] = token.content;
        named.push_back(token.content);
        keep_last(out.tokens, token);
    }
    if (additional_given) {
        const auto& list = config["additional_special_tokens"];
        if (!list.is_array()) throw Error("additional_special_tokens must be a list", path);
        for (const auto& item : list) {
            keep_last(out.tokens, config_token(item, {}, true, "tokenizer_config.json additional_special_tokens", path));
            named.push_back(out.tokens.back().content);
        }
    }
    if (has_config && config.contains("added_tokens_decoder") && !config["added_tokens_decoder"].is_null()) {
        const auto& decoder = config["added_tokens_decoder"];
        if (!decoder.is_object()) throw Error("added_tokens_decoder must be an object of \"id\": token", path);
        for (const auto& [key, value] : decoder.items()) {
            const std::string where = "tokenizer_config.json added_tokens_decoder \"" + printable(key, 20) + "\"";
            if (!value.is_object()) throw Error(where + " must be {\"content\": ...}", path);
            AddedToken token = config_token(value, {}, false, where, path);
            std::size_t used = 0;
            long long id = -1;
            try {
                id = std::stoll(key, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used != key.size() || key.empty() || id < 0 || id > kMaxTokenId)
                throw Error(where + ": the key must be a token id in [0, 2^24)", path);
            token.id = static_cast<int>(id);
            keep_last(out.tokens, token);
        }
    }
    for (auto& token : out.tokens)
        token.case_kept_by_slow_tokenizers =
            std::find(named.begin(), named.end(), token.content) != named.end() || (!token.special && token.normalized);
    return out;
}

std::string lower_case_except(const std::string& text, const std::vector<AddedToken>& tokens) {
    std::vector<const AddedToken*> kept;
    for (const auto& token : tokens)
        if (token.case_kept_by_slow_tokenizers && !token.content.empty()) kept.push_back(&token);
    std::stable_sort(kept.begin(), kept.end(),
                     [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
    std::string out, pending;  // pending: text to lower-case
    for (std::size_t at = 0; at < text.size();) {
        const AddedToken* match = nullptr;
        for (const AddedToken* token : kept)
            if (text.compare(at, token->content.size(), token->content) == 0) {
                match = token;
                break;
            }
        if (!match) {
            pending += text[at++];
            continue;
        }
        out += utf8::lower_only(pending) + match->content;
        pending.clear();
        at += match->content.size();
    }
    return out + utf8::lower_only(pending);
}

nlohmann::json with_legacy_token_files(const nlohmann::json& config, const std::string& folder, bool tokenizer_json_too) try {
    if (config.is_object() && config.contains("added_tokens_decoder") && !config["added_tokens_decoder"].is_null())
        return config;
    nlohmann::json merged = config.is_object() ? config : nlohmann::json::object();
    const std::filesystem::path directory = folder;
    const std::string map_path = (directory / "special_tokens_map.json").string();
    if (std::filesystem::exists(map_path)) {
        const nlohmann::json map = read_json_file(map_path, "special_tokens_map.json");
        if (!map.is_object()) throw Error("special_tokens_map.json must hold a JSON object", map_path);
        for (const auto& [key, value] : map.items()) {
            if (key == "additional_special_tokens" && value.is_array()) {
                nlohmann::json list = merged.contains(key) && merged[key].is_array() ? merged[key] : nlohmann::json::array();
                for (const auto& token : value)
                    if (std::find(list.begin(), list.end(), token) == list.end()) list.push_back(token);
                merged[key] = list;
                continue;
            }
            if (!(value.is_null() || value.is_string() || value.is_object() || value.is_array()))
                throw Error(key + " must be a string, {\"content\": ...} or null", map_path);
            merged[key] = value;
        }
    }
    nlohmann::json decoder = nlohmann::json::object();
    const std::string added_path = (directory / "added_tokens.json").string();
    if (std::filesystem::exists(added_path)) {
        const nlohmann::json added = read_json_file(added_path, "added_tokens.json");
        if (!added.is_object()) throw Error("added_tokens.json must hold an object of \"token\": id", added_path);
        std::vector<std::string> specials;  // the contents the roles and the additional special tokens name
        for (const char* role : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
            if (merged.contains(role)) specials.push_back(token_content(merged[role]));
        if (merged.contains("additional_special_tokens") && merged["additional_special_tokens"].is_array())
            for (const auto& token : merged["additional_special_tokens"]) specials.push_back(token_content(token));
        for (const auto& [content, id] : added.items()) {
            const std::int64_t index = json_integer(id, 0, kMaxTokenId, "the id of \"" + printable(content, 40) + "\"", added_path);
            const bool special = std::find(specials.begin(), specials.end(), content) != specials.end();
            decoder[std::to_string(index)] = {{"content", content}, {"special", special}, {"normalized", !special}};
        }
    }
    const std::string tokenizer_json_path = (directory / "tokenizer.json").string();
    if (tokenizer_json_too && std::filesystem::exists(tokenizer_json_path)) {
        const nlohmann::json tokenizer_json = read_json_file(tokenizer_json_path, "tokenizer.json");
        if (tokenizer_json.is_object() && tokenizer_json.contains("added_tokens")) {
            // Checked as the json's own reader checks them; an entry is an added_tokens_decoder token as it stands
            // (its flags, "special" among them).
            const auto& added = tokenizer_json["added_tokens"];
            const auto tokens = read_tokenizer_json_added_tokens(added, kMaxTokenId + 1, tokenizer_json_path);
            for (std::size_t k = 0; k < tokens.size(); ++k) {
                nlohmann::json entry = added[k];
                entry.erase("id");
                decoder[std::to_string(tokens[k].id)] = entry;
            }
        }
    }
    if (!decoder.empty()) merged["added_tokens_decoder"] = decoder;
    return merged;
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, folder);
}

std::vector<AddedToken> resolve_ids(const std::vector<AddedToken>& tokens,
                                    const std::function<int(const std::string&)>& id_of,
                                    std::vector<std::string>* unmatched) {
    std::vector<AddedToken> out;
    for (AddedToken token : tokens) {
        if (token.id < 0) token.id = id_of(token.content);
        if (token.id >= 0) out.push_back(token);
        else if (unmatched) unmatched->push_back(token.content);
    }
    return out;
}

std::string token_content(const nlohmann::json& token) {
    if (token.is_string()) return token.get<std::string>();
    if (token.is_object() && token.contains("content") && token["content"].is_string())
        return token["content"].get<std::string>();
    return "";
}

}  // namespace rankscope::detail
