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

HostArray read_matrix_file(const std::string& spec) {
    std::string path = spec, tensor_name;
    const auto marker = spec.find(".safetensors:");
    if (marker != std::string::npos) {
        path = spec.substr(0, marker + 12);
        tensor_name = spec.substr(marker + 13);
    }
    if (!std::filesystem::exists(path)) throw Error("no such file", path);
    if (ends_with(path, ".npy")) return read_npy(path);
    if (ends_with(path, ".csv") || ends_with(path, ".tsv") || ends_with(path, ".txt")) return read_csv_matrix(path);
    if (ends_with(path, ".safetensors")) {
        SafetensorsFile file(path);
        if (tensor_name.empty()) {
            const auto names = file.names();
            if (names.size() != 1)
                throw Error("file holds " + std::to_string(names.size()) + " tensors; name one as FILE:tensor", path);
            tensor_name = names.front();
        }
        const ArrayView view = file.view(tensor_name);
        HostArray array;
        array.dtype = view.dtype;
        array.shape = view.shape;
        array.bytes.resize(view.nbytes());
        if (view.nbytes() > 0) std::memcpy(array.bytes.data(), view.data, view.nbytes());
        return array;
    }
    throw Error("unknown matrix file type (expected .npy, .csv or .safetensors[:tensor])", path);
}

}  // namespace rankscope
