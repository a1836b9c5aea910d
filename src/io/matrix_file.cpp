#include <cstring>
#include <filesystem>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {
bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

namespace {
// Every matrix file gives at least one matrix: an array with a zero extent (an empty batch such as
// np.zeros((0, 4, 4)), or 0 tokens) is bad input, said here once for every format and every command.
HostArray non_empty(HostArray array, const std::string& where) {
    for (auto extent : array.shape)
        if (extent == 0)
            throw Error("empty array: shape " + shape_text(array.shape) + " has no elements (a zero extent)", where);
    return array;
}
HostArray read_any_matrix_file(const std::string& spec);
}  // namespace

HostArray read_matrix_file(const std::string& spec) {
    const auto marker = spec.find(".safetensors:");
    return non_empty(read_any_matrix_file(spec), marker == std::string::npos ? spec : spec.substr(0, marker + 12) + ":" +
                                                                                        printable(spec.substr(marker + 13)));
}

namespace {
HostArray read_any_matrix_file(const std::string& spec) {
    std::string path = spec, tensor_name;
    const auto marker = spec.find(".safetensors:");
    const bool named = marker != std::string::npos;  // "FILE:" names the tensor "" (the format allows it)
    if (named) {
        path = spec.substr(0, marker + 12);
        tensor_name = spec.substr(marker + 13);
    }
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw Error("no such file", path);
    if (ends_with(path, ".npy")) return read_npy(path);
    if (ends_with(path, ".csv") || ends_with(path, ".tsv") || ends_with(path, ".txt")) return read_csv_matrix(path);
    if (ends_with(path, ".safetensors")) {
        SafetensorsFile file(path);
        if (!named) {
            const auto names = file.names();
            if (names.size() != 1)
                throw Error("file holds " + std::to_string(names.size()) + " tensors; name one as FILE:tensor", path);
            tensor_name = names.front();
        }
        const ArrayView view = file.view(tensor_name);
        HostArray array;
        array.dtype = view.dtype;
        array.shape = view.shape;
        const std::size_t bytes = view.nbytes();  // validated against the file by SafetensorsFile
        array.bytes.resize(bytes);
        if (bytes > 0) std::memcpy(array.bytes.data(), view.data, bytes);
        return array;
    }
    throw Error("unknown matrix file type (expected .npy, .csv or .safetensors[:tensor])", path);
}
}  // namespace

}  // namespace rankscope
