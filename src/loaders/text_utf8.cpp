#include "text_utf8.hpp"

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

bool is_whitespace(std::uint32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0xa0 || c == 0x3000 || (c >= 0x2000 && c <= 0x200a);
}
bool is_control(std::uint32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    return c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == 0xfffd || c == 0;
}
bool is_punctuation(std::uint32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
    if (c == 0xa1 || c == 0xa7 || c == 0xab || c == 0xb6 || c == 0xb7 || c == 0xbb || c == 0xbf) return true;
    return (c >= 0x2010 && c <= 0x2027) || (c >= 0x2030 && c <= 0x205e) || (c >= 0x3001 && c <= 0x3003) ||
           (c >= 0x3008 && c <= 0x3011);
}
bool is_cjk(std::uint32_t c) {
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x20000 && c <= 0x2a6df) ||
           (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

// Lower-case and strip the accent of Latin-1 Supplement / Latin Extended-A letters: the table holds, for U+00C0..U+017F,
// unicodedata NFD of the lower-case letter with its combining marks (category Mn) removed (generated with Python's
// unicodedata). Combining marks themselves are dropped (0).
std::uint32_t lower_without_accent(std::uint32_t c) {
    static const std::uint16_t latin[] = {0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0xe6, 0x63, 0x65, 0x65, 0x65, 0x65, 0x69, 0x69, 0x69, 0x69, 0xf0, 0x6e, 0x6f, 0x6f, 0x6f, 0x6f, 0x6f, 0xd7, 0xf8, 0x75, 0x75, 0x75, 0x75, 0x79, 0xfe, 0xdf, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0xe6, 0x63, 0x65, 0x65, 0x65, 0x65, 0x69, 0x69, 0x69, 0x69, 0xf0, 0x6e, 0x6f, 0x6f, 0x6f, 0x6f, 0x6f, 0xf7, 0xf8, 0x75, 0x75, 0x75, 0x75, 0x79, 0xfe, 0x79, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x63, 0x63, 0x63, 0x63, 0x63, 0x63, 0x63, 0x63, 0x64, 0x64, 0x111, 0x111, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x67, 0x67, 0x67, 0x67, 0x67, 0x67, 0x67, 0x67, 0x68, 0x68, 0x127, 0x127, 0x69, 0x69, 0x69, 0x69, 0x69, 0x69, 0x69, 0x69, 0x49, 0x131, 0x133, 0x133, 0x6a, 0x6a, 0x6b, 0x6b, 0x138, 0x6c, 0x6c, 0x6c, 0x6c, 0x6c, 0x6c, 0x140, 0x140, 0x142, 0x142, 0x6e, 0x6e, 0x6e, 0x6e, 0x6e, 0x6e, 0x149, 0x14b, 0x14b, 0x6f, 0x6f, 0x6f, 0x6f, 0x6f, 0x6f, 0x153, 0x153, 0x72, 0x72, 0x72, 0x72, 0x72, 0x72, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x73, 0x74, 0x74, 0x74, 0x74, 0x167, 0x167, 0x75, 0x75, 0x75, 0x75, 0x75, 0x75, 0x75, 0x75, 0x75, 0x75, 0x75, 0x75, 0x77, 0x77, 0x79, 0x79, 0x79, 0x7a, 0x7a, 0x7a, 0x7a, 0x7a, 0x7a, 0x17f};
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c >= 0x300 && c <= 0x36f) return 0;
    if (c >= 0xc0 && c <= 0x17f) return latin[c - 0xc0];
    if (c >= 0x391 && c <= 0x3a9) return c + 32;  // Greek capitals
    if (c >= 0x410 && c <= 0x42f) return c + 32;  // Cyrillic capitals
    return c;
}

}  // namespace

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

std::vector<std::string> basic_split(const std::string& text, bool lower_case) {
    std::vector<std::string> words;
    std::string current;
    auto flush = [&] {
        if (!current.empty()) words.push_back(current);
        current.clear();
    };
    for (std::size_t i = 0; i < text.size();) {
        const Decoded d = decode(text, i);
        i += d.size;
        std::uint32_t c = d.code;
        if (is_control(c)) continue;
        if (is_whitespace(c)) {
            flush();
            continue;
        }
        if (lower_case) {
            c = lower_without_accent(c);
            if (c == 0) continue;
        }
        if (is_punctuation(c) || is_cjk(c)) {
            flush();
            words.push_back(encode(c));
            continue;
        }
        current += encode(c);
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
    for (std::size_t i = 0; i < text.size();) {
        const Decoded d = decode(text, i);
        i += d.size;
        const std::uint32_t c = lower_without_accent(d.code);
        if (c != 0) out += encode(c);
    }
    return out;
}

}  // namespace rankscope::utf8
