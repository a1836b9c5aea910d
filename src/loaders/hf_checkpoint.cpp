// model.safetensors or model.safetensors.index.json + shards (see hf_checkpoint.hpp).
#include "loaders/hf_checkpoint.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "rankscope/io.hpp"
#include "rankscope/error.hpp"

namespace rankscope {

HfCheckpoint::HfCheckpoint(const std::string& directory) try {
    const std::filesystem::path folder = directory;
    const std::filesystem::path index = folder / "model.safetensors.index.json";
    const std::filesystem::path single = folder / "model.safetensors";
    // transformers' from_pretrained reads model.safetensors when a folder holds both it and an index: so does rankscope
    // (the index's shards were read before, and gave other numbers than transformers on the same folder).
    if (std::filesystem::exists(single) || !std::filesystem::exists(index)) {
        if (!std::filesystem::exists(single)) {
            // PyTorch's pickle (pytorch_model.bin, its sharded index) is not read: unpickling is code execution in
            // Python, and a second parser of it here would be one more hostile-input surface. Say how to convert.
            for (const char* pickle : {"pytorch_model.bin", "pytorch_model.bin.index.json"})
                if (std::filesystem::exists(folder / pickle))
                    throw Error(std::string("missing model.safetensors: the folder holds ") + pickle +
                                    " (PyTorch's pickle format, not read); convert it once in Python: "
                                    "AutoModel.from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True)",
                                single.string());
            throw Error("missing model.safetensors (and no model.safetensors.index.json)", single.string());
        }
        source_ = single.string();
        auto file = std::make_unique<SafetensorsFile>(source_);
        for (const auto& name : file->names()) location_[name] = source_;
        shards_.emplace(source_, std::move(file));
        return;
    }
    source_ = index.string();
    const nlohmann::json json = read_json_file(source_, "checkpoint index");
    if (!json.is_object() || !json.contains("weight_map") || !json["weight_map"].is_object())
        throw Error("checkpoint index has no \"weight_map\" object", source_);
    for (const auto& [name, shard] : json["weight_map"].items()) {
        if (!shard.is_string()) throw Error("weight_map entry '" + printable(name) + "' is not a file name", source_);
        const std::string file_name = shard.get<std::string>();
        // A shard is a plain file in the folder: never a path elsewhere, nor a name that the file system would cut at a
        // NUL ("\u0000" in JSON: "model-00001.safetensors\u0000x" opened model-00001.safetensors).
        if (file_name.empty() || file_name.find_first_of(std::string("/\0", 2)) != std::string::npos || file_name == "." ||
            file_name == "..")
            throw Error("weight_map entry '" + printable(name) + "' names '" + printable(file_name) +
                            "', not a file name in the checkpoint folder",
                        source_);
        const std::string path = (folder / file_name).string();
        if (!shards_.count(path)) {
            if (!std::filesystem::exists(path))
                throw Error("missing shard " + printable(file_name) + " (named by " + source_ + ")", path);
            shards_.emplace(path, std::make_unique<SafetensorsFile>(path));
        }
        if (!shards_.at(path)->contains(name))
            throw Error("tensor '" + printable(name) + "' is mapped to this shard by the index, but the shard does not hold it",
                        path);
        location_[name] = path;
    }
    if (location_.empty()) throw Error("checkpoint index has an empty weight_map", source_);
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, directory + "/model.safetensors.index.json");  // the only JSON read here
}

std::vector<std::string> HfCheckpoint::names() const {
    std::vector<std::string> out;
    for (const auto& entry : location_) out.push_back(entry.first);
    return out;
}

ArrayView HfCheckpoint::view(const std::string& name) const {
    const auto found = location_.find(name);
    if (found == location_.end()) throw Error("no tensor named '" + printable(name) + "'", source_);
    return shards_.at(found->second)->view(name);
}

void HfCheckpoint::release(const std::string& name) const {
    const auto found = location_.find(name);
    if (found != location_.end()) shards_.at(found->second)->release(name);
}

std::string HfCheckpoint::where(const std::string& name) const {
    const auto found = location_.find(name);
    return (found == location_.end() ? source_ : found->second) + ":" + name;
}

}  // namespace rankscope
