// DecoderModel: a decoder whose forward runs every surgery layer-major over layers from a LayerSource (the module in
// memory, or streamed from the checkpoint: src/loaders/hf_streamed.cpp).
#include "models/decoder.hpp"
#include "rankscope/error.hpp"

namespace rankscope {

std::vector<at::Tensor> EncoderModel::forward_all(const ModelBatch& batch, const std::vector<Surgery>& surgeries,
                                                  const std::vector<Recorder*>& recorders) {
    if (recorders.size() != surgeries.size()) throw Error("forward_all: one recorder (or null) per surgery");
    std::vector<at::Tensor> outputs;
    for (std::size_t s = 0; s < surgeries.size(); ++s) outputs.push_back(forward(batch, surgeries[s], recorders[s]));
    return outputs;
}

at::Tensor EncoderModel::forward_for_training(const ModelBatch&) {
    throw Error("this model cannot be trained by rankscope (BERT and ALBERT can)", config().path);
}

namespace models {

DecoderModel::DecoderModel(HfConfig config, std::shared_ptr<torch::nn::Module> module, torch::nn::ModuleList layers,
                           Embedding embedding, DecoderForward forward)
    : config_(std::move(config)),
      module_(std::move(module)),
      source_(std::make_unique<ModuleLayers>(std::move(layers), std::move(embedding))),
      forward_(std::move(forward)) {}

DecoderModel::DecoderModel(HfConfig config, std::shared_ptr<torch::nn::Module> top, std::unique_ptr<LayerSource> source,
                           DecoderForward forward)
    : config_(std::move(config)), module_(std::move(top)), source_(std::move(source)), forward_(std::move(forward)),
      streamed_(true) {}

at::Tensor DecoderModel::forward(const ModelBatch& batch, const Surgery& surgery, Recorder* recorder) {
    return forward_all(batch, {surgery}, {recorder}).front();
}

std::vector<at::Tensor> DecoderModel::forward_all(const ModelBatch& batch, const std::vector<Surgery>& surgeries,
                                                  const std::vector<Recorder*>& recorders) {
    if (recorders.size() != surgeries.size()) throw Error("forward_all: one recorder (or null) per surgery");
    if (surgeries.empty()) return {};  // nothing to run: no layer is read
    torch::NoGradGuard no_grad;
    return forward_(*module_, config_, batch, surgeries, recorders, linears_, *source_);
}

std::vector<std::pair<std::string, at::Tensor>> DecoderModel::parameters() {
    if (streamed_)
        throw Error("a streamed model holds one layer at a time, not its parameters: load it whole to read them",
                    config_.path);
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& item : module_->named_parameters()) out.emplace_back(item.key(), item.value());
    return out;
}

void DecoderModel::to(const at::Device& device) {
    module_->to(device);
    source_->to(device);
    device_ = device;
}

}  // namespace models
}  // namespace rankscope
