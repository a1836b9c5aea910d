// A decoder read one layer at a time from its memory-mapped checkpoint (load_hf_model_streamed in models.hpp).
//
//   open:    config.json, the checkpoint headers; every tensor the model needs is checked for presence, shape and
//            dtype (no value is read), so a bad layer 30 fails before layer 0 runs.
//   forward: token rows   = the rows of the stored token embedding that the batch uses (gathered from the mapping:
//                           only their pages are read), converted to float32
//            layer l      = the one layer module (made when the model is opened, on the device) refilled from the
//                           shards (converted, checked finite, pages released), run by every surgery, then
//                           overwritten by layer l + 1
// Peak memory: one layer in float32 + the top module (position embedding, final norm) + the rows + activations.
#include <fmt/format.h>
#include <torch/torch.h>

#include <filesystem>
#include <set>

#include "loaders/hf_checkpoint.hpp"
#include "loaders/hf_weights.hpp"
#include "models/decoder.hpp"
#include "rankscope/error.hpp"
#include "rankscope/progress.hpp"

namespace rankscope {
namespace {

std::vector<std::int64_t> shape_of(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

class StreamedLayers : public models::LayerSource {
public:
    StreamedLayers(std::shared_ptr<const HfCheckpoint> weights, std::string prefix, HfConfig config,
                   const models::DecoderLayout& layout, std::string layer_list)
        : weights_(std::move(weights)), prefix_(std::move(prefix)), config_(std::move(config)), layout_(layout),
          layer_list_(std::move(layer_list)), module_(layout_.make_layer(config_)) {}

    std::string layer_name(int l, const std::string& name) const {
        return prefix_ + layer_list_ + std::to_string(l) + "." + name;
    }

    at::Tensor token_embedding(const at::Tensor& ids) override {
        const std::string stored = prefix_ + layout_.token_embedding;
        const at::Tensor rows =
            detail::stored_tensor(*weights_, stored).index_select(0, ids.to(at::kCPU).flatten()).to(torch::kFloat);
        weights_->release(stored);
        if (!torch::isfinite(rows).all().item<bool>())
            throw Error("weights contain NaN or Inf (in the rows of the tokens used)", weights_->where(stored));
        std::vector<std::int64_t> shape = shape_of(ids);
        shape.push_back(rows.size(1));
        return rows.view(shape).to(device_);
    }

    // One layer module, made when the model is opened (its parameters allocated, not drawn) and refilled for each
    // layer: the caller is done with layer l - 1 when it asks for layer l (layer-major forward).
    std::shared_ptr<torch::nn::Module> layer(int l) override {
        if (l == 0) progress_ = std::make_unique<Progress>("layers (streamed)", config_.layers);
        for (auto& item : module_->named_parameters()) {
            at::Tensor parameter = item.value();
            detail::load_parameter(*weights_, layer_name(l, item.key()), parameter);  // converted, checked, copied
        }
        progress_->advance();
        if (l + 1 == config_.layers) progress_.reset();
        return module_;
    }

    void to(const at::Device& device) override {
        device_ = device;
        module_->to(device);
    }

private:
    std::shared_ptr<const HfCheckpoint> weights_;
    std::string prefix_;
    HfConfig config_;
    const models::DecoderLayout& layout_;
    std::string layer_list_;  // "h.", "layers." (the architecture's row)
    at::Device device_ = at::kCPU;
    std::unique_ptr<Progress> progress_;
    std::shared_ptr<torch::nn::Module> module_;  // after layout_ and config_: made from them
};

}  // namespace

std::unique_ptr<EncoderModel> load_hf_model_streamed(const std::string& directory) {
    const std::filesystem::path folder = directory;
    if (!std::filesystem::is_directory(folder)) throw Error("not a model folder", directory);
    const HfConfig config = read_hf_config((folder / "config.json").string());
    const models::DecoderLayout* layout = detail::decoder_layout_of(config);
    if (!layout)
        throw Error("streamed loading reads decoders (gpt2, gpt_neox, llama, mistral, qwen2), not model_type '" + config.model_type +
                        "': load it whole",
                    config.path);
    const char* stored_layer_list = detail::layer_list_of(config);
    if (!stored_layer_list)
        throw Error("streamed loading reads one stored layer at a time, and model_type '" + config.model_type +
                        "' stores no per-layer list: load it whole",
                    config.path);
    const std::string layer_list = stored_layer_list;
    auto weights = std::make_shared<const HfCheckpoint>(directory);

    // The model without layers and with a one-row token embedding: what stays in memory.
    HfConfig top_config = config;
    top_config.layers = 0;
    top_config.vocab_size = 1;
    const auto top = layout->make_top(top_config);
    const std::string prefix = detail::checkpoint_prefix(*weights, layout->token_embedding);

    // Every tensor checked before any work: presence, shape, dtype.
    std::vector<std::string> missing;
    std::set<std::string> read;  // every stored name the model will read, now or layer by layer
    auto check = [&](const std::string& stored, const std::vector<std::int64_t>& shape) {
        read.insert(stored);
        if (!weights->contains(stored)) return missing.push_back(stored);
        detail::check_stored_tensor(*weights, stored, shape);
    };
    check(prefix + layout->token_embedding, {config.vocab_size, config.hidden_size});
    for (const auto& item : top->named_parameters())
        if (item.key() != layout->token_embedding) check(prefix + item.key(), shape_of(item.value()));
    {
        const auto one_layer = layout->make_layer(config);
        for (int l = 0; l < config.layers; ++l)
            for (const auto& item : one_layer->named_parameters())
                check(prefix + layer_list + std::to_string(l) + "." + item.key(), shape_of(item.value()));
    }
    detail::check_layer_count(config, *weights, prefix + layer_list);  // after the shapes, as whole
    detail::throw_missing(missing, weights->source());
    detail::warn_unread_tensors(*weights, prefix, read, config);
    for (auto& item : top->named_parameters()) {
        at::Tensor parameter = item.value();
        if (item.key() == layout->token_embedding) {  // one row, never read (the rows come from the checkpoint)
            detail::zero_unread_parameter(parameter);
            continue;
        }
        detail::load_parameter(*weights, prefix + item.key(), parameter);
    }
    auto source = std::make_unique<StreamedLayers>(weights, prefix, config, *layout, layer_list);
    return std::make_unique<models::DecoderModel>(
        config, top, std::move(source), layout->forward);
}

std::int64_t hf_model_float32_bytes(const std::string& directory) {
    const HfCheckpoint weights(directory);
    std::int64_t total = 0;
    for (const auto& name : weights.names()) total += weights.view(name).numel() * 4;
    return total;
}

}  // namespace rankscope
