// TensorFlow.js weights: model.json's weightsManifest and its binary shards, torch-free (use_lite.cpp turns the result
// into tensors). Format (tfjs-converter): {"weightsManifest": [{"paths": ["group1-shard1of7", ...],
// "weights": [{"name": "...", "shape": [..], "dtype": "float32"}, ...]}, ...]}; each group's weights are stored back to
// back in the concatenation of its shards.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <limits>
#include <memory>
#include <set>

#include "rankscope/error.hpp"
#include "rankscope/io.hpp"

namespace rankscope {
namespace {

constexpr std::uint64_t kMaxShardBytes = 1ull << 30;       // per shard (tfjs writes 4 MiB shards)
constexpr std::uint64_t kMaxWeightBytes = 4ull << 30;      // all groups together
constexpr std::size_t kMaxShardsPerGroup = 4096;

}  // namespace

std::vector<TfjsWeight> read_tfjs_weights(const std::string& directory) try {
    const std::filesystem::path folder(directory);
    const std::string model_json = (folder / "model.json").string();
    const nlohmann::json manifest = read_json_file(model_json, "the TensorFlow.js manifest");
    if (!manifest.is_object() || !manifest.contains("weightsManifest"))
        throw Error("no weightsManifest in the TensorFlow.js manifest", model_json);
    const auto& groups = manifest["weightsManifest"];
    if (!groups.is_array()) throw Error("weightsManifest is not a list", model_json);
    std::vector<TfjsWeight> weights;
    std::set<std::string> names;
    std::uint64_t total = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        const auto& group = groups[g];
        const std::string where_group = model_json + ": weightsManifest[" + std::to_string(g) + "]";
        if (!group.is_object() || !group.contains("paths") || !group.contains("weights") || !group["paths"].is_array() ||
            !group["weights"].is_array())
            throw Error("a weights group needs a 'paths' list and a 'weights' list", where_group);
        if (group["paths"].empty() || group["paths"].size() > kMaxShardsPerGroup)
            throw Error("a weights group needs 1 to " + std::to_string(kMaxShardsPerGroup) + " shard paths", where_group);

        // The weights this group describes, their sizes checked, before any shard is opened.
        std::vector<TfjsWeight> described;
        std::int64_t described_bytes = 0;
        for (const auto& weight : group["weights"]) {
            if (!weight.is_object() || !weight.contains("name") || !weight["name"].is_string() ||
                !weight.contains("dtype") || !weight["dtype"].is_string() || !weight.contains("shape") ||
                !weight["shape"].is_array())
                throw Error("a weight needs a string 'name', a string 'dtype' and a 'shape' list", where_group);
            TfjsWeight w;
            w.name = weight["name"].get<std::string>();
            const std::string where = model_json + ": weight '" + printable(w.name) + "'";
            if (!names.insert(w.name).second) throw Error("weight name appears twice", where);
            if (weight.contains("quantization")) throw Error("quantized weights are not supported", where);
            const std::string dtype = weight["dtype"].get<std::string>();
            if (dtype == "float32") w.dtype = DType::F32;
            else if (dtype == "int32") w.dtype = DType::I32;
            else throw Error("unsupported dtype '" + printable(dtype, 30) + "' (float32 or int32)", where);
            for (const auto& extent : weight["shape"]) {
                if (!extent.is_number_unsigned() ||
                    extent.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                    throw Error("shape extents must be non-negative integers", where);
                w.shape.push_back(static_cast<std::int64_t>(extent.get<std::uint64_t>()));
            }
            if (!checked_add(described_bytes, shape_nbytes(w.shape, w.dtype, where), described_bytes) ||
                static_cast<std::uint64_t>(described_bytes) > kMaxWeightBytes)
                throw Error("the weights described add up to more than " + std::to_string(kMaxWeightBytes >> 30) +
                                " GiB",
                            where);
            described.push_back(std::move(w));
        }

        // The shards: plain file names in the model folder (no '/', no '..'), regular files, sizes adding up exactly.
        std::vector<std::unique_ptr<InputFile>> shards;
        std::uint64_t shard_bytes = 0;
        for (const auto& shard : group["paths"]) {
            if (!shard.is_string()) throw Error("a shard path is not a string", where_group);
            const std::string name = shard.get<std::string>();
            if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
                name.find('\0') != std::string::npos)
                throw Error("shard path '" + printable(name) + "' is not a file name in the model folder", where_group);
            const std::string path = (folder / name).string();
            if (!std::filesystem::exists(path)) throw Error("missing weight shard", path);
            shards.push_back(std::make_unique<InputFile>(path, "weight shard"));
            if (shards.back()->size() > kMaxShardBytes)
                throw Error("weight shard is larger than " + std::to_string(kMaxShardBytes >> 30) + " GiB", path);
            shard_bytes += shards.back()->size();
        }
        if (shard_bytes != static_cast<std::uint64_t>(described_bytes)) {
            // TensorFlow.js writes every shard but the last at one size (4 MiB by default): one shorter than the
            // longest of them is the truncated one, else the last is (it named the last whichever was cut).
            std::uint64_t full = 0;
            for (std::size_t i = 0; i + 1 < shards.size(); ++i) full = std::max<std::uint64_t>(full, shards[i]->size());
            std::string last = shards.back()->path();
            for (std::size_t i = 0; i + 1 < shards.size(); ++i)
                if (shards[i]->size() < full) {
                    last = shards[i]->path();
                    break;
                }
            throw Error(shard_bytes < static_cast<std::uint64_t>(described_bytes)
                            ? "weight shards are truncated: they hold " + std::to_string(shard_bytes) +
                                  " bytes, the manifest describes " + std::to_string(described_bytes)
                            : "weight shards hold " + std::to_string(shard_bytes) + " bytes, the manifest describes " +
                                  std::to_string(described_bytes),
                        shard_bytes < static_cast<std::uint64_t>(described_bytes) ? last : model_json);
        }
        total += shard_bytes;
        if (total > kMaxWeightBytes)
            throw Error("the weight shards add up to more than " + std::to_string(kMaxWeightBytes >> 30) + " GiB",
                        model_json);

        // Read the group's bytes, weight by weight, across shard boundaries.
        std::size_t shard = 0;
        std::uint64_t within = 0;
        for (auto& w : described) {
            w.bytes.resize(static_cast<std::size_t>(shape_nbytes(w.shape, w.dtype, w.name)));
            std::uint64_t filled = 0;
            while (filled < w.bytes.size()) {
                while (within == shards[shard]->size()) {
                    ++shard;
                    within = 0;
                }
                const std::uint64_t take = std::min<std::uint64_t>(w.bytes.size() - filled, shards[shard]->size() - within);
                shards[shard]->read_at(within, w.bytes.data() + filled, take, "weight '" + printable(w.name) + "'");
                filled += take;
                within += take;
            }
            weights.push_back(std::move(w));
        }
    }
    return weights;
} catch (const nlohmann::json::exception& error) {
    throw_json_content_error(error, directory + "/model.json");
}

}  // namespace rankscope
