#include "text_utf8.hpp"

#include <utf8proc.h>

#include <cstdint>

namespace rankscope::utf8 {
namespace {

struct Decoded {
    std::uint32_t code;
    std::size_t size;
};

Decoded decode(const std::string& s, std::size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    auto continuation = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) & 0x3f : 0; };
    if (c < 0x80) return {c, 1};
    if ((c >> 5) == 0x6 && i + 1 < s.size()) return {((c & 0x1fu) << 6) | continuation(1), 2};
    if ((c >> 4) == 0xe && i + 2 < s.size()) return {((c & 0x0fu) << 12) | (continuation(1) << 6) | continuation(2), 3};
    if ((c >> 3) == 0x1e && i + 3 < s.size())
        return {((c & 0x07u) << 18) | (continuation(1) << 12) | (continuation(2) << 6) | continuation(3), 4};
    return {0xfffd, 1};
}

std::string encode(std::uint32_t code) {
    std::string out;
    if (code < 0x80) out += static_cast<char>(code);
    else if (code < 0x800) {
        out += static_cast<char>(0xc0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xe0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (code & 0x3f));
    }
    return out;
}

// BERT's BasicTokenizer (transformers' tokenization_bert.py) and the `tokenizers` BertNormalizer + BertPreTokenizer,
// character classes by Unicode general category (utf8proc's tables):
//   whitespace  space, \t, \n, \r, category Zs, and the other characters Python's str.split() splits at (\v, \f,
//               U+001C–U+001F, U+0085: controls, removed before in BERT's cleaning; U+2028, U+2029: the line and
//               paragraph separators, where BertTokenizer's whitespace_tokenize and the `tokenizers`
//               BertPreTokenizer split too)
//   control     category Cc, Cf (zero-width space, soft hyphen, ...) or Co (private use), except \t, \n, \r: removed
//               with NUL and U+FFFD. Unassigned code points (Cn) are kept, as the `tokenizers` BertNormalizer keeps them
//               (transformers' slow BertTokenizer removes them: its own two forms disagree there)
//   punctuation ASCII 33–47, 58–64, 91–96, 123–126, or any category P*
//   CJK         the CJK Unified Ideograph blocks BERT lists (each character becomes its own word)
bool is_whitespace(std::uint32_t c) {
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0x2028 || c == 0x2029)
        return true;
    return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ZS;
}
bool is_control(std::uint32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    if (c == 0 || c == 0xfffd) return true;
    const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    return category == UTF8PROC_CATEGORY_CC || category == UTF8PROC_CATEGORY_CF || category == UTF8PROC_CATEGORY_CO;
}
bool is_punctuation(std::uint32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
        case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
        case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO: return true;
        default: return false;
    }
}
bool is_cjk(std::uint32_t c) {
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x20000 && c <= 0x2a6df) ||
           (c >= 0x2a700 && c <= 0x2b73f) || (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b820 && c <= 0x2ceaf) ||
           (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

// Appends the canonical decomposition (NFD) of c without its nonspacing marks (category Mn): BERT's
// _run_strip_accents, one character at a time (NFD of a string is the concatenation of its characters' NFDs, then
// canonical ordering, which only reorders the marks this removes).
void append_without_accents(std::uint32_t c, std::string& out) {
    utf8proc_int32_t decomposed[32];
    int last_boundclass = 0;
    const utf8proc_ssize_t count = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), decomposed, 32,
                                                           UTF8PROC_DECOMPOSE, &last_boundclass);
    if (count < 0 || count > 32) {
        out += encode(c);
        return;
    }
    for (utf8proc_ssize_t k = 0; k < count; ++k)
        if (utf8proc_category(decomposed[k]) != UTF8PROC_CATEGORY_MN) out += encode(static_cast<std::uint32_t>(decomposed[k]));
}

