// The per-token model of the trained tasks: embedding → San blocks → unembedding.
#include <torch/torch.h>

#include <cmath>

#include "rankscope/error.hpp"
#include "rankscope/tasks.hpp"

namespace rankscope {

nlohmann::json TaskModelConfig::to_json() const {
    const BlockConfig& block = encoder.block;
    return {{"input", input},
            {"vocab", vocab},
            {"positions", positions},
            {"two_layer_embedding", two_layer_embedding},
            {"embedding_layer_norm", embedding_layer_norm},
            {"outputs", outputs},
            {"layers", encoder.layers},
            {"heads", encoder.heads},
            {"d_model", encoder.d_model},
            {"biases", encoder.biases},
            {"attention_skip", block.attention_skip},
            {"mlp", block.mlp},
            {"mlp_skip", block.mlp_skip},
            {"mlp_width", block.mlp_width},
            {"activation", block.activation == Activation::GELU ? "gelu" : "relu"},
            {"layer_norm", to_string(block.layer_norm)}};
}

TaskModelImpl::TaskModelImpl(TaskModelConfig c) : config(std::move(c)) {
    const std::int64_t d = config.encoder.d_model;
    if (config.vocab < 1 || config.outputs < 1) throw Error("task model: vocab/features and outputs must be positive");
    // Parameter groups named as in TransformerLens (a plain Module per group).
    auto group = [this](const std::string& name) { return register_module(name, std::make_shared<torch::nn::Module>()); };
    if (config.input == "tokens") {
        W_E = group("embed")->register_parameter("W_E", torch::randn({config.vocab, d}));
        if (config.positions > 0) W_pos = group("pos_embed")->register_parameter("W_pos", torch::randn({config.positions, d}));
    } else if (config.input == "coordinates") {
        auto embed_group = group("embed");
        W_in = embed_group->register_parameter("W_in", torch::randn({config.vocab, d}) / std::sqrt(double(config.vocab)));
        b_in = embed_group->register_parameter("b_in", torch::zeros({d}));
        if (config.two_layer_embedding) {
            W_hidden = embed_group->register_parameter("W_hidden", torch::randn({d, d}) / std::sqrt(double(d)));
            b_hidden = embed_group->register_parameter("b_hidden", torch::zeros({d}));
        }
    } else {
        throw Error("task model: unknown input kind '" + config.input + "' (tokens or coordinates)");
    }
    if (config.embedding_layer_norm) ln_embed = register_module("ln_embed", NormLayer(d, LayerNormKind::Post));
    encoder = San(config.encoder);
    register_module("blocks", encoder->blocks);  // blocks.{l}.attn.W_Q, ... at the top level
    auto unembed_group = group("unembed");
    W_U = unembed_group->register_parameter("W_U", torch::randn({d, config.outputs}) / std::sqrt(double(d)));
    b_U = unembed_group->register_parameter("b_U", torch::zeros({config.outputs}));
}

at::Tensor TaskModelImpl::embed(const at::Tensor& inputs) {
    at::Tensor h;
    if (config.input == "tokens") {
        h = W_E.index_select(0, inputs.reshape(-1)).reshape({inputs.size(0), inputs.size(1), -1});
        if (W_pos.defined()) {
            if (inputs.size(1) > config.positions)
                throw Error("sequence longer than the model's learned positions (" + std::to_string(config.positions) + ")");
            h = h + W_pos.narrow(0, 0, inputs.size(1));
        }
    } else {
        h = torch::matmul(inputs, W_in) + b_in;
        if (config.two_layer_embedding) h = torch::matmul(torch::gelu(h), W_hidden) + b_hidden;
    }
    return config.embedding_layer_norm ? ln_embed->forward(h) : h;
}

at::Tensor TaskModelImpl::unembed(const at::Tensor& hidden) { return torch::matmul(hidden, W_U) + b_U; }

at::Tensor TaskModelImpl::forward(const TaskBatch& batch, Recorder* recorder) {
    const at::Tensor hidden = encoder->forward(embed(batch.inputs), recorder, batch.key_bias);
    return unembed(record(recorder, "hook_final", hidden));
}

std::int64_t parameter_count(TaskModel& model) {
    std::int64_t total = 0;
    for (const auto& parameter : model->parameters()) total += parameter.numel();
    return total;
}

}  // namespace rankscope
