#pragma once
// The tensors of a Hugging Face folder as users hold them: one model.safetensors, or a sharded checkpoint
// (model.safetensors.index.json whose "weight_map" names, for every tensor, the shard file holding it). Shards are
// memory-mapped and opened once each. Errors are one line naming the file and the problem: a missing shard, a shard
// name that is not a plain file name in the folder, a tensor the index maps to a shard that does not hold it.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rankscope/io.hpp"

namespace rankscope {

class HfCheckpoint {
public:
    // Reads `directory`/model.safetensors when present (as transformers does when both are there), else
    // `directory`/model.safetensors.index.json and its shards.
    explicit HfCheckpoint(const std::string& directory);
    // Every tensor name (sorted).
    std::vector<std::string> names() const;
    bool contains(const std::string& name) const { return location_.count(name) != 0; }
    // The tensor's bytes (valid while this object lives) and "<shard path>:<name>" for messages.
    ArrayView view(const std::string& name) const;
    std::string where(const std::string& name) const;
    // The tensor's pages leave this process's resident memory (SafetensorsFile::release).
    void release(const std::string& name) const;
    // The index file, or the single model.safetensors: what to name when a tensor is missing altogether.
    const std::string& source() const { return source_; }

private:
    std::string source_;
    std::map<std::string, std::string> location_;                         // tensor → shard path
    std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;      // shard path → file
};

}  // namespace rankscope
