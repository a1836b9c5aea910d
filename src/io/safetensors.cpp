// .safetensors reader (memory-mapped) and writer, written against the published format:
//   8 bytes: N, little-endian uint64 — size of the JSON header
//   N bytes: JSON object {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//                         "__metadata__": {"key": "value"}}  (offsets relative to the byte after the header)
//   rest:    the tensor bytes, little-endian, row-major.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

DType dtype_from_name(const std::string& name, const std::string& where) {
    static const std::map<std::string, DType> table = {
        {"F16", DType::F16}, {"BF16", DType::BF16}, {"F32", DType::F32}, {"F64", DType::F64},
        {"I8", DType::I8},   {"I16", DType::I16},   {"I32", DType::I32}, {"I64", DType::I64},
        {"U8", DType::U8},   {"BOOL", DType::Bool}};
    const auto found = table.find(name);
    if (found == table.end()) throw Error("unsupported safetensors dtype '" + printable(name, 30) + "'", where);
    return found->second;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    const InputFile file(path, "safetensors file");  // a regular file: not /dev/zero, a FIFO or a directory
    if (file.size() < 8)
        throw Error("truncated safetensors file: " + std::to_string(file.size()) + " bytes, less than the 8-byte header size",
                    path);
    std::uint64_t header_size = 0;
    {
        unsigned char length[8];
        file.read_at(0, length, 8, "the safetensors header size");
        for (int b = 7; b >= 0; --b) header_size = (header_size << 8) | length[b];
    }
    if (header_size > kMaxSafetensorsHeaderBytes) {
        // Most often another format altogether (a .npy's "\x93NUMPY" read as a size): said so when no JSON follows.
        char first = '{';
        if (file.size() > 8) file.read_at(8, &first, 1, "the safetensors header");
        throw Error((first != '{' ? std::string("not a safetensors file (a .npy, .pt or other format?): ") : std::string()) +
                        "safetensors header size " + std::to_string(header_size) + " is above the format's limit of " +
                        std::to_string(kMaxSafetensorsHeaderBytes) + " bytes",
                    path);
    }
    if (header_size > file.size() - 8)
        throw Error("truncated safetensors file: header says " + std::to_string(header_size) + " bytes, file has " +
                        std::to_string(file.size() - 8) + " after the size",
                    path);
    if (header_size < 2) throw Error("bad safetensors header: " + std::to_string(header_size) + " bytes", path);
    mapping_size_ = static_cast<std::size_t>(file.size());
    void* mapped = ::mmap(nullptr, mapping_size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    if (mapped == MAP_FAILED) throw Error("cannot memory-map file", path);
    mapping_ = static_cast<const std::byte*>(mapped);

    try {
        const char* header_begin = reinterpret_cast<const char*>(mapping_ + 8);
        if (header_begin[0] != '{') throw Error("bad safetensors header: does not start with '{'", path);
        const nlohmann::json header = parse_json_text(std::string(header_begin, header_size), path);
        if (!header.is_object()) throw Error("bad safetensors header: not a JSON object", path);
        const std::byte* data = mapping_ + 8 + header_size;
        const std::uint64_t data_size = file.size() - 8 - header_size;
        struct Span {
            std::uint64_t begin, end;
            std::string name;
        };
        std::vector<Span> spans;
        for (const auto& [name, entry] : header.items()) {
            if (name == "__metadata__") {
                if (!entry.is_object()) throw Error("bad safetensors __metadata__: not an object", path);
                for (const auto& [key, value] : entry.items()) {
                    if (!value.is_string())
                        throw Error("bad safetensors __metadata__: value of '" + printable(key) + "' is not a string", path);
                    metadata_[key] = value.get<std::string>();
                }
                continue;
            }
            const std::string where = path + ":" + printable(name);
            if (!entry.is_object() || entry.size() != 3 || !entry.contains("dtype") || !entry.contains("shape") ||
                !entry.contains("data_offsets"))
                throw Error("bad safetensors entry: needs exactly dtype, shape and data_offsets", where);
            if (!entry["dtype"].is_string()) throw Error("bad safetensors dtype: not a string", where);
            ArrayView view;
            view.dtype = dtype_from_name(entry["dtype"].get<std::string>(), where);
            const auto& shape = entry["shape"];
            if (!shape.is_array()) throw Error("bad safetensors shape: not a list", where);
            for (const auto& extent : shape) {
                if (!extent.is_number_unsigned() ||
                    extent.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                    throw Error("bad safetensors shape: extents must be non-negative integers below 2^63", where);
                view.shape.push_back(static_cast<std::int64_t>(extent.get<std::uint64_t>()));
            }
            const auto& offsets = entry["data_offsets"];
            if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
                !offsets[1].is_number_unsigned())
                throw Error("bad safetensors data_offsets: need [begin, end], two non-negative integers", where);
            const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
            if (end < begin)
                throw Error("bad safetensors data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                "]: end before begin",
                            where);
            if (end > data_size)
                throw Error("truncated safetensors file: tensor ends at byte " + std::to_string(end) +
                                " of a data section of " + std::to_string(data_size),
                            where);
            const std::int64_t needed = shape_nbytes(view.shape, view.dtype, where);
            if (end - begin != static_cast<std::uint64_t>(needed))
                throw Error("safetensors data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] span " +
                                std::to_string(end - begin) + " bytes, shape " + shape_text(view.shape) + " of " +
                                dtype_name(view.dtype) + " needs " + std::to_string(needed),
                            where);
            view.data = data + begin;
            spans.push_back({begin, end, name});
            entries_.emplace(name, std::move(view));
        }
        // As the format promises: the tensors tile the data section exactly, no overlap, no gap, nothing after.
        std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
            return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
        });
        std::uint64_t covered = 0;
        const Span* previous = nullptr;
        for (const auto& span : spans) {
            const std::string where = path + ":" + printable(span.name);
            if (span.begin < covered)
                throw Error("safetensors data_offsets [" + std::to_string(span.begin) + ", " + std::to_string(span.end) +
                                "] overlap tensor '" + printable(previous->name) + "' [" +
                                std::to_string(previous->begin) + ", " + std::to_string(previous->end) + "]",
                            where);
            if (span.begin > covered)
                throw Error("safetensors data section has bytes " + std::to_string(covered) + ".." +
                                std::to_string(span.begin) + " that belong to no tensor (before this one)",
                            where);
            covered = span.end;
            previous = &span;
        }
        if (covered != data_size)
            throw Error("safetensors data section has " + std::to_string(data_size - covered) +
                            " bytes after the last tensor that belong to no tensor",
                        path);
    } catch (...) {
        ::munmap(const_cast<std::byte*>(mapping_), mapping_size_);
        mapping_ = nullptr;
        throw;
    }
}

