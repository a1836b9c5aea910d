// .npy reader and writer, written against the NumPy format specification (numpy/lib/format.py docs):
//   magic "\x93NUMPY", major, minor, header length (uint16 for v1, uint32 for v2/v3), then an ASCII/UTF-8 Python dict
//   literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with spaces and ending in '\n',
//   then the raw data.
#include <cstring>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

DType dtype_from_descr(const std::string& descr, const std::string& path) {
    // Byte order: '<' little, '|' not applicable, '=' native (little on every machine we run on). '>' is rejected.
    if (descr.size() < 3) throw Error("unsupported .npy dtype '" + printable(descr, 30) + "'", path);
    const char order = descr[0];
    const std::string kind = descr.substr(1);
    const bool one_byte = kind == "i1" || kind == "u1" || kind == "b1";
    if (order == '>' && !one_byte) throw Error("big-endian .npy dtype '" + printable(descr, 30) + "' is not supported", path);
    if (order != '<' && order != '|' && order != '=' && order != '>')
        throw Error("unsupported .npy dtype '" + printable(descr, 30) + "'", path);
    if (kind == "f2") return DType::F16;
    if (kind == "f4") return DType::F32;
    if (kind == "f8") return DType::F64;
    if (kind == "i1") return DType::I8;
    if (kind == "i2") return DType::I16;
    if (kind == "i4") return DType::I32;
    if (kind == "i8") return DType::I64;
    if (kind == "u1") return DType::U8;
    if (kind == "b1") return DType::Bool;
    throw Error("unsupported .npy dtype '" + printable(descr, 30) + "' (expected a real numeric type such as <f4, <f8, <i8)", path);
}

std::string descr_of(DType dtype) {
    switch (dtype) {
        case DType::F16: return "<f2";
        case DType::F32: return "<f4";
        case DType::F64: return "<f8";
        case DType::I8: return "|i1";
        case DType::I16: return "<i2";
        case DType::I32: return "<i4";
        case DType::I64: return "<i8";
        case DType::U8: return "|u1";
        case DType::Bool: return "|b1";
        case DType::BF16: break;
    }
    throw Error("bfloat16 cannot be stored in .npy");
}

// Reverses the axis order of a Fortran-ordered array's bytes into C order.
std::vector<std::byte> fortran_to_c(const std::vector<std::byte>& bytes, const std::vector<std::int64_t>& shape,
                                    std::size_t item) {
    const std::size_t rank = shape.size();
    std::vector<std::byte> out(bytes.size());
    const std::int64_t numel = shape_numel(shape, "fortran_to_c");
    std::vector<std::int64_t> index(rank, 0);
    for (std::int64_t c = 0; c < numel; ++c) {
        // c enumerates C order; compute its Fortran offset.
        std::int64_t fortran = 0, stride = 1;
        for (std::size_t a = 0; a < rank; ++a) {
            fortran += index[a] * stride;
            stride *= shape[a];
        }
        std::memcpy(&out[static_cast<std::size_t>(c) * item], &bytes[static_cast<std::size_t>(fortran) * item], item);
        for (std::size_t a = rank; a-- > 0;) {
            if (++index[a] < shape[a]) break;
            index[a] = 0;
        }
    }
    return out;
}

// The header dict, parsed by a strict grammar of numpy's own writer output and the Python literals ast.literal_eval
// accepts for these keys (numpy reads the header with ast.literal_eval and then checks exactly these keys):
//   header  := ws '{' ws entry (ws ',' ws entry)* [ws ','] ws '}' ws          ws := [ \t\n\r]*
//   entry   := key ws ':' ws value        key := 'descr' | 'fortran_order' | 'shape' (single or double quotes)
//   descr   := a quoted string without backslashes      fortran_order := True | False
//   shape   := '(' ws ')' | '(' ws int ws ',' ws ')' | '(' ws int (ws ',' ws int)+ [ws ','] ws ')'
//   int     := ['+'] ('0' | [1-9][0-9]*)     (Python 3 has no leading zeros; a '-' is a negative extent: rejected)
// Each key exactly once; anything else (expressions such as "4- 16", other keys, a structured descr) is an error.
// Iterative, no regex, no recursion.
struct NpyHeader {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
};

