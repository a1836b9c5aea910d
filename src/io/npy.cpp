// .npy reader and writer, written against the NumPy format specification (numpy/lib/format.py docs):
//   magic "\x93NUMPY", major, minor, header length (uint16 for v1, uint32 for v2/v3), then an ASCII/UTF-8 Python dict
//   literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with spaces and ending in '\n',
//   then the raw data.
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

DType dtype_from_descr(const std::string& descr, const std::string& path) {
    // Byte order: '<' little, '|' not applicable, '=' native (little on every machine we run on). '>' is rejected.
    if (descr.size() < 3) throw Error("unsupported .npy dtype '" + descr + "'", path);
    const char order = descr[0];
    const std::string kind = descr.substr(1);
    if (order == '>') throw Error("big-endian .npy dtype '" + descr + "' is not supported", path);
    if (order != '<' && order != '|' && order != '=') throw Error("unsupported .npy dtype '" + descr + "'", path);
    if (kind == "f2") return DType::F16;
    if (kind == "f4") return DType::F32;
    if (kind == "f8") return DType::F64;
    if (kind == "i1") return DType::I8;
    if (kind == "i2") return DType::I16;
    if (kind == "i4") return DType::I32;
    if (kind == "i8") return DType::I64;
    if (kind == "u1") return DType::U8;
    if (kind == "b1") return DType::Bool;
    throw Error("unsupported .npy dtype '" + descr + "' (expected a real numeric type such as <f4, <f8, <i8)", path);
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
    std::int64_t numel = 1;
    for (auto e : shape) numel *= e;
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

}  // namespace

HostArray read_npy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open file", path);
    std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (contents.size() < 10 || contents.compare(0, 6, "\x93NUMPY") != 0)
        throw Error("not a .npy file (bad magic)", path);
    const int major = static_cast<unsigned char>(contents[6]);
    std::size_t header_length = 0, header_start = 0;
    if (major == 1) {
        header_length = static_cast<unsigned char>(contents[8]) | (static_cast<unsigned char>(contents[9]) << 8);
        header_start = 10;
    } else if (major == 2 || major == 3) {
        if (contents.size() < 12) throw Error("truncated .npy header", path);
        for (int b = 3; b >= 0; --b) header_length = (header_length << 8) | static_cast<unsigned char>(contents[8 + b]);
        header_start = 12;
    } else {
        throw Error("unsupported .npy version " + std::to_string(major), path);
    }
    if (contents.size() < header_start + header_length) throw Error("truncated .npy header", path);
    const std::string header = contents.substr(header_start, header_length);

    std::smatch match;
    static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
    static const std::regex fortran_re(R"('fortran_order'\s*:\s*(True|False))");
    static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
    if (!std::regex_search(header, match, descr_re)) throw Error("bad .npy header: no 'descr'", path);
    HostArray array;
    array.dtype = dtype_from_descr(match[1], path);
    if (!std::regex_search(header, match, fortran_re)) throw Error("bad .npy header: no 'fortran_order'", path);
    const bool fortran = match[1] == "True";
    if (!std::regex_search(header, match, shape_re)) throw Error("bad .npy header: no 'shape'", path);
    std::stringstream dims(match[1]);
    std::string dim;
    while (std::getline(dims, dim, ',')) {
        const auto first = dim.find_first_not_of(" \t");
        if (first == std::string::npos) continue;
        try {
            array.shape.push_back(std::stoll(dim.substr(first)));
        } catch (const std::exception&) {
            throw Error("bad .npy header: shape entry '" + dim + "'", path);
        }
        if (array.shape.back() < 0) throw Error("bad .npy header: negative shape", path);
    }

    const std::size_t data_start = header_start + header_length;
    const std::size_t expected = static_cast<std::size_t>(array.view().numel()) * dtype_size(array.dtype);
    if (contents.size() - data_start < expected)
        throw Error("truncated .npy data: expected " + std::to_string(expected) + " bytes, found " +
                        std::to_string(contents.size() - data_start),
                    path);
    array.bytes.resize(expected);
    std::memcpy(array.bytes.data(), contents.data() + data_start, expected);
    if (fortran && array.shape.size() > 1) array.bytes = fortran_to_c(array.bytes, array.shape, dtype_size(array.dtype));
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
