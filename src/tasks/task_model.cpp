// The per-token model of the trained tasks: embedding → San blocks → unembedding.
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "rankscope/error.hpp"
#include "rankscope/tasks.hpp"

namespace rankscope {

nlohmann::json TaskModelConfig::to_json() const {
    const BlockConfig& block = encoder.block;
    nlohmann::json json = {{"input", input},
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
    if (init != "normal") json["init"] = init;  // configs stored before the choice existed read as "normal"
    return json;
}

namespace {

// PyTorch's nn.Linear default draw (kaiming_uniform_ with a = √5, and its bias rule): W and b ~ U(−1/√fan_in,
// 1/√fan_in), fan_in the inputs of one output unit: W_Q/W_K/W_V [H, d, k] → d; W_O [H, v, d] → H·v; any [in, out]
// matrix → in. Each b_X takes the fan_in of its W_X. Parameters in registration order, so one seed gives one draw.
void draw_uniform_like_linear(torch::nn::Module& model) {
    torch::NoGradGuard no_grad;
    const auto parameters = model.named_parameters();
    std::map<std::string, double> bound_of_weight;
    auto split = [](const std::string& name) {
        const auto dot = name.rfind('.');
        return std::pair{dot == std::string::npos ? std::string() : name.substr(0, dot + 1), name.substr(dot + 1)};
    };
    for (const auto& item : parameters) {
        const auto [prefix, leaf] = split(item.key());
        if (leaf.rfind("W_", 0) != 0 || leaf == "W_E" || leaf == "W_pos") continue;  // embeddings keep N(0, 1)
        const at::Tensor& w = item.value();
        const bool per_head_input = w.dim() == 3 && (leaf == "W_Q" || leaf == "W_K" || leaf == "W_V");
        const std::int64_t fan_in = per_head_input ? w.size(1) : w.numel() / w.size(-1);
        const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
        bound_of_weight[prefix + leaf.substr(2)] = bound;
        at::Tensor(w).uniform_(-bound, bound);
    }
    for (const auto& item : parameters) {
        const auto [prefix, leaf] = split(item.key());
        if (leaf.rfind("b_", 0) != 0) continue;
        const auto weight = bound_of_weight.find(prefix + leaf.substr(2));
        if (weight == bound_of_weight.end()) throw Error("uniform init: no weight W_" + leaf.substr(2) + " for " + item.key());
        at::Tensor(item.value()).uniform_(-weight->second, weight->second);
    }
}

}  // namespace

TaskModelImpl::TaskModelImpl(TaskModelConfig c) : config(std::move(c)) {
    const std::int64_t d = config.encoder.d_model;
    if (config.vocab < 1 || config.outputs < 1) throw Error("task model: vocab/features and outputs must be positive");
    if (config.init != "normal" && config.init != "uniform")
        throw Error("task model: unknown init '" + config.init + "' (expected normal or uniform)");
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
    if (config.init == "uniform") draw_uniform_like_linear(*this);
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