class NpyHeaderParser {
public:
    NpyHeaderParser(const std::string& text, const std::string& path) : text_(text), path_(path) {}

    NpyHeader parse() {
        NpyHeader header;
        bool seen_descr = false, seen_fortran = false, seen_shape = false;
        skip_space();
        expect('{', "the header must be a dict literal starting with '{'");
        bool first = true;
        for (;;) {
            skip_space();
            if (peek() == '}') {
                if (first) fail("empty header dict");
                ++at_;
                break;
            }
            if (!first) {
                expect(',', "expected ',' or '}' between the header's entries");
                skip_space();
                if (peek() == '}') {
                    ++at_;
                    break;
                }
            }
            first = false;
            const std::string key = quoted_string("a quoted key");
            skip_space();
            expect(':', "expected ':' after '" + printable(key, 30) + "'");
            skip_space();
            if (key == "descr") {
                if (seen_descr) fail("'descr' appears twice");
                seen_descr = true;
                if (peek() != '\'' && peek() != '"') fail("'descr' must be a quoted type string such as '<f4'");
                header.descr = quoted_string("'descr'");
            } else if (key == "fortran_order") {
                if (seen_fortran) fail("'fortran_order' appears twice");
                seen_fortran = true;
                if (text_.compare(at_, 4, "True") == 0) {
                    header.fortran_order = true;
                    at_ += 4;
                } else if (text_.compare(at_, 5, "False") == 0) {
                    header.fortran_order = false;
                    at_ += 5;
                } else {
                    fail("'fortran_order' must be True or False");
                }
                if (identifier_char(peek())) fail("'fortran_order' must be True or False");
            } else if (key == "shape") {
                if (seen_shape) fail("'shape' appears twice");
                seen_shape = true;
                header.shape = shape();
            } else {
                fail("unexpected key '" + printable(key, 30) + "' (numpy headers hold exactly descr, fortran_order, shape)");
            }
        }
        skip_space();
        if (at_ != text_.size()) fail("unexpected text after the header dict");
        if (!seen_descr) fail("no 'descr'");
        if (!seen_fortran) fail("no 'fortran_order'");
        if (!seen_shape) fail("no 'shape'");
        return header;
    }

private:
    static bool identifier_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    }
    char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
    void skip_space() {
        while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
            ++at_;
    }
    [[noreturn]] void fail(const std::string& problem) const {
        throw Error("bad .npy header at byte " + std::to_string(at_) + ": " + problem, path_);
    }
    void expect(char c, const std::string& problem) {
        if (peek() != c) fail(problem);
        ++at_;
    }
    std::string quoted_string(const std::string& what) {
        const char quote = peek();
        if (quote != '\'' && quote != '"') fail("expected " + what);
        const std::size_t begin = ++at_;
        while (at_ < text_.size() && text_[at_] != quote) {
            if (text_[at_] == '\\' || text_[at_] == '\n') fail("unsupported character in " + what);
            ++at_;
        }
        if (at_ >= text_.size()) fail("unterminated string in " + what);
        return text_.substr(begin, at_++ - begin);
    }
    std::int64_t integer() {
        if (peek() == '+') ++at_;
        if (peek() == '-') fail("negative extent in 'shape'");
        if (peek() < '0' || peek() > '9') fail("'shape' must be a tuple of non-negative integers");
        const std::size_t begin = at_;
        std::int64_t value = 0;
        while (peek() >= '0' && peek() <= '9') {
            if (!checked_multiply(value, 10, value) || !checked_add(value, peek() - '0', value))
                fail("extent in 'shape' does not fit in 64 bits");
            ++at_;
        }
        if (at_ - begin > 1 && text_[begin] == '0') fail("leading zero in a 'shape' extent (not a Python literal)");
        if (identifier_char(peek()) || peek() == '.') fail("'shape' must be a tuple of non-negative integers");
        return value;
    }
    std::vector<std::int64_t> shape() {
        std::vector<std::int64_t> extents;
        expect('(', "'shape' must be a tuple such as (3, 4)");
        skip_space();
        if (peek() == ')') {
            ++at_;
            return extents;
        }
        for (;;) {
            if (extents.size() == kMaxDims) fail("more than " + std::to_string(kMaxDims) + " dimensions");
            extents.push_back(integer());
            skip_space();
            if (peek() == ')') {
                if (extents.size() == 1) fail("'shape' (n) is not a tuple; a 1-d shape is written (n,)");
                ++at_;
                return extents;
            }
            expect(',', "expected ',' or ')' in 'shape'");
            skip_space();
            if (peek() == ')') {
                ++at_;
                return extents;
            }
        }
    }

    static constexpr std::size_t kMaxDims = 32;  // numpy 1.x's NPY_MAXDIMS
    const std::string& text_;
    const std::string& path_;
    std::size_t at_ = 0;
};

