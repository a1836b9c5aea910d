// A PDF's document information by an incremental update: pdf_information.hpp.
#include "report/pdf_information.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <regex>
#include <sstream>
#include <vector>

namespace rankscope {

std::string pdf_text_string(const std::string& utf8) {
    std::string hex = "<FEFF";
    auto unit = [&hex](unsigned value) { hex += fmt::format("{:04X}", value); };
    for (std::size_t i = 0; i < utf8.size();) {
        const auto lead = static_cast<unsigned char>(utf8[i]);
        const std::size_t length = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
        unsigned code = length == 1 ? lead : length == 2 ? lead & 0x1F : length == 3 ? lead & 0x0F : lead & 0x07;
        bool valid = length > 0 && i + length <= utf8.size();
        for (std::size_t k = 1; valid && k < length; ++k) {
            const auto next = static_cast<unsigned char>(utf8[i + k]);
            valid = (next >> 6) == 2;
            code = (code << 6) | (next & 0x3F);
        }
        if (!valid) {
            unit(0xFFFD);
            ++i;
            continue;
        }
        i += length;
        if (code >= 0x10000) unit(0xD800 + ((code - 0x10000) >> 10)), unit(0xDC00 + ((code - 0x10000) & 0x3FF));
        else unit(code);
    }
    return hex + ">";
}

namespace {

constexpr std::size_t kNone = std::string::npos;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\0'; }
bool is_delimiter(char c) { return std::string_view("()<>[]{}/%").find(c) != std::string_view::npos; }

// The end (one past) of the PDF token that starts at `at` (PDF 32000-1 §7.2–7.3): a literal string with nested
// parentheses and backslash escapes, a hex string, a dictionary or an array with everything inside, a name, or a
// run of regular characters (a number, a keyword such as R). kNone when it does not end inside `text`.
std::size_t token_end(const std::string& text, std::size_t at, int depth = 0) {
    if (at >= text.size() || depth > 64) return kNone;  // deeper nesting than any document information has
    const char c = text[at];
    if (c == '(') {
        int depth = 0;
        for (std::size_t i = at; i < text.size(); ++i) {
            if (text[i] == '\\') ++i;
            else if (text[i] == '(') ++depth;
            else if (text[i] == ')' && --depth == 0) return i + 1;
        }
        return kNone;
    }
    if (text.compare(at, 2, "<<") == 0 || c == '[') {
        const std::string close = c == '[' ? "]" : ">>";
        for (std::size_t i = at + (c == '[' ? 1 : 2); i < text.size();) {
            if (is_space(text[i])) {
                ++i;
            } else if (text.compare(i, close.size(), close) == 0) {
                return i + close.size();
            } else {
                const std::size_t end = token_end(text, i, depth + 1);
                if (end == kNone || end == i) return kNone;
                i = end;
            }
        }
        return kNone;
    }
    if (c == '<') {
        const std::size_t close = text.find('>', at);
        return close == kNone ? kNone : close + 1;
    }
    std::size_t i = at + 1;  // a name's '/', or the first regular character
    while (i < text.size() && !is_space(text[i]) && !is_delimiter(text[i])) ++i;
    return i;
}

// A dictionary's entries ("/Key value ..." between << and >>) without the keys in `dropped`; a value is one token,
// or an indirect reference "N G R".
std::string entries_without(const std::string& entries, const std::vector<std::string>& dropped) {
    std::vector<std::pair<std::size_t, std::size_t>> tokens;
    for (std::size_t i = 0; i < entries.size();) {
        if (is_space(entries[i])) {
            ++i;
            continue;
        }
        const std::size_t end = token_end(entries, i);
        if (end == kNone || end == i) return entries;  // not a dictionary we can read: keep it as it was
        tokens.emplace_back(i, end);
        i = end;
    }
    auto text = [&](std::size_t k) { return entries.substr(tokens[k].first, tokens[k].second - tokens[k].first); };
    auto is_integer = [&](std::size_t k) {
        const std::string t = text(k);
        return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    std::string kept;
    for (std::size_t k = 0; k + 1 < tokens.size();) {
        const std::size_t values = k + 3 < tokens.size() && is_integer(k + 1) && is_integer(k + 2) && text(k + 3) == "R" ? 3 : 1;
        if (std::find(dropped.begin(), dropped.end(), text(k)) == dropped.end())
            kept.append(" ").append(entries, tokens[k].first, tokens[k + values].second - tokens[k].first);
        k += 1 + values;
    }
    return kept;
}

// The text between << and >> of the dictionary that starts at `open` ("" when it does not end).
std::string dictionary_entries(const std::string& text, std::size_t open) {
    const std::size_t end = token_end(text, open);
    if (end == kNone || text.compare(open, 2, "<<") != 0) return "";
    return text.substr(open + 2, end - open - 4);
}

// The last cross-reference section, where the file's last startxref points: a classic table ("xref" ... "trailer
// << >>") or a cross-reference stream ("N G obj << /Type /XRef ... >> stream").
struct LastSection {
    std::size_t offset = 0;
    bool is_stream = false;
    std::string trailer;  // the trailer dictionary's entries
};

std::optional<LastSection> last_section(const std::string& pdf) {
    const std::size_t startxref = pdf.rfind("startxref");
    if (startxref == kNone) return std::nullopt;
    std::smatch number;
    const std::string tail = pdf.substr(startxref, 64);
    if (!std::regex_search(tail, number, std::regex(R"(^startxref\s+(\d{1,15}))"))) return std::nullopt;
    LastSection section;
    section.offset = std::stoull(number[1].str());
    if (section.offset >= startxref) return std::nullopt;
    if (pdf.compare(section.offset, 4, "xref") == 0) {
        const std::size_t trailer = pdf.find("trailer", section.offset);
        const std::size_t open = trailer == kNone ? kNone : pdf.find("<<", trailer);
        if (open == kNone || open > startxref) return std::nullopt;
        section.trailer = dictionary_entries(pdf, open);
    } else {
        const std::string head = pdf.substr(section.offset, 64);
        std::smatch object;
        if (!std::regex_search(head, object, std::regex(R"(^\d+\s+\d+\s+obj\s*<<)"))) return std::nullopt;
        section.is_stream = true;
        section.trailer = dictionary_entries(pdf, section.offset + object.length(0) - 2);
        if (!std::regex_search(section.trailer, std::regex(R"(/Type\s*/XRef\b)"))) return std::nullopt;
    }
    if (section.trailer.empty()) return std::nullopt;
    return section;
}

// A Flate stream's data from `start` (zlib format), at most `limit` bytes out; nullopt when it does not inflate.
std::optional<std::string> inflated(const std::string& pdf, std::size_t start, std::size_t limit) {
    z_stream stream{};
    if (inflateInit(&stream) != Z_OK) return std::nullopt;
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(pdf.data() + start));
    stream.avail_in = static_cast<uInt>(std::min<std::size_t>(pdf.size() - start, 1u << 30));
    std::string out;
    char buffer[16384];
    int status = Z_OK;
    while (status == Z_OK && out.size() <= limit) {
        stream.next_out = reinterpret_cast<Bytef*>(buffer);
        stream.avail_out = sizeof buffer;
        status = inflate(&stream, Z_NO_FLUSH);
        out.append(buffer, sizeof buffer - stream.avail_out);
    }
    inflateEnd(&stream);
    if (status != Z_STREAM_END) return std::nullopt;
    return out;
}

// The entries of object `number`'s dictionary: its last plain definition ("N G obj << ... >>"), else (generation 0)
// its place in a Flate-compressed object stream (§7.5.7: N pairs "object offset", then the objects from /First).
std::string object_entries(const std::string& pdf, unsigned long number, unsigned long generation) {
    const std::string plain = fmt::format("{} {} obj", number, generation);
    for (std::size_t at = pdf.rfind(plain); at != kNone; at = at == 0 ? kNone : pdf.rfind(plain, at - 1)) {
        if (at > 0 && !is_space(pdf[at - 1])) continue;  // "112 0 obj" is not "12 0 obj"
        std::size_t open = at + plain.size();
        while (open < pdf.size() && is_space(pdf[open])) ++open;
        return pdf.compare(open, 2, "<<") == 0 ? dictionary_entries(pdf, open) : "";  // not a dictionary: nothing kept
    }
    if (generation != 0) return "";
    for (std::size_t at = pdf.find("/ObjStm"); at != kNone; at = pdf.find("/ObjStm", at + 1)) {
        const std::size_t object = pdf.rfind(" obj", at);
        const std::size_t open = object == kNone ? kNone : pdf.find("<<", object);
        if (open == kNone || open > at) continue;
        const std::size_t end = token_end(pdf, open);
        if (end == kNone) continue;
        const std::string dictionary = pdf.substr(open, end - open);
        std::smatch n, first;
        if (!std::regex_search(dictionary, n, std::regex(R"(/N\s+(\d{1,9}))")) ||
            !std::regex_search(dictionary, first, std::regex(R"(/First\s+(\d{1,12}))")) ||
            !std::regex_search(dictionary, std::regex(R"(/Filter\s*/FlateDecode)")) || dictionary.find("/DecodeParms") != kNone)
            continue;
        std::size_t data = pdf.find("stream", end);
        if (data == kNone) continue;
        data += 6;
        if (pdf.compare(data, 2, "\r\n") == 0) data += 2;
        else if (data < pdf.size() && pdf[data] == '\n') data += 1;
        const auto objects = inflated(pdf, data, std::size_t(64) << 20);
        if (!objects) continue;
        std::istringstream header(objects->substr(0, std::stoull(first[1].str())));
        std::vector<std::pair<unsigned long, std::size_t>> places;  // (object number, offset after /First)
        unsigned long object_number = 0;
        std::size_t offset = 0;
        for (unsigned long k = 0; k < std::stoul(n[1].str()) && header >> object_number >> offset; ++k)
            places.emplace_back(object_number, offset);
        for (std::size_t k = 0; k < places.size(); ++k) {
            if (places[k].first != number) continue;
            const std::size_t begin = std::stoull(first[1].str()) + places[k].second;
            const std::size_t open_here = objects->find("<<", begin);
            if (open_here == kNone) return "";
            return dictionary_entries(*objects, open_here);
        }
    }
    return "";
}

}  // namespace

std::string big_endian(std::uint64_t value, int bytes) {
    std::string out;
    for (int k = bytes - 1; k >= 0; --k) out += static_cast<char>((value >> (8 * k)) & 0xFF);
    return out;
}

std::string pdf_with_document_information(std::string pdf, const std::string& creator, const std::string& subject) {
    const auto section = last_section(pdf);
    if (!section) return pdf;
    std::smatch size, root, info, id;
    if (!std::regex_search(section->trailer, size, std::regex(R"(/Size\s+(\d{1,9}))")) ||
        !std::regex_search(section->trailer, root, std::regex(R"(/Root\s+(\d+\s+\d+\s+R))")))
        return pdf;
    unsigned long object = std::stoul(size[1].str()), generation = 0;
    std::string entries;
    if (std::regex_search(section->trailer, info, std::regex(R"(/Info\s+(\d{1,9})\s+(\d{1,5})\s+R)"))) {
        object = std::stoul(info[1].str()), generation = std::stoul(info[2].str());
        entries = entries_without(object_entries(pdf, object, generation), {"/Creator", "/Subject"});
    }
    // The file's identifier goes on into every later trailer (§14.4).
    const std::string identifier = std::regex_search(section->trailer, id, std::regex(R"(/ID\s*\[[^\]]*\])"))
                                       ? " " + id[0].str()
                                       : std::string();
    if (pdf.back() != '\n') pdf += '\n';
    const std::size_t offset = pdf.size();
    pdf += fmt::format("{} {} obj\n<<{} /Creator {} /Subject {} >>\nendobj\n", object, generation, entries,
                       pdf_text_string(creator), pdf_text_string(subject));
    const unsigned long old_size = std::stoul(size[1].str());
    const std::size_t xref = pdf.size();
    if (!section->is_stream) {
        pdf += fmt::format("xref\n{} 1\n{:010d} {:05d} n \ntrailer\n<< /Size {} /Root {} /Info {} {} R{} /Prev {} >>\n"
                           "startxref\n{}\n%%EOF\n",
                           object, offset, generation, std::max(old_size, object + 1), root[1].str(), object, generation,
                           identifier, section->offset, xref);
        return pdf;
    }
    // A cross-reference stream for the Info object and itself (§7.5.8): uncompressed rows of type 1 (in use), the
    // offset (4 bytes, 8 past 4 GiB) and a 2-byte generation.
    const unsigned long self = std::max(old_size, object + 1);
    const int offset_bytes = xref >> 32 ? 8 : 4;
    std::string rows;
    for (const auto& [at, row_generation] : {std::pair{offset, generation}, std::pair{xref, 0ul}})
        rows.append(1, '\x01').append(big_endian(at, offset_bytes)).append(big_endian(row_generation, 2));
    pdf += fmt::format("{} 0 obj\n<< /Type /XRef /Size {} /Root {} /Info {} {} R{} /Prev {} /Index [{} 1 {} 1] "
                       "/W [1 {} 2] /Length {} >>\nstream\n",
                       self, self + 1, root[1].str(), object, generation, identifier, section->offset, object, self,
                       offset_bytes, rows.size());
    pdf += rows + "\nendstream\nendobj\nstartxref\n" + std::to_string(xref) + "\n%%EOF\n";
    return pdf;
}

}  // namespace rankscope
