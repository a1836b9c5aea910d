// .safetensors reader (memory-mapped) and writer, written against the published format:
//   8 bytes: N, little-endian uint64 — size of the JSON header
//   N bytes: JSON object {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//                         "__metadata__": {"key": "value"}}  (offsets relative to the byte after the header)
//   rest:    the tensor bytes, little-endian, row-major.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
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
    if (found == table.end()) throw Error("unsupported safetensors dtype '" + name + "'", where);
    return found->second;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw Error("cannot open file", path);
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
        ::close(fd);
        throw Error("cannot stat file", path);
    }
    mapping_size_ = static_cast<std::size_t>(info.st_size);
    if (mapping_size_ < 8) {
        ::close(fd);
        throw Error("truncated safetensors file: " + std::to_string(mapping_size_) + " bytes", path);
    }
    void* mapped = ::mmap(nullptr, mapping_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (mapped == MAP_FAILED) throw Error("cannot memory-map file", path);
    mapping_ = static_cast<const std::byte*>(mapped);

    try {
        std::uint64_t header_size = 0;
        for (int b = 7; b >= 0; --b) header_size = (header_size << 8) | static_cast<std::uint8_t>(mapping_[b]);
        if (header_size > mapping_size_ - 8)
            throw Error("truncated safetensors file: header says " + std::to_string(header_size) + " bytes, file has " +
                            std::to_string(mapping_size_ - 8),
                        path);
        const char* header_begin = reinterpret_cast<const char*>(mapping_ + 8);
        nlohmann::json header;
        try {
            header = nlohmann::json::parse(header_begin, header_begin + header_size);
        } catch (const nlohmann::json::exception& e) {
            throw Error(std::string("bad safetensors header JSON: ") + e.what(), path);
        }
        if (!header.is_object()) throw Error("bad safetensors header: not a JSON object", path);
        const std::byte* data = mapping_ + 8 + header_size;
        const std::size_t data_size = mapping_size_ - 8 - header_size;
        for (const auto& [name, entry] : header.items()) {
            if (name == "__metadata__") {
                if (!entry.is_object()) throw Error("bad safetensors __metadata__: not an object", path);
                for (const auto& [key, value] : entry.items())
                    metadata_[key] = value.is_string() ? value.get<std::string>() : value.dump();
                continue;
            }
            const std::string where = path + ":" + name;
            if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
                !entry.contains("data_offsets"))
                throw Error("bad safetensors entry: needs dtype, shape and data_offsets", where);
            ArrayView view;
            view.dtype = dtype_from_name(entry["dtype"].get<std::string>(), where);
            for (const auto& extent : entry["shape"]) {
                if (!extent.is_number_integer() || extent.get<std::int64_t>() < 0)
                    throw Error("bad safetensors shape", where);
                view.shape.push_back(extent.get<std::int64_t>());
            }
            const auto& offsets = entry["data_offsets"];
            if (!offsets.is_array() || offsets.size() != 2) throw Error("bad safetensors data_offsets", where);
            const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
            if (end < begin || end - begin != view.nbytes())
                throw Error("safetensors data_offsets span " + std::to_string(end - begin) + " bytes, shape needs " +
                                std::to_string(view.nbytes()),
                            where);
            if (end > data_size)
                throw Error("truncated safetensors file: tensor ends at byte " + std::to_string(end) +
                                " of a data section of " + std::to_string(data_size),
                            where);
            view.data = data + begin;
            entries_.emplace(name, std::move(view));
        }
    } catch (...) {
        ::munmap(const_cast<std::byte*>(mapping_), mapping_size_);
        mapping_ = nullptr;
        throw;
    }
}

SafetensorsFile::~SafetensorsFile() {
    if (mapping_) ::munmap(const_cast<std::byte*>(mapping_), mapping_size_);
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
        available += (available.empty() ? "" : ", ") + entry.first;
    }
    throw Error("no tensor named '" + name + "' (file has " + std::to_string(entries_.size()) + ": " + available + ")",
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