NpyHeader parse_npy_header(const std::string& text, const std::string& path) {
    return NpyHeaderParser(text, path).parse();
}

}  // namespace

HostArray read_npy(const std::string& path) {
    const InputFile file(path, ".npy file");
    // Magic and version first (10 bytes), before anything else of the file is looked at.
    unsigned char prefix[12] = {};
    if (file.size() < 10) throw Error("not a .npy file (" + std::to_string(file.size()) + " bytes, no magic)", path);
    file.read_at(0, prefix, 10, "the .npy magic");
    if (std::memcmp(prefix, "\x93NUMPY", 6) != 0) throw Error("not a .npy file (bad magic)", path);
    const int major = prefix[6], minor = prefix[7];
    std::uint64_t header_length = 0, header_start = 0;
    if (major == 1) {
        header_length = prefix[8] | (prefix[9] << 8);
        header_start = 10;
    } else if (major == 2 || major == 3) {
        file.read_at(0, prefix, 12, "the .npy header length");
        for (int b = 3; b >= 0; --b) header_length = (header_length << 8) | prefix[8 + b];
        header_start = 12;
    } else {
        throw Error("unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor), path);
    }
    if (minor != 0) throw Error("unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor), path);
    if (header_length > kMaxNpyHeaderBytes)
        throw Error(".npy header of " + std::to_string(header_length) + " bytes is longer than numpy's limit of " +
                        std::to_string(kMaxNpyHeaderBytes),
                    path);
    if (header_start + header_length > file.size())
        throw Error("truncated .npy header: " + std::to_string(header_length) + " bytes promised, the file has " +
                        std::to_string(file.size() - header_start),
                    path);
    std::string header(static_cast<std::size_t>(header_length), '\0');
    file.read_at(header_start, header.data(), header_length, "the .npy header");

    const NpyHeader parsed = parse_npy_header(header, path);
    HostArray array;
    array.dtype = dtype_from_descr(parsed.descr, path);
    array.shape = parsed.shape;
    const std::int64_t expected = shape_nbytes(array.shape, array.dtype, path);
    const std::uint64_t data_start = header_start + header_length, available = file.size() - data_start;
    if (available < static_cast<std::uint64_t>(expected))
        throw Error("truncated .npy data: shape " + shape_text(array.shape) + " needs " + std::to_string(expected) +
                        " bytes, the file has " + std::to_string(available),
                    path);
    if (available > static_cast<std::uint64_t>(expected))
        throw Error(".npy file has " + std::to_string(available - static_cast<std::uint64_t>(expected)) +
                        " bytes after the data of shape " + shape_text(array.shape),
                    path);
    array.bytes.resize(static_cast<std::size_t>(expected));
    file.read_at(data_start, array.bytes.data(), static_cast<std::uint64_t>(expected), "the .npy data");
    if (parsed.fortran_order && array.shape.size() > 1 && expected > 0)
        array.bytes = fortran_to_c(array.bytes, array.shape, dtype_size(array.dtype));
    return array;
}

void write_npy(const std::string& path, const ArrayView& array) {
    std::string shape = "(";
    for (std::size_t i = 0; i < array.shape.size(); ++i) shape += std::to_string(array.shape[i]) + ", ";
    if (array.shape.size() > 1) shape.resize(shape.size() - 2);
    else if (array.shape.size() == 1) shape.resize(shape.size() - 1);
    shape += ")";
    std::string header = "{'descr': '" + descr_of(array.dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
    const std::size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    std::string out = "\x93NUMPY";
    out += static_cast<char>(1);
    out += static_cast<char>(0);
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>((header.size() >> 8) & 0xff);
    out += header;
    out.append(reinterpret_cast<const char*>(array.data), array.nbytes());
    write_file_atomically(path, out);
}

}  // namespace rankscope