// Lower case, one character at a time (Unicode simple case mapping). transformers' BertTokenizer (slow and fast)
// gives σ, not ς, for a word-final Σ (checked in tests/transformers/): no Final_Sigma rule here either. The one
// unconditional full mapping that differs from the simple one is kept, as Python's str.lower and Rust's
// char::to_lowercase have it: İ (U+0130) → i + combining dot above (U+0307); with accents stripped it is "i" either
// way, with accents kept (strip_accents false, keep_accents) "i̇stanbul" is not "istanbul".
std::vector<std::uint32_t> lower_word(const std::vector<std::uint32_t>& word) {
    std::vector<std::uint32_t> out;
    out.reserve(word.size());
    for (const std::uint32_t c : word) {
        if (c == 0x130) {
            out.push_back(0x69);
            out.push_back(0x307);
            continue;
        }
        out.push_back(static_cast<std::uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
    return out;
}

std::vector<std::uint32_t> code_points(const std::string& text) {
    std::vector<std::uint32_t> codes;
    for (std::size_t i = 0; i < text.size();) {
        const Decoded d = decode(text, i);
        i += d.size;
        codes.push_back(d.code);
    }
    return codes;
}

}  // namespace

std::size_t first_invalid(const std::string& text) {
    const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    for (std::size_t i = 0; i < text.size();) {
        utf8proc_int32_t code_point = 0;
        const utf8proc_ssize_t size = utf8proc_iterate(bytes + i, static_cast<utf8proc_ssize_t>(text.size() - i), &code_point);
        if (size <= 0 || code_point < 0) return i;
        i += static_cast<std::size_t>(size);
    }
    return std::string::npos;
}

std::vector<std::string> characters(const std::string& text) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < text.size();) {
        const Decoded d = decode(text, i);
        out.push_back(text.substr(i, d.size));
        i += d.size;
    }
    return out;
}

// Counts without building the characters: a 50 MB word costs nothing here (WordPiece asks the length of every word).
std::size_t length(const std::string& text) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < text.size(); i += decode(text, i).size) ++count;
    return count;
}

std::string basic_normalize(const std::string& text, const BasicOptions& options) {
    std::vector<std::uint32_t> kept;
    for (std::size_t i = 0; i < text.size();) {
        const Decoded d = decode(text, i);
        i += d.size;
        if (is_control(d.code)) continue;
        if (is_whitespace(d.code)) {
            kept.push_back(' ');
        } else if (options.split_chinese && is_cjk(d.code)) {
            kept.insert(kept.end(), {' ', d.code, ' '});
        } else {
            kept.push_back(d.code);
        }
    }
    if (options.lower_case) kept = lower_word(kept);
    std::string out;
    for (std::uint32_t c : kept) {
        if (options.strip_accents) append_without_accents(c, out);
        else out += encode(c);
    }
    return out;
}

std::vector<std::string> basic_split(const std::string& text, const BasicOptions& options) {
    // The normalized text (cleaned, whitespace a space, CJK spaced, lower case and accents as asked), split at its spaces
    // and around each punctuation character. Neither lower case nor accent stripping makes a space or punctuation
    // that the character did not have: splitting after normalizing is splitting each word.
    const std::string normalized = basic_normalize(text, options);
    std::vector<std::string> words;
    std::string word;
    const auto flush = [&] {
        if (!word.empty()) words.push_back(word);
        word.clear();
    };
    for (std::size_t i = 0; i < normalized.size();) {
        const Decoded d = decode(normalized, i);
        if (d.code == ' ') {
            flush();
        } else if (is_punctuation(d.code)) {
            flush();
            words.push_back(normalized.substr(i, d.size));
        } else {
            word += normalized.substr(i, d.size);
        }
        i += d.size;
    }
    flush();
    return words;
}

std::vector<std::string> basic_split_whitespace(const std::string& text) {
    std::vector<std::string> words;
    std::string current;
    for (std::size_t i = 0; i < text.size();) {
        const Decoded d = decode(text, i);
        if (is_whitespace(d.code)) {
            if (!current.empty()) words.push_back(current);
            current.clear();
        } else {
            current += text.substr(i, d.size);
        }
        i += d.size;
    }
    if (!current.empty()) words.push_back(current);
    return words;
}

std::string lower(const std::string& text) {
    std::string out;
    for (std::uint32_t c : lower_word(code_points(text))) append_without_accents(c, out);
    return out;
}

std::string lower_only(const std::string& text) {
    std::string out;
    for (std::uint32_t c : lower_word(code_points(text))) out += encode(c);
    return out;
}

std::string strip_combining_compatibility(const std::string& text) {
    std::string out;
    for (std::uint32_t c : code_points(text)) {
        utf8proc_int32_t decomposed[32];
        int last_boundclass = 0;
        const utf8proc_ssize_t count = utf8proc_decompose_char(
            static_cast<utf8proc_int32_t>(c), decomposed, 32,
            static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT), &last_boundclass);
        if (count < 0 || count > 32) {
            out += encode(c);
            continue;
        }
        for (utf8proc_ssize_t k = 0; k < count; ++k)
            if (utf8proc_get_property(decomposed[k])->combining_class == 0) out += encode(static_cast<std::uint32_t>(decomposed[k]));
    }
    return out;
}

}  // namespace rankscope::utf8