SafetensorsFile::~SafetensorsFile() {
    if (mapping_) ::munmap(const_cast<std::byte*>(mapping_), mapping_size_);
}

void SafetensorsFile::release(const std::string& name) const {
    const ArrayView array = view(name);
    // Whole pages around the tensor: a neighbour's pages that go too are read again from the page cache when used.
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t begin = static_cast<std::size_t>(array.data - mapping_) / page * page;
    const std::size_t end = std::min(mapping_size_, static_cast<std::size_t>(array.data - mapping_) + array.nbytes());
    if (end > begin) ::madvise(const_cast<std::byte*>(mapping_) + begin, end - begin, MADV_DONTNEED);
}

std::vector<std::string> SafetensorsFile::names() const {
    std::vector<std::string> out;
    for (const auto& entry : entries_) out.push_back(entry.first);
    return out;
}

ArrayView SafetensorsFile::view(const std::string& name) const {
    const auto found = entries_.find(name);
    if (found != entries_.end()) return found->second;
    std::string available;
    int shown = 0;
    for (const auto& entry : entries_) {
        if (shown++ == 5) {
            available += ", ...";
            break;
        }
        available += (available.empty() ? "" : ", ") + printable(entry.first, 60);
    }
    throw Error("no tensor named '" + printable(name) + "' (file has " + std::to_string(entries_.size()) + ": " + available + ")",
                path_);
}

void write_safetensors(const std::string& path, const std::vector<NamedArray>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::size_t offset = 0;
    for (const auto& tensor : tensors) {
        header[tensor.name] = {{"dtype", dtype_name(tensor.array.dtype)},
                               {"shape", tensor.array.shape},
                               {"data_offsets", {offset, offset + tensor.array.nbytes()}}};
        offset += tensor.array.nbytes();
    }
    std::string header_text = header.dump();
    header_text.append((8 - header_text.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((header_text.size() >> (8 * b)) & 0xff);
    out += header_text;
    out.reserve(out.size() + offset);
    for (const auto& tensor : tensors)
        out.append(reinterpret_cast<const char*>(tensor.array.data), tensor.array.nbytes());
    write_file_atomically(path, out);
}

}  // namespace rankscope
